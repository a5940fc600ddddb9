"""WindowState: the slots of one window's incremental state, their layout, allocation, growth and reads.

Rows live in *slots* of preallocated tensors, in no particular order; attention is causal by
position value, so slot order never matters and an insertion or deletion moves no data. `order`
lists the slots in document order (BOS first). Row tensors have cap + 1 rows: the last is the
trash slot, never alive, which the padded entries of bucketed index lists read and write. What a
window is made of is the closed record WindowRecord (record.py), versioned by STATE_FORMAT: a
snapshot stores exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..costs import dense_macs
from ..model import VQOPT
from .constants import LayerConstants
from .policy import FAR, SLACK
from .record import RECORD_FIELDS, WindowRecord
from .rows import finish_rows

# the slot dimension of each device tensor a window grows (WindowState.grow)
GROWN_ALONG = {"key_pos": 0, "embed_idx": 0, "cls_logp": 0, "nll": 0, "outputs": 1, "qkv": 3, "sums": 1, "codes": 1}


@dataclass
class LayerView:
    """One layer's slices of the state, in the shapes the update reads (remade when tensors grow)."""

    qkv: torch.Tensor  # q, k, v head-major (3, H, slots, hd)
    qkv_by_slot: torch.Tensor  # the same, slot first (slots, 3, H, hd): a few rows read or written
    sums: torch.Tensor  # (slots, C)
    codes: torch.Tensor  # (slots, h)
    keys_by_head: torch.Tensor  # every key, head-major (H, hd, slots)
    values_by_head: torch.Tensor  # every value, head-major (H, slots, hd)
    queries_by_head: torch.Tensor  # every query, head-major (H, slots, hd)
    outputs: torch.Tensor | None  # the layer's outputs (full layout)
    key_pos: torch.Tensor  # (slots,) every slot's position, FAR where not alive

    def qkv_rows(self, slots: torch.Tensor) -> torch.Tensor:
        """The q|k|v rows (r, 3d) of some slots (advanced indexing reads only those rows)."""
        return self.qkv_by_slot[slots].view(slots.shape[0], -1)

    def write_qkv_rows(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Write q|k|v rows (r, 3d) of some slots into the head-major blocks."""
        self.qkv_by_slot.index_put_((slots,), rows.view(rows.shape[0], *self.qkv_by_slot.shape[1:]))


def running_sums(rows: torch.Tensor) -> np.ndarray:
    """Rows (n, c) -> their running sums from zero, float64 (n + 1, c), read-only: rows [a, b) sum
    to row b minus row a, two reads instead of a gather and a sum on the device per span."""
    out = np.zeros((rows.shape[0] + 1, rows.shape[1]))
    np.cumsum(rows.cpu().numpy(), axis=0, dtype=np.float64, out=out[1:])
    out.setflags(write=False)
    return out


class WindowState:
    """BOS plus up to `window_tokens - 1` tokens, with every layer's state: a container of its
    WindowRecord's fields and the views and reads made from them. A dense pass builds and checks it
    (dense.py), an update keeps it exact (passes.py)."""

    # Held besides the WindowRecord's fields: model objects (re-attached), views, reads, captures (remade).
    ATTACHED = (
        *("net", "cfg", "consts", "tie_rel", "tie_growth", "tie_code_term", "layer_views"),
        *("revision", "_rows_of", "_rows_array", "_host_reads", "_cls_prefix", "graphs"),
    )

    def __init__(self, net: VQOPT, consts: LayerConstants, tie_rel: float = 1e-9, tie_growth: float = 0.0) -> None:
        """A state attached to the model's objects (never stored in a snapshot), its fields not yet
        made: `allocate` then a build (dense.build), or `restore` from a record."""
        self.net, self.cfg, self.consts, self.tie_rel, self.tie_growth = net, net.config, consts, tie_rel, tie_growth
        self.tie_code_term = [tie_rel * m for m in consts.code_sq_max]  # the tie guard's code term, (h,) per layer
        self.revision = 0  # bumped by every build and update: the host reads below are kept per revision
        self._rows_of: list[int] | None = None  # the `order` list `_rows_array` was made from
        self._rows_array = np.zeros(0, dtype=np.int64)
        self._host_reads: tuple[int, np.ndarray, np.ndarray] | None = None  # (revision, token ids, surprise)
        self._cls_prefix: tuple[int, np.ndarray] | None = None  # (revision, class log-probability running sums)

    @classmethod
    def restore(
        cls, net: VQOPT, consts: LayerConstants, tie_rel: float, tie_growth: float, record: WindowRecord
    ) -> WindowState:
        """A state from its record (its fields taken, not copied), re-attached to the model."""
        state = cls(net, consts, tie_rel, tie_growth)
        for name in RECORD_FIELDS:
            setattr(state, name, getattr(record, name))
        state.make_views()
        return state

    def record(self) -> WindowRecord:
        """The fields the state is made of (the same objects, not copies): what a snapshot stores."""
        return WindowRecord(**{name: getattr(self, name) for name in RECORD_FIELDS})

    # ----------------------------------------------------------------- layout
    def per_vq_head(self, t: torch.Tensor) -> torch.Tensor:
        """Sums rows (..., C) -> their code projections per VQ head (..., h, K) (a view)."""
        return t[..., : self.consts.proj_width].unflatten(-1, (self.cfg.vq_heads, -1))

    def split_sums(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sums rows (r, C) -> (their code projections per VQ head (r, h, K), u (r, h)) (views)."""
        p, u = t.split([self.consts.proj_width, self.cfg.vq_heads], -1)
        return p.view(t.shape[0], self.cfg.vq_heads, -1), u

    def bounds_of(self, t: torch.Tensor) -> torch.Tensor:
        """Sums rows (..., C) -> u, the upper bounds of |s^j| per VQ head (..., h) (a view)."""
        return t[..., self.consts.proj_width :]

    @property
    def proj(self) -> torch.Tensor:
        """Code projections s . c per VQ head: (layers, slots, h, K)."""
        return self.per_vq_head(self.sums)

    @property
    def alive(self) -> torch.Tensor:
        """Which slots hold a row (BOS or a token): (cap + 1,) bool."""
        return self.key_pos < FAR

    @property
    def trash(self) -> int:
        return self.cap

    # ----------------------------------------------------------------- storage
    def allocate(self, n: int) -> None:
        """Zeroed slots for n rows and room to grow (SLACK), the first n in document order (a build
        fills them)."""
        cfg, consts = self.cfg, self.consts
        p = next(self.net.parameters())
        dev, dt = p.device, p.dtype
        cap = max(16, int(n * SLACK))
        L, d, h, C = cfg.num_hidden_layers, cfg.hidden_size, cfg.vq_heads, consts.sum_width
        self.cap = cap
        self.ids_host = np.zeros(cap + 1, dtype=np.int64)
        self.pos_host = np.zeros(cap + 1, dtype=np.int64)
        self.key_pos = torch.full((cap + 1,), FAR, dtype=dt, device=dev)
        self.embed_idx = torch.zeros(cap + 1, 3, dtype=torch.long, device=dev)
        H = cfg.num_attention_heads
        self.qkv = torch.zeros(L, 3, H, cap + 1, d // H, dtype=dt, device=dev)
        self.sums = torch.zeros(L, cap + 1, C, dtype=dt, device=dev)
        self.codes = torch.zeros(L, cap + 1, h, dtype=torch.long, device=dev)
        self.cls_logp = torch.zeros(cap + 1, cfg.num_labels, dtype=dt, device=dev)
        self.nll = torch.zeros(cap + 1, dtype=dt, device=dev)
        # layer outputs: kept with the "full" layout (and without VQ, where an output needs its attention)
        self.outputs = torch.zeros(L, cap + 1, d, dtype=dt, device=dev) if consts.keep_outputs or not cfg.vq else None
        self.order = list(range(n))
        self.free = list(range(cap - 1, n - 1, -1))

    def drop_outputs(self) -> int:
        """Drop the layer outputs (full layout -> lean), the bytes freed; the state stays exact (an update
        recomputes the few it needs: `layer_input`). A model without VQ needs them: kept."""
        freed = 0 if self.outputs is None or not self.cfg.vq else self.outputs.element_size() * self.outputs.nelement()
        if freed:
            self.outputs = None
            self.make_views()
        return freed

    def update_total(self) -> None:
        """cls_total: the sum of the tokens' class log-probabilities (BOS excluded), kept per window
        so that a document's score costs the same few ops whatever its number of windows."""
        rows = torch.from_numpy(self.rows()[1:].copy()).to(self.key_pos.device)
        self.cls_total = self.cls_logp.index_select(0, rows).sum(0)

    def make_views(self) -> None:
        """Per-layer views the update reads (remade whenever the tensors are reallocated)."""
        self.graphs = None  # graphed sizing's captured passes (graphs.PassGraphs) read the old tensors
        self.layer_views = []
        for l in range(self.cfg.num_hidden_layers):
            t = self.qkv[l]  # (3, H, slots, hd): each head's queries, keys and values one block
            self.layer_views.append(
                LayerView(
                    qkv=t,
                    qkv_by_slot=t.permute(2, 0, 1, 3),
                    sums=self.sums[l],
                    codes=self.codes[l],
                    keys_by_head=t[1].transpose(1, 2),
                    values_by_head=t[2],
                    queries_by_head=t[0],
                    outputs=None if self.outputs is None else self.outputs[l],
                    key_pos=self.key_pos,
                )
            )

    def layer_input(self, l: int, rows: torch.Tensor) -> torch.Tensor:
        """Input rows of layer l (l = L: the last layer's output): kept (full layout), or from the
        rows' embedding and their codes at the earlier layers, the same finish as the pass that wrote
        them (l output projections and FFNs per row, no attention). An update needs it only for rows
        whose code flipped at layer l without being dirty there."""
        if l and self.outputs is not None:  # the full layout keeps them
            return self.layer_views[l - 1].outputs.index_select(0, rows)
        x = self.consts.embed(self.embed_idx.index_select(0, rows))
        for j in range(l):
            x = finish_rows(
                self.consts,
                j,
                self.net.layers[j].final_layer_norm,
                x,
                self.code_vectors(j, self.codes[j].index_select(0, rows)),
            )
        return x

    def code_vectors(self, l: int, codes: torch.Tensor) -> torch.Tensor:
        """A VQ layer's output before its projection: each VQ head's code vector, concatenated (r, d)."""
        return self.net.layers[l].vq.codebook[self.consts.vq_heads_idx, codes].flatten(-2)

    def hidden(self, slots: torch.Tensor) -> torch.Tensor:
        """Final hidden states (after the last LayerNorm) of some slots: what the LM head reads
        (lean layout: recomputed from their codes, L layer finishes per row)."""
        return self.net.decoder.final_layer_norm(self.layer_input(self.cfg.num_hidden_layers, slots))

    def successors(self) -> np.ndarray:
        """Each slot's next row in document order (the trash slot for the last row and dead slots)."""
        succ = np.full(self.cap + 1, self.trash, dtype=np.int64)
        succ[self.order[:-1]] = self.order[1:]
        return succ

    # ----------------------------------------------------------------- reading
    @property
    def n_tokens(self) -> int:
        """Tokens in the window, BOS not counted."""
        return len(self.order) - 1

    def rows(self) -> np.ndarray:
        """`order` as an array (BOS first, read-only), made once per order: a publish reads every
        window's tokens and surprise, and turning a 2,048-int list into an index on each read cost
        more than the reads themselves."""
        if self._rows_of is not self.order:  # an update replaces the list, never changes it in place
            rows = np.asarray(self.order, dtype=np.int64)
            rows.setflags(write=False)
            self._rows_of, self._rows_array = self.order, rows
        return self._rows_array

    def _host(self) -> tuple[np.ndarray, np.ndarray]:
        """(token ids, surprise as float64) of the tokens in order, read to the host once per revision."""
        if self._host_reads is None or self._host_reads[0] != self.revision:
            rows = self.rows()[1:]
            ids = self.ids_host[rows]
            surprise = self.nll.index_select(0, torch.from_numpy(rows.copy()).to(self.key_pos.device))
            surprise = surprise.cpu().numpy().astype(np.float64)
            ids.setflags(write=False)
            surprise.setflags(write=False)
            self._host_reads = (self.revision, ids, surprise)
        return self._host_reads[1], self._host_reads[2]

    def cls_prefix(self) -> np.ndarray:
        """The tokens' class log-probabilities in order as running sums (`running_sums`), read once
        per revision: a publish reads every tone block of a document, and a keystroke changes one window."""
        if self._cls_prefix is None or self._cls_prefix[0] != self.revision:
            rows = torch.from_numpy(self.rows()[1:].copy()).to(self.key_pos.device)
            self._cls_prefix = (self.revision, running_sums(self.cls_logp.index_select(0, rows)))
        return self._cls_prefix[1]

    def token_ids(self) -> list[int]:
        return self._host()[0].tolist()

    def token_id_array(self) -> np.ndarray:
        """The tokens' ids in order (read-only, kept until the next update)."""
        return self._host()[0]

    def surprise_array(self) -> np.ndarray:
        """Every token's surprise, float64 (read-only, kept until the next update): what the hints read."""
        return self._host()[1]

    def positions(self) -> list[int]:
        return self.pos_host[self.rows()[1:]].tolist()

    def token_slots(self, start: int = 0, end: int | None = None) -> torch.Tensor:
        """Slots of tokens [start, end) (BOS excluded)."""
        end = self.n_tokens if end is None else end
        return torch.from_numpy(self.rows()[1 + start : 1 + end].copy()).to(self.key_pos.device)

    def surprise(self, start: int, end: int) -> torch.Tensor:
        """-log p(token | prefix) for tokens [start, end), as the update left them."""
        return self.nll.index_select(0, self.token_slots(start, end))

    def dense_macs(self) -> int:
        return dense_macs(self.cfg, len(self.order))

    def state_bytes(self) -> int:
        """Memory held by this window's tensors and host arrays (capacity included)."""
        values = [getattr(self, name) for name in RECORD_FIELDS]
        tensors = sum(t.element_size() * t.nelement() for t in values if isinstance(t, torch.Tensor))
        return tensors + self.ids_host.nbytes + self.pos_host.nbytes

    # ----------------------------------------------------------------- editing
    def alloc(self, count: int) -> list[int]:
        """`count` free slots, growing the tensors when too few are left."""
        if len(self.free) < count:
            self.grow(max(int(self.cap * SLACK) + 16, self.cap + count))
        return [self.free.pop() for _ in range(count)]

    def grow(self, cap: int) -> None:
        old = self.cap
        for name in ("ids_host", "pos_host"):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr[:old], np.zeros(cap + 1 - old, dtype=arr.dtype)]))
        for name, dim in GROWN_ALONG.items():
            t = getattr(self, name)
            if t is None:
                continue
            shape = list(t.shape)
            shape[dim] = cap + 1 - old
            pad = t.new_full(shape, FAR) if name == "key_pos" else t.new_zeros(shape)
            setattr(self, name, torch.cat([t.narrow(dim, 0, old), pad], dim=dim))
        self.cap = cap
        self.free = list(range(cap - 1, old - 1, -1)) + self.free
        self.make_views()
