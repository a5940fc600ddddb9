"""The incremental state of one window, and the edit algorithm that keeps it exact.

Layout: rows live in *slots* of preallocated tensors, in no particular order; attention is
causal by position value, so slot order never matters and an insertion or deletion moves no
data. `order` lists the slots in document order (BOS first). Per layer l the state holds the
layer input x[l], q, k, v, the attention sum s, its code projections proj (s . c for every
code), the codes, and vc (each key's v projected on every code, per head segment) which lets a
changed key move every later query's code distances at G x K cost instead of K x d.

An update (one revision) goes layer by layer (DESIGN.md, "The incremental engine"):
  D      dirty rows: their layer input changed (edited, inserted or relabelled at layer 0)
  keys   changed keys: D (new k, v) and D-before-the-edit plus deleted rows (old k, v)
  clean  queries at or after the first changed key get s and proj moved by the delta of
         gelu(q.k) v over the changed keys; dirty queries get their whole row recomputed
  VQ     re-checked for every row whose s moved; a near-tie is recomputed in full first
  next   D plus the rows whose code flipped: their Wo z and FFN are recomputed
The engine knows nothing about text: token ids and positions only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from . import kernels
from .costs import Cost, dense_macs, head_row_macs
from .model import VQOPT
from .positions import NEW, assign_positions, spread_positions


@dataclass(frozen=True)
class Splice:
    """Replace tokens [start, end) of the current document with `new_ids`.

    Insert is start == end, delete is empty new_ids. Offsets refer to the document as it is
    before the call that receives the splice.
    """

    start: int
    end: int
    new_ids: tuple[int, ...] = ()

    def __init__(self, start: int, end: int, new_ids: Sequence[int] = ()) -> None:
        object.__setattr__(self, "start", int(start))
        object.__setattr__(self, "end", int(end))
        object.__setattr__(self, "new_ids", tuple(int(t) for t in new_ids))


@dataclass
class WindowCheck:
    codes_equal: bool
    mismatched_codes: int
    max_abs_diff: float


class LayerConstants:
    """Per-layer codebook views and fused weights the engine needs, computed once per model."""

    def __init__(self, net: VQOPT) -> None:
        cfg = net.config
        heads, h = cfg.num_attention_heads, cfg.vq_heads
        self.segments = heads * h // math.gcd(heads, h)  # G: a segment lies in one attention and one VQ head
        width = cfg.hidden_size // self.segments
        per_vq = self.segments // h
        self.head_of_segment = torch.arange(self.segments) // (self.segments // heads)
        self.code_sq = []  # (h, K) per layer
        self.code_sq_max = []  # (h,) per layer: the tie guard's code term
        self.segment_codebook = []  # (G, K, width) per layer
        self.qkv_weight, self.qkv_bias = [], []  # fused q|k|v projection per layer: (d, 3d), (3d,)
        for layer in net.layers:
            cb = layer.vq.codebook.detach()  # (h, K, w)
            self.code_sq.append(cb.pow(2).sum(-1))
            self.code_sq_max.append(self.code_sq[-1].max(-1).values)
            seg = cb.reshape(h, cfg.vq_codes, per_vq, width).permute(0, 2, 1, 3)  # (h, G/h, K, width)
            self.segment_codebook.append(seg.reshape(self.segments, cfg.vq_codes, width))
            att = layer.self_attn
            self.qkv_weight.append(torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]).detach().t())
            if att.q_proj.bias is not None:
                self.qkv_bias.append(torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]).detach())
            else:
                self.qkv_bias.append(None)

    def to(self, device: torch.device) -> "LayerConstants":
        self.head_of_segment = self.head_of_segment.to(device)
        return self

    def key_code_projections(self, layer: int, v: torch.Tensor) -> torch.Tensor:
        """vc: every key's v segment projected on its VQ head's codes: (c, d) -> (c, G, K)."""
        seg = self.segment_codebook[layer]
        return torch.einsum("cgw,gkw->cgk", v.reshape(v.shape[0], self.segments, -1), seg)


def bucket(n: int) -> int:
    """Padded size for n rows: 0, or the next of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^(k-1)).

    Shapes repeat across edits (a CUDA graph per bucket is possible) and padding wastes at most a
    third of the work."""
    if n <= 0:
        return 0
    p = 1 << (n - 1).bit_length()
    return p * 3 // 4 if p >= 4 and n <= p * 3 // 4 else p


LSE_CHUNK_ROWS = 256
TIE_ROWS = 4  # near-tie rows a layer reserves a full recomputation for (dtypes with a loose tie guard)


class _Edit:
    """What one pass of an update shares across layers: the affected rows A and per-row flags.

    A is every alive row at or after the first changed key (host-known, padded with the trash
    slot to a bucketed length, plus one trailing trash entry that padded local indices point to).
    Sets of rows inside A (dirty rows, near-ties, the next layer's rows) are local indices into A
    of bucketed length, padded with `trash` (the last local index)."""

    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)


class WindowState:
    """BOS plus up to `window_tokens - 1` tokens, with every layer's state kept up to date."""

    def __init__(
        self,
        net: VQOPT,
        consts: LayerConstants,
        ids: Sequence[int],
        positions: Sequence[int] | None = None,
        tie_rel: float = 1e-9,
    ) -> None:
        self.net, self.cfg, self.consts, self.tie_rel = net, net.config, consts, tie_rel
        rows = [self.cfg.bos_token_id, *ids]
        pos = spread_positions(len(rows), self.cfg.position_pool) if positions is None else torch.as_tensor(positions)
        self._build(np.asarray(rows, dtype=np.int64), pos.numpy().astype(np.int64))

    # ----------------------------------------------------------------- layout
    # Row tensors have cap + 1 rows: the last one is the trash slot, never alive, which padded
    # entries of bucketed index lists read from and write to. Per layer, q|k|v|vc live in one
    # row (qkvc) and s|proj in another (sp), so that a layer gathers and scatters each once.
    @property
    def q(self) -> torch.Tensor:
        return self.qkvc[..., : self.cfg.hidden_size]

    @property
    def k(self) -> torch.Tensor:
        d = self.cfg.hidden_size
        return self.qkvc[..., d : 2 * d]

    @property
    def v(self) -> torch.Tensor:
        d = self.cfg.hidden_size
        return self.qkvc[..., 2 * d : 3 * d]

    @property
    def vc(self) -> torch.Tensor:
        L, n = self.qkvc.shape[:2]
        return self.qkvc[..., 3 * self.cfg.hidden_size :].reshape(L, n, self.consts.segments, -1)

    @property
    def s(self) -> torch.Tensor:
        return self.sp[..., : self.cfg.hidden_size]

    @property
    def proj(self) -> torch.Tensor:
        L, n = self.sp.shape[:2]
        return self.sp[..., self.cfg.hidden_size :].reshape(L, n, self.cfg.vq_heads, -1)

    @property
    def trash(self) -> int:
        return self.cap

    # ----------------------------------------------------------------- full pass
    def _build(self, rows: np.ndarray, pos: np.ndarray) -> None:
        """Allocate the slots and fill them with a dense pass (open, rebuild after a fault)."""
        cfg, net = self.cfg, self.net
        p = next(net.parameters())
        dev, dt = p.device, p.dtype
        n = len(rows)
        cap = max(16, int(n * 1.25))
        L, d, h, K, G = cfg.num_hidden_layers, cfg.hidden_size, cfg.vq_heads, cfg.vq_codes, self.consts.segments
        vqw = (h * K if cfg.vq else 0)
        self.cap = cap
        self.ids_host = np.zeros(cap + 1, dtype=np.int64)
        self.pos_host = np.zeros(cap + 1, dtype=np.int64)
        self.alive = torch.zeros(cap + 1, dtype=torch.bool, device=dev)
        self.pos = torch.zeros(cap + 1, dtype=torch.long, device=dev)
        self.x = torch.zeros(L + 1, cap + 1, d, dtype=dt, device=dev)
        self.qkvc = torch.zeros(L, cap + 1, 3 * d + G * K, dtype=dt, device=dev)
        self.sp = torch.zeros(L, cap + 1, d + vqw, dtype=dt, device=dev)
        self.codes = torch.zeros(L, cap + 1, h, dtype=torch.long, device=dev)
        self.hidden = torch.zeros(cap + 1, d, dtype=dt, device=dev)
        self.cls_logp = torch.zeros(cap + 1, cfg.num_labels, dtype=dt, device=dev)  # per-token class log-probabilities
        self.lse = torch.zeros(cap + 1, dtype=dt, device=dev)
        self.order = list(range(n))
        self.free = list(range(cap - 1, n - 1, -1))
        self.ids_host[:n], self.pos_host[:n] = rows, pos
        self.alive[:n] = True
        self.pos[:n] = torch.from_numpy(pos).to(dev)
        with torch.no_grad():
            out = self._dense(torch.from_numpy(rows).to(dev), self.pos[:n])
            for l, tr in enumerate(out.traces):
                self.x[l, :n] = tr.x[0]
                self.qkvc[l, :n, :3 * d] = torch.cat([tr.q[0], tr.k[0], tr.v[0]], -1)
                self.sp[l, :n, :d] = tr.s[0]
                if cfg.vq:
                    self.codes[l, :n] = tr.codes[0]
                    self.sp[l, :n, d:] = kernels.code_projections(tr.s[0], net.layers[l].vq.codebook).flatten(-2)
                    self.qkvc[l, :n, 3 * d:] = self.consts.key_code_projections(l, tr.v[0]).flatten(-2)
            self.x[L, :n] = out.layer_outputs[-1][0]
            self._fill_heads(torch.arange(n, device=dev), out.hidden[0], out.cls_logits[0])

    def _dense(self, ids: torch.Tensor, pos: torch.Tensor):
        return self.net(ids.unsqueeze(0), pos.unsqueeze(0), collect=True)

    def _fill_heads(self, slots: torch.Tensor, hidden: torch.Tensor, cls_logits: torch.Tensor) -> None:
        self.hidden[slots] = hidden
        self.cls_logp[slots] = torch.log_softmax(cls_logits, -1)
        # LM log-sum-exp in chunks of rows: (rows x vocab) logits for a whole window would be the
        # largest temporary of a build (2048 x 8192 float64 = 128 MiB, several times over).
        for a in range(0, len(slots), LSE_CHUNK_ROWS):
            self.lse[slots[a:a + LSE_CHUNK_ROWS]] = torch.logsumexp(self.net.lm_logits(hidden[a:a + LSE_CHUNK_ROWS]), -1)

    # ----------------------------------------------------------------- reading
    @property
    def n_tokens(self) -> int:
        """Tokens in the window, BOS not counted."""
        return len(self.order) - 1

    def token_ids(self) -> list[int]:
        return self.ids_host[self.order[1:]].tolist()

    def positions(self) -> list[int]:
        return self.pos_host[self.order[1:]].tolist()

    def token_slots(self, start: int = 0, end: int | None = None) -> torch.Tensor:
        """Slots of tokens [start, end) (BOS excluded)."""
        end = self.n_tokens if end is None else end
        return torch.tensor(self.order[1 + start : 1 + end], dtype=torch.long, device=self.alive.device)

    def surprise(self, start: int, end: int) -> torch.Tensor:
        """-log p(token | prefix) for tokens [start, end), from each predecessor's stored state."""
        prev = torch.tensor(self.order[start:end], dtype=torch.long, device=self.alive.device)
        ids = torch.from_numpy(self.ids_host[self.order[1 + start : 1 + end]]).to(prev.device)
        emb = self.net.decoder.embed_tokens.weight[ids]  # (m, d)
        return self.lse[prev] - (self.hidden[prev] * emb).sum(-1)

    def dense_macs(self) -> int:
        return dense_macs(self.cfg, len(self.order))

    def state_bytes(self) -> int:
        """Memory held by this window's tensors and host arrays (capacity included)."""
        tensors = sum(t.element_size() * t.nelement() for t in vars(self).values() if isinstance(t, torch.Tensor))
        return tensors + self.ids_host.nbytes + self.pos_host.nbytes

    # ----------------------------------------------------------------- editing
    def _alloc(self, count: int) -> list[int]:
        if len(self.free) < count:
            self._grow(max(2 * self.cap, self.cap + count))
        return [self.free.pop() for _ in range(count)]

    def _grow(self, cap: int) -> None:
        old = self.cap
        for name in ("ids_host", "pos_host"):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr[:old], np.zeros(cap + 1 - old, dtype=arr.dtype)]))
        for name, dim in (("alive", 0), ("pos", 0), ("hidden", 0), ("cls_logp", 0), ("lse", 0), ("x", 1),
                          ("qkvc", 1), ("sp", 1), ("codes", 1)):
            t = getattr(self, name)
            shape = list(t.shape)
            shape[dim] = cap + 1 - old
            setattr(self, name, torch.cat([t.narrow(dim, 0, old), t.new_zeros(shape)], dim=dim))
        self.cap = cap
        self.free = list(range(cap - 1, old - 1, -1)) + self.free

    def apply(self, splices: Sequence[Splice]) -> Cost:
        """Apply validated, sorted, non-overlapping splices (window-local token offsets) as one revision."""
        t0 = time.perf_counter()
        snapshot = (self.ids_host[self.order].copy(), self.pos_host[self.order].copy())
        try:
            with torch.no_grad():
                cost = self._apply(splices)
        except BaseException:
            self._build(*snapshot)  # never leave a half-updated state behind
            raise
        if self.alive.is_cuda:
            torch.cuda.synchronize()
        cost.seconds = time.perf_counter() - t0
        return cost

    def _apply(self, splices: Sequence[Splice]) -> Cost:
        """Host bookkeeping (order, positions, the affected rows A), then the batched layer passes."""
        cfg, net = self.cfg, self.net
        dev = self.alive.device
        L = cfg.num_hidden_layers
        old_order = self.order
        new_order = [old_order[0]]
        inserted, changed, deleted = [], [], []
        cursor = 0
        for sp in splices:
            new_order += old_order[1 + cursor : 1 + sp.start]
            span = old_order[1 + sp.start : 1 + sp.end]
            r = min(len(span), len(sp.new_ids))
            for slot, tok in zip(span[:r], sp.new_ids[:r]):
                if self.ids_host[slot] != tok:
                    self.ids_host[slot] = tok
                    changed.append(slot)
                new_order.append(slot)
            deleted += span[r:]
            fresh = self._alloc(len(sp.new_ids) - r)
            self.ids_host[fresh] = sp.new_ids[r:]
            inserted += fresh
            new_order += fresh
            cursor = sp.end
        new_order += old_order[1 + cursor :]

        pos_old = self.pos_host.copy()
        proposal = self.pos_host[new_order].copy()
        is_new = np.zeros(len(self.ids_host), dtype=bool)
        is_new[inserted] = True
        proposal[is_new[new_order]] = NEW
        assignment = assign_positions(proposal, cfg.position_pool)
        order_arr = np.asarray(new_order, dtype=np.int64)
        relabelled = order_arr[assignment.relabelled].tolist()
        self.pos_host[order_arr] = assignment.positions
        touched = np.asarray(sorted(set(inserted) | set(changed) | set(relabelled)), dtype=np.int64)
        deleted_a = np.asarray(deleted, dtype=np.int64)

        cost = Cost(dirty_per_layer=[0] * L, relabelled=len(relabelled), full_respreads=assignment.full_respreads)
        self.order = new_order
        cost.dense_macs = self.dense_macs()
        if len(touched) == 0 and len(deleted_a) == 0:
            return cost

        # the first changed key, old or new: every row before it keeps its whole state
        existing = touched[~is_new[touched]]
        firsts = [self.pos_host[touched].min()] if len(touched) else []
        if len(existing):
            firsts.append(pos_old[existing].min())
        if len(deleted_a):
            firsts.append(pos_old[deleted_a].min())
        pmin = int(min(firsts))
        a_slots = order_arr[assignment.positions >= pmin]
        a, ab = len(a_slots), bucket(len(a_slots))
        trash = self.trash
        A = np.full(ab + 1, trash, dtype=np.int64)
        A[:a] = a_slots
        local = np.full(self.cap + 1, ab, dtype=np.int64)
        local[a_slots] = np.arange(a)
        valid = np.zeros(ab + 1, dtype=bool)
        valid[:a] = True
        touched_loc = local[touched]
        flags = np.zeros((3, ab + 1), dtype=bool)  # valid, touched, existed (not inserted)
        flags[0] = valid
        flags[1, touched_loc] = True
        flags[2] = valid & ~is_new[A]

        # one host-to-device copy per edit for every index and flag the passes need
        hi = min(self.cap, -(-(int(order_arr.max()) + 1) // 64) * 64)  # keys live in slots [0, hi)
        host = np.concatenate([A, touched, deleted_a, self.pos_host[touched], pos_old[deleted_a]])
        packed = torch.from_numpy(host).to(dev)
        A_t, rest = packed[: ab + 1], packed[ab + 1 :]
        nt, nd = len(touched), len(deleted_a)
        touched_t, deleted_t = rest[:nt], rest[nt : nt + nd]
        touched_pos, deleted_pos = rest[nt + nd : 2 * nt + nd], rest[2 * nt + nd :]
        fl = torch.from_numpy(flags).to(dev)
        dt = self.x.dtype
        self.pos[touched_t] = touched_pos
        self.alive[deleted_t] = False
        self.alive[touched_t] = True
        scale = cfg.attention_scale
        pos_A = self.pos[A_t]
        ctx = _Edit(A=A_t, ab=ab, hi=hi, trash_loc=ab, valid=fl[0], prio=1 + fl[1].to(dt), deleted=deleted_t,
                    pos_A=pos_A, del_loc=torch.arange(2 * (ab + 1), 2 * (ab + 1) + nd, device=dev),
                    # per changed key, by local index: new keys [0, ab], old keys [ab + 1, 2ab + 1], deleted after
                    coef_src=torch.cat([fl[0].to(dt) * scale, fl[2].to(dt) * -scale, pos_A.new_full((nd,), -scale, dtype=dt)]),
                    pos_src=torch.cat([pos_A, torch.from_numpy(pos_old[A]).to(dev), deleted_pos]))
        if nt:
            ids = torch.from_numpy(self.ids_host[touched]).to(dev)
            self.x[0, touched_t] = net.embed(ids, touched_pos)
        loc0 = np.full(bucket(nt), ab, dtype=np.int64)
        loc0[:nt] = touched_loc
        dloc = torch.from_numpy(loc0).to(dev)
        self._pass(ctx, 0, dloc, self._capacities(0, max(1, nt), ab), cost, with_deleted=True)
        self.free += deleted
        return cost

    def _capacities(self, first: int, rows: int, ab: int) -> list[tuple[int, int]]:
        """Padded (dirty rows, near-tie rows) per layer first..L, for a pass starting with `rows` rows.

        Entry l is layer l's dirty capacity and near-tie capacity; entry L the last layer's output
        rows. Rows whose code flips join the next layer's dirty set and how many do is unknown
        until the pass has run, so the pass reserves a guess that doubles with depth (rounded to a
        bucket); an update that overflows it goes on with a further pass (see `_pass`)."""
        cfg = self.cfg
        L = cfg.num_hidden_layers
        full = ab + 1
        if not cfg.vq:  # every affected row is dirty after the first layer
            return [(0, 0)] * first + [(bucket(rows), 0)] + [(full, 0)] * (L - first)
        ties = 0 if self.tie_rel <= 1e-8 else TIE_ROWS
        return [(0, 0)] * first + [(min(full, bucket(rows << (l - first))), min(ties, full)) for l in range(first, L + 1)]

    def _pass(self, ctx: _Edit, first: int, dloc: torch.Tensor, caps, cost: Cost, with_deleted: bool,
              extras: dict | None = None) -> None:
        """Layers first..L-1 of an update, then the heads of the last layer's rows; one host sync.

        On overflow (more flipped rows or near-ties than reserved) the state of every layer is
        still self-consistent: each layer's q, k, v, s, codes match the inputs it was given, and
        the rows left out have simply not been propagated yet. A further pass from the first
        layer that overflowed propagates them, exactly like an edit of those rows."""
        L = self.cfg.num_hidden_layers
        extras = extras or {}
        ctx.stats, ctx.records, ctx.saved = [], [], {}
        for l in range(first, L):
            full, nxt = extras.get(l, (None, None))
            dloc = self._layer(l, self.net.layers[l], ctx, dloc, caps[l][1], caps[l + 1][0], with_deleted, full, nxt)
        final = ctx.A[dloc]
        hidden, logits = self.net.heads(self.x[L].index_select(0, final))
        self._fill_heads(final, hidden, logits)
        stats = torch.stack(ctx.stats).tolist()  # the one host sync of a pass
        self._account(ctx, stats, first, cost)
        for i, (st, rec) in enumerate(zip(stats, ctx.records)):
            if st[4] > rec["ncap"] or st[3] > rec["tcap"]:
                self._resume(ctx, first + i, cost)
                break

    def _account(self, ctx: _Edit, stats, first: int, cost: Cost) -> None:
        """MACs of the real rows and (query, key) pairs of a pass; padding is not counted."""
        cfg = self.cfg
        d, K = cfg.hidden_size, cfg.vq_codes
        last = 0
        for i, ((dirty, pairs_delta, pairs_full, ties, nxt, clean), rec) in enumerate(zip(stats, ctx.records)):
            l = first + i
            dirty, ties, nxt = int(dirty), int(min(ties, rec["tcap"])), int(min(nxt, rec["ncap"]))
            cost.dirty_per_layer[l] += dirty
            cost.near_ties += ties
            macs = dirty * 3 * d * d + int(pairs_delta) * 2 * d + int(pairs_full) * 2 * d
            if cfg.vq:
                macs += dirty * K * d  # each dirty key's v projected on the codes
                macs += (dirty + ties + rec["extra"]) * K * d  # code distances of the rows recomputed in full
                if rec["proj_delta"]:
                    macs += int(pairs_delta) * self.consts.segments * K
                elif rec["keys"]:
                    macs += int(clean) * K * d
            macs += nxt * (d * d + 2 * d * cfg.ffn_dim)
            cost.incremental_macs += macs
            last = nxt
        cost.incremental_macs += last * head_row_macs(cfg)

    def _resume(self, ctx: _Edit, first: int, cost: Cost) -> None:
        """Propagate what a pass left out from layer `first` on: unchecked near-ties and rows cut
        from a next set, at every layer from the first that overflowed.

        The rare overflow path: one more sync reads the leftover sizes, then a pass runs from
        `first` with room for all of them there (later layers may overflow again and resume
        again, each time from a later layer, so it ends)."""
        L, tl = self.cfg.num_hidden_layers, ctx.trash_loc
        left = {}
        for l in range(first, L):
            rec = ctx.saved[l]
            untreated = rec["tied"].clone()
            untreated[rec["tloc"]] = False
            dropped = rec["nxt"].clone()
            dropped[rec["nloc"]] = False
            untreated[tl] = dropped[tl] = False
            left[l] = (untreated, dropped)
        sizes = torch.stack([torch.stack([u.sum(), d.sum()]) for u, d in left.values()]).tolist()
        extras, caps = {}, [(0, 0)] * (first + 1)
        ties = 0 if self.tie_rel <= 1e-8 else TIE_ROWS
        full = ctx.ab + 1
        c = 0
        for (l, (untreated, dropped)), (n_u, n_drop) in zip(left.items(), sizes):
            uloc = None
            if n_u:
                v, i = torch.topk(untreated.to(ctx.prio.dtype), min(full, bucket(n_u)))
                uloc = torch.where(v > 0, i, tl)
            extras[l] = (uloc, dropped if n_drop else None)
            c = min(full, bucket(max(2 * c, c + n_drop + n_u, 1)))
            if l > first:
                caps[l] = (caps[l][0], min(ties, full))
            caps.append((c, 0))
        empty = torch.zeros(0, dtype=torch.long, device=ctx.A.device)
        self._pass(ctx, first, empty, caps, cost, with_deleted=False, extras=extras)

    def _layer(self, l, layer, ctx: _Edit, dloc, tcap: int, ncap: int, with_deleted: bool,
               extra_full=None, extra_next=None) -> torch.Tensor:
        """Bring layer l up to date for the dirty rows A[dloc]; returns the next layer's rows (local).

        A fixed handful of batched ops, no host decisions: padded entries point at the trash row
        and carry zero weight. Shapes depend only on bucketed sizes known before the pass."""
        cfg, consts = self.cfg, self.consts
        d, H, h, K, G = cfg.hidden_size, cfg.num_attention_heads, cfg.vq_heads, cfg.vq_codes, consts.segments
        hd = d // H
        A, ab1, tl = ctx.A, ctx.ab + 1, ctx.trash_loc
        qkvc, sp = self.qkvc[l], self.sp[l]
        C = dloc.shape[0]
        nd = ctx.deleted.shape[0] if with_deleted else 0
        dt = qkvc.dtype
        dv = A[dloc]

        # 1. q|k|v (one fused matmul) and vc of the dirty rows; the old k|v|vc of every changed key
        if C:
            a_in = layer.self_attn_layer_norm(self.x[l].index_select(0, dv))
            w, b = consts.qkv_weight[l], consts.qkv_bias[l]
            qkv = torch.addmm(b, a_in, w) if b is not None else a_in @ w
            qkv[:, :d] *= cfg.head_dim ** -0.5
            new = torch.cat([qkv, consts.key_code_projections(l, qkv[:, 2 * d:]).flatten(1)], 1) if cfg.vq else \
                torch.cat([qkv, qkv.new_zeros(C, qkvc.shape[1] - 3 * d)], 1)
        m = 2 * C + nd
        stats_zero = qkvc.new_zeros((), dtype=torch.long)
        dmask = torch.zeros(ab1, dtype=torch.bool, device=A.device).index_fill_(0, dloc, True) if C else None
        clean = ctx.valid & ~dmask if C else ctx.valid
        proj_delta = bool(cfg.vq and G == H and m * G < d)
        spA = sp.index_select(0, A)
        pairs_delta = stats_zero
        if m:
            old = qkvc.index_select(0, torch.cat([dv, ctx.deleted]) if nd else dv)
            if C:
                qkvc.index_put_((dv,), new)
                kn = torch.cat([new[:, d:], old[:, d:]])
                kl = torch.cat([dloc, dloc + ab1, ctx.del_loc]) if nd else torch.cat([dloc, dloc + ab1])
            else:
                kn, kl = old[:, d:], ctx.del_loc
            coef = ctx.coef_src[kl]  # +1 new key, -1 old key, 0 padding (times the attention scale)
            pk = ctx.pos_src[kl]
            # 2. every affected query against every changed key, all heads in one product
            qh = qkvc[:, :d].index_select(0, A).view(ab1, H, hd).transpose(0, 1)  # (H, a, hd)
            kh = kn[:, :d].reshape(m, H, hd).permute(1, 2, 0)  # (H, hd, m)
            cm = torch.where(pk.unsqueeze(0) <= ctx.pos_A.unsqueeze(1), coef, 0.0)  # (a, m)
            wts = F.gelu(torch.bmm(qh, kh)) * cm  # (H, a, m)
            if proj_delta:
                vals = torch.cat([kn[:, d:2 * d].reshape(m, H, hd), kn[:, 2 * d:].reshape(m, G, K)], -1)
                out = torch.bmm(wts, vals.transpose(0, 1)).transpose(0, 1)  # (a, H, hd + K)
                delta = torch.cat([out[..., :hd].reshape(ab1, d),
                                   out[..., hd:].reshape(ab1, h, G // h, K).sum(2).reshape(ab1, h * K)], 1)
                spA = spA + delta
            else:
                ds = torch.bmm(wts, kn[:, d:2 * d].reshape(m, H, hd).transpose(0, 1)).transpose(0, 1).reshape(ab1, d)
                if cfg.vq:
                    s_new = spA[:, :d] + ds
                    spA = torch.cat([s_new, kernels.code_projections(s_new, layer.vq.codebook).flatten(1)], 1)
                else:
                    spA = spA + ds
            pairs_delta = ((cm != 0) & clean.unsqueeze(1)).sum()

        # 3. VQ of every affected row from its moved projections; near-ties found, not yet fixed
        tied, tloc, n_tied = None, None, stats_zero
        if cfg.vq:
            codesA, gap = kernels.nearest_codes(spA[:, d:].view(ab1, h, K), consts.code_sq[l])
            if m:
                chunk_sq = spA[:, :d].view(ab1, h, -1).pow(2).sum(-1)
                tied = (gap < self.tie_rel * (chunk_sq + consts.code_sq_max[l])).any(-1) & clean
                n_tied = tied.sum()
                if tcap:
                    tv, ti = torch.topk(tied.to(dt), tcap)
                    tloc = torch.where(tv > 0, ti, tl)

        # 4. rows recomputed in full over every key: dirty rows, near-ties, a resumed pass's rows
        parts = [p for p in (dloc if C else None, tloc, extra_full) if p is not None and p.numel()]
        pairs_full = stats_zero
        if parts:
            R = torch.cat(parts) if len(parts) > 1 else parts[0]
            rows = A[R]
            hi = ctx.hi
            keys = qkvc[:hi]
            maskR = (self.pos[:hi].unsqueeze(0) <= ctx.pos_A[R].unsqueeze(1)) & self.alive[:hi]
            qR = qkvc[:, :d].index_select(0, rows).view(-1, H, hd).transpose(0, 1)
            kh = keys[:, d:2 * d].view(hi, H, hd).permute(1, 2, 0)
            vh = keys[:, 2 * d:3 * d].view(hi, H, hd).transpose(0, 1)
            wR = kernels.gelu_weights(torch.bmm(qR, kh), maskR.unsqueeze(0), cfg.attention_scale)
            sR = kernels.merge_heads(torch.bmm(wR, vh))
            if cfg.vq:
                projR = kernels.code_projections(sR, layer.vq.codebook)
                spA.index_put_((R,), torch.cat([sR, projR.flatten(1)], 1))
                codesA.index_put_((R,), kernels.nearest_codes(projR, consts.code_sq[l])[0])
            else:
                spA.index_put_((R,), sR)
            pairs_full = (maskR & ctx.valid[R].unsqueeze(1)).sum()
        sp.index_put_((A,), spA)

        # 5. next layer's rows: dirty rows and rows whose code flipped, compacted without a sync
        if cfg.vq:
            flipped = (codesA != self.codes[l].index_select(0, A)).any(-1) & ctx.valid
            self.codes[l].index_put_((A,), codesA)
            nxt = flipped | dmask if C else flipped
        else:
            nxt = ctx.valid.clone() if m else (dmask if C else torch.zeros_like(ctx.valid))
        if extra_next is not None:
            nxt = nxt | extra_next
        n_next = nxt.sum()
        nv, ni = torch.topk(nxt.to(dt) * ctx.prio, ncap)  # edited rows first: they are never cut
        nloc = torch.where(nv > 0, ni, tl)

        # 6. output projection and FFN of the next layer's rows
        dvn = A[nloc]
        z = kernels.gather_codes(layer.vq.codebook, codesA[nloc]) if cfg.vq else spA[nloc, :d]
        self.x[l + 1].index_put_((dvn,), layer.finish(self.x[l].index_select(0, dvn), z))

        n_dirty = ctx.valid[dloc].sum() if C else stats_zero
        ctx.stats.append(torch.stack([n_dirty, pairs_delta, pairs_full, n_tied, n_next,
                                      clean.sum() if (m and not proj_delta) else stats_zero]))
        ctx.records.append({"tcap": tcap if tied is not None else 0, "ncap": ncap, "proj_delta": proj_delta,
                            "keys": m, "extra": int(extra_full.numel()) if extra_full is not None else 0})
        ctx.saved[l] = {"tied": tied if tied is not None else torch.zeros_like(ctx.valid),
                        "tloc": tloc if tloc is not None else dloc[:0], "nxt": nxt, "nloc": nloc}
        return nloc

    # ----------------------------------------------------------------- checking
    def verify(self) -> WindowCheck:
        """Run the dense pass at the same positions and compare codes and outputs."""
        order = torch.tensor(self.order, dtype=torch.long, device=self.alive.device)
        ids = torch.from_numpy(self.ids_host[self.order]).to(order.device)
        with torch.no_grad():
            out = self._dense(ids, self.pos[order])
        mismatched = 0
        if self.cfg.vq:
            for l, tr in enumerate(out.traces):
                mismatched += int((tr.codes[0] != self.codes[l, order]).any(-1).sum())
        diffs = [
            (out.hidden[0] - self.hidden[order]).abs().max(),
            (torch.log_softmax(out.cls_logits[0], -1) - self.cls_logp[order]).abs().max(),
            (out.layer_outputs[-1][0] - self.x[-1, order]).abs().max(),
        ]
        return WindowCheck(mismatched == 0, mismatched, float(max(diffs)))
