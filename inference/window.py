"""The incremental state of one window, and the edit algorithm that keeps it exact.

Layout: rows live in *slots* of preallocated tensors, in no particular order; attention is
causal by position value, so slot order never matters and an insertion or deletion moves no
data. `order` lists the slots in document order (BOS first). Per layer l the state holds q, k,
v, the code projections proj of the attention sum s (s . c for every code), an upper bound of
|s| per VQ head (the tie guard's scale) and the codes; per row, what the heads read off its last
layer's output: the class log-probabilities and the surprise of the next token. The layer
outputs are kept only with the "full" layout (LAYOUTS): a row's is its embedding, then each
layer's output projection and FFN of the row's code (no attention: the codes carry it), which the
"lean" layout recomputes for the few rows that need it (they would be a fifth of the state).
s itself is not kept (a VQ layer's output reads only its codes): it would be two thirds of an
sp row, and the passes over every affected row would move three times the bytes. A changed
key's v projected on the codes of its VQ head is computed during the update, for the few changed
keys only: it lets a changed key move every later query's code distances at H x K cost instead
of K x d, and storing it for every key would cost a quarter of the state.

An update (one revision) goes layer by layer (DESIGN.md, "The incremental engine"):
  D      dirty rows: their layer input changed (edited, inserted or relabelled at layer 0)
  keys   changed keys: D (new k, v) and D-before-the-edit plus deleted rows (old k, v)
  clean  queries at or after the first changed key get proj moved by the delta of
         gelu(q.k) v over the changed keys (and u by a bound of it); dirty queries get their
         whole row recomputed
  VQ     re-checked for every row whose proj moved; a near-tie is recomputed in full first
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

from .costs import Cost, dense_macs, finish_row_macs, head_row_macs
from .kernels import position_rows
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
    """Per-layer codebook views and fused weights the engine needs, computed once per model.

    Row layouts of the engine's state (per layer; G segments of width w, a segment lying in one
    attention head and one VQ head):
      qkv:  q (d) | k (d) | v (d)                  one fused matmul per dirty row
      sp:   p^0 (K) | p^1 (K) | ... | u (h)        with VQ: p^j = s^j . codes of VQ head j, and
                                                   u_j >= |s^j|, the tie guard's scale
            s (d)                                  without VQ: the layer's attention output
    An update projects its changed keys' v on the codes (vc_g = v_g . codes of g, G x w x K per
    key), so that one batched product of attention weights with vc moves the code projections of
    every query; a VQ head's p moves by the sum of its segments' part. u grows by a bound of
    |delta s^j| (the triangle inequality, from |weights| and the norm of each key's v within each
    attention head and VQ head) and is reset to
    |s^j| whenever a row is recomputed in full: an upper bound only widens the guard."""

    def __init__(self, net: VQOPT) -> None:
        cfg = net.config
        heads, h = cfg.num_attention_heads, cfg.vq_heads
        self.segments = heads * h // math.gcd(heads, h)
        d, K = cfg.hidden_size, cfg.vq_codes
        self.kp = h * K if cfg.vq else 0  # where u starts in an sp row
        width = self.sp_width = self.kp + h if cfg.vq else d  # C: the width of an sp row
        # the block-diagonal move (H m keys x C) costs H m C per affected row, the per-head one m d + d C
        self.block_keys = d * width / max(1, heads * width - d)
        self.vq_heads_idx = torch.arange(h)
        self.code_sq = []  # (h, K) per layer
        self.code_sq_max = []  # (h,) per layer: the tie guard's code term
        self.sp_map = []  # (d, C) per layer: s -> its sp row (codebooks for p, zeros for u; the identity without VQ)
        self.sp_map_scaled = []  # the same times the attention scale, exact when it is a power of two
        self.qkv_weight, self.qkv_bias = [], []  # (d, 3d), (3d,) or None
        self.q_scaled = math.log2(cfg.head_dim) % 2 == 0  # hd^-0.5 is a power of two
        self.finish = []  # out_proj, fc1, fc2: weights transposed (views, as F.linear uses them) and biases
        self.scale_exact = math.log2(cfg.attention_scale).is_integer()  # c is a power of two
        self.dense = None  # the full pass builds and verify run, (ids, positions) -> ForwardOutput; None: torch's
        self.sizing = "exact"  # see SIZINGS; `to` picks by device
        self.keep_outputs = False  # see LAYOUTS: "full" keeps every layer's output
        # the layer-0 input as one bag per row: coarse[p // r + 2] + fine[p % r], then + token, the
        # same two additions in the same order as VQOPT.embed (exact), from one stacked table
        dec = net.decoder
        self.position_repeat = cfg.position_repeat
        self.embed_offsets = (dec.embed_positions.weight.shape[0],
                              dec.embed_positions.weight.shape[0] + dec.embed_positions_fine.weight.shape[0])
        self.lm_weight = dec.embed_tokens.weight.detach()  # the tied LM head (see lm_logits)
        self.lm_weight_t = self.lm_weight.t()  # its transposed view (a contiguous copy on the CPU in float32: `to`)
        self.embed_table = torch.cat([dec.embed_positions.weight, dec.embed_positions_fine.weight,
                                      dec.embed_tokens.weight]).detach()
        table = self.embed_table
        dims = torch.arange(d, device=table.device)
        self.head_mask = (dims // cfg.head_dim == torch.arange(heads, device=table.device).unsqueeze(1)
                          ).to(table.dtype).unsqueeze(1)  # (H, 1, d): head h's dims
        dh = d // h
        for layer in net.layers:
            att = layer.self_attn
            cb = layer.vq.codebook.detach()  # (h, K, d/h)
            self.code_sq.append(cb.pow(2).sum(-1))
            self.code_sq_max.append(self.code_sq[-1].max(-1).values)
            if cfg.vq:
                sp_map = torch.zeros(d, width, dtype=table.dtype, device=table.device)
                for j in range(h):
                    sp_map[j * dh : (j + 1) * dh, j * K : (j + 1) * K] = cb[j].t()
            else:
                sp_map = torch.eye(d, dtype=table.dtype, device=table.device)
            self.sp_map.append(sp_map)
            self.sp_map_scaled.append(self.sp_map[-1] * cfg.attention_scale if self.scale_exact else None)
            projs = (att.q_proj, att.k_proj, att.v_proj)
            cols = [lin.weight.detach().t() for lin in projs]
            bias = [lin.bias.detach() for lin in projs] if att.v_proj.bias is not None else []
            qscale = cfg.head_dim ** -0.5
            if self.q_scaled:  # a power of two: scaling the weights is exact, the same q as the dense pass
                cols[0] = cols[0] * qscale
                if bias:
                    bias[0] = bias[0] * qscale
            fin = []
            for lin in (att.out_proj, layer.fc1, layer.fc2):
                fin += [lin.weight.detach().t(), None if lin.bias is None else lin.bias.detach()]
            self.finish.append(tuple(fin))
            self.qkv_weight.append(torch.cat(cols, 1).contiguous())
            self.qkv_bias.append(torch.cat(bias) if bias else None)

    def embed_rows(self, ids: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Rows of embed_table a token at a position sums, in the order VQOPT.embed adds them: (n, 3)."""
        fine_at, tok_at = self.embed_offsets
        coarse_row, fine_row = position_rows(pos, self.position_repeat)
        return np.stack([coarse_row, fine_at + fine_row, tok_at + ids], 1)

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        """The first layer's input from embed_rows rows (n, 3): VQOPT.embed, bit for bit: a gather and
        a sum over the three rows in order (F.embedding_bag adds the same way but dispatches 3 ops)."""
        return self.embed_table[rows].sum(1)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """VQOPT.lm_logits of the few rows (r, d) an update or a typo lookup asks for, in the form
        the CPU's BLAS (MKL) runs fastest, by benchmarks/lm_head_rows.py: float32, a product with a
        transposed copy of the embedding (10% faster than F.linear); float64, F.linear with the rows
        padded to a multiple of 4 (33% faster: MKL's float64 product of a row count that is not a
        multiple of 4 runs 2 to 3x slower). The pad rows' logits are dropped. On a GPU: F.linear.
        (F.linear without bias is mm with the weight's transposed view, which `to` keeps: one op.)"""
        r, pad = hidden.shape[0], self.lm_pad(hidden.shape[0], hidden)
        if not pad:
            return torch.mm(hidden, self.lm_weight_t)
        return torch.mm(torch.cat([hidden, hidden.new_zeros(pad, hidden.shape[1])]), self.lm_weight_t).narrow(0, 0, r)

    @staticmethod
    def lm_pad(rows: int, like: torch.Tensor) -> int:
        """Rows to add to `rows` for lm_logits' fastest form on like's device and dtype (float64 on the
        CPU: up to a multiple of 4), so that a caller can pad with rows it can use or discard."""
        return -rows % 4 if 1 < rows < 64 and like.dtype == torch.float64 and like.device.type == "cpu" else 0

    def to(self, device: torch.device) -> "LayerConstants":
        cpu = torch.device(device).type == "cpu"
        self.sizing = "exact" if cpu else "bucketed"
        self.lm_weight_t = self.lm_weight.t()  # lm_logits' form: (d, V), a view of the tied embedding,
        if cpu and self.lm_weight.dtype != torch.float64:  # or a copy there, vocab_size x d numbers more
            self.lm_weight_t = self.lm_weight_t.contiguous()
        self.vq_heads_idx = self.vq_heads_idx.to(device)
        return self


def gelu_(x: torch.Tensor) -> torch.Tensor:
    """F.gelu in place (the same kernel, the same numbers): attention weights are the update's
    largest temporaries."""
    return torch.ops.aten.gelu_(x)


def bucket(n: int) -> int:
    """Padded size for n rows: 0, or the next of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^(k-1)).

    Shapes repeat across edits (a CUDA graph per bucket is possible) and padding wastes at most a
    third of the work."""
    if n <= 0:
        return 0
    p = 1 << (n - 1).bit_length()
    return p * 3 // 4 if p >= 4 and n <= p * 3 // 4 else p


LSE_CHUNK_ROWS = 256
SLACK = 1.0625  # a window allocates room for this many times its rows, and grows by this factor (+ 16 rows)
TIE_ROWS = 8  # near-tie rows a layer reserves a full recomputation for, when the dtype's tie guard is loose
FAR = float("inf")  # key position of a slot that is not alive: no query sees it
# Room a pass reserves for the next layer's rows: c -> ceil(c * growth + add), bucketed. On a CPU
# padded rows cost their full arithmetic, so the guess is tight and an overflow resumes; on a GPU
# padding is nearly free and host round trips are not, so the guess is generous.
GROWTH = {"cpu": (1.2, 1), "cuda": (4, 2)}
# How an update sizes its row sets. "exact": the host reads each layer's next set (one read per
# layer) and nothing is padded; on a CPU that read costs microseconds while padded rows cost their
# full arithmetic. "bucketed": shapes padded to buckets, one host read per pass; on a GPU a read
# stalls the pipeline and padding is nearly free. LayerConstants.sizing picks per model (by device).
SIZINGS = ("exact", "bucketed")
# What a window keeps per row. "lean" (the server's default: many open documents): no layer
# output; a row's is recomputed from its embedding and codes when needed (the predecessors of
# edited tokens, riding the first pass; rows whose code flips without their input changing: l
# layer finishes each at layer l). "full" (load_model's and `vq-lsp score`'s default: speed):
# every layer's output too, d numbers per layer per row (a quarter more state), no recomputation.
LAYOUTS = ("lean", "full")


class _Edit:
    """What the passes of one update share: the affected rows A and per-row tables.

    A is every alive row at or after the first changed key, old or new (known on the host).
    Exact sizes: A is just those rows and the row sets inside it (dirty rows, near-ties, next
    rows; local indices into A) are read by the host. Bucketed: A is padded with the trash slot
    to a bucketed length plus one trailing trash entry, and the row sets are of bucketed length,
    padded with `tl`, that trailing entry."""

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
        tie_growth: float = 0.0,
    ) -> None:
        self.net, self.cfg, self.consts, self.tie_rel = net, net.config, consts, tie_rel
        self.tie_growth = tie_growth
        self.tie_c = [tie_rel * m for m in consts.code_sq_max]  # the tie guard's code term, (h,)
        rows = [self.cfg.bos_token_id, *ids]
        pos = spread_positions(len(rows), self.cfg.position_pool) if positions is None else torch.as_tensor(positions)
        self._build(np.asarray(rows, dtype=np.int64), pos.numpy().astype(np.int64))

    # ----------------------------------------------------------------- layout
    # Row tensors have cap + 1 rows: the last is the trash slot, never alive, which the padded
    # entries of bucketed index lists read and write. See LayerConstants for the row layouts.
    def _per_vq_head(self, t: torch.Tensor) -> torch.Tensor:
        """sp rows (..., C) -> their code projections per VQ head (..., h, K) (a view)."""
        return t[..., : self.consts.kp].unflatten(-1, (self.cfg.vq_heads, -1))

    def _split_sp(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """sp rows (r, C) -> (their code projections per VQ head (r, h, K), u (r, h)) (views)."""
        p, u = t.split([self.consts.kp, self.cfg.vq_heads], -1)
        return p.view(t.shape[0], self.cfg.vq_heads, -1), u

    def _bound(self, t: torch.Tensor) -> torch.Tensor:
        """sp rows (..., C) -> u, the upper bounds of |s^j| per VQ head (..., h) (a view)."""
        return t[..., self.consts.kp :]

    def _norms(self, s: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """|s^j| per VQ head of attention sums (r, d): (r, h), what u is reset to."""
        return torch.linalg.vector_norm(s.view(s.shape[0], self.cfg.vq_heads, -1), dim=-1, out=out)

    @property
    def q(self) -> torch.Tensor:
        return self.qkv[..., : self.cfg.hidden_size]

    @property
    def k(self) -> torch.Tensor:
        d = self.cfg.hidden_size
        return self.qkv[..., d : 2 * d]

    @property
    def v(self) -> torch.Tensor:
        return self.qkv[..., 2 * self.cfg.hidden_size :]

    @property
    def proj(self) -> torch.Tensor:
        """Code projections s . c per VQ head: (..., h, K)."""
        return self._per_vq_head(self.sp)

    @property
    def alive(self) -> torch.Tensor:
        """Which slots hold a row (BOS or a token): (cap + 1,) bool."""
        return self.kpos < FAR

    @property
    def pos(self) -> torch.Tensor:
        """Pool position of every slot (0 where no row): (cap + 1,) long."""
        return torch.where(self.alive, self.kpos, 0).long()

    @property
    def trash(self) -> int:
        return self.cap

    # ----------------------------------------------------------------- full pass
    def _build(self, rows: np.ndarray, pos: np.ndarray) -> None:
        """Allocate the slots and fill them with a dense pass (open, rebuild after a fault)."""
        cfg, net, consts = self.cfg, self.net, self.consts
        p = next(net.parameters())
        dev, dt = p.device, p.dtype
        n = len(rows)
        cap = max(16, int(n * SLACK))
        L, d, h, C = cfg.num_hidden_layers, cfg.hidden_size, cfg.vq_heads, consts.sp_width
        self.cap = cap
        self.ids_host = np.zeros(cap + 1, dtype=np.int64)
        self.pos_host = np.zeros(cap + 1, dtype=np.int64)
        self.kpos = torch.full((cap + 1,), FAR, dtype=dt, device=dev)  # pos where alive, FAR elsewhere (for masks)
        self.emb_idx = torch.zeros(cap + 1, 3, dtype=torch.long, device=dev)  # embed_table rows per slot
        self.qkv = torch.zeros(L, cap + 1, 3 * d, dtype=dt, device=dev)
        self.sp = torch.zeros(L, cap + 1, C, dtype=dt, device=dev)
        self.codes = torch.zeros(L, cap + 1, h, dtype=torch.long, device=dev)
        self.cls_logp = torch.zeros(cap + 1, cfg.num_labels, dtype=dt, device=dev)  # per-token class log-probabilities
        self.nll = torch.zeros(cap + 1, dtype=dt, device=dev)  # -log p(token | its predecessor), per token's slot
        # layer outputs: kept with the "full" layout (and without VQ, where an output needs its attention)
        self.x = torch.zeros(L, cap + 1, d, dtype=dt, device=dev) if consts.keep_outputs or not cfg.vq else None
        self.order = list(range(n))
        self.free = list(range(cap - 1, n - 1, -1))
        self.ids_host[:n], self.pos_host[:n] = rows, pos
        self.emb_idx[:n] = torch.from_numpy(consts.embed_rows(rows, pos)).to(dev)
        pos_t = torch.from_numpy(pos).to(dev)
        self.kpos[:n] = pos_t.to(dt)
        with torch.no_grad():
            out = self._dense(torch.from_numpy(rows).to(dev), pos_t)
            for l, tr in enumerate(out.traces):
                self.qkv[l, :n] = torch.cat([tr.q[0], tr.k[0], tr.v[0]], -1)
                torch.mm(tr.s[0], consts.sp_map[l], out=self.sp[l, :n])
                if cfg.vq:
                    self._bound(self.sp[l, :n]).copy_(self._norms(tr.s[0]))
                    self.codes[l, :n] = tr.codes[0]
            self._fill_heads(np.arange(n), out.hidden[0], out.cls_logits[0])
            if self.x is not None:
                for l, x in enumerate(out.layer_outputs):
                    self.x[l, :n] = x[0]
        self._views()
        self._total()

    def _total(self) -> None:
        """cls_total: the sum of the tokens' class log-probabilities (BOS excluded), kept per window
        so that a document's score costs the same few ops whatever its number of windows."""
        rows = torch.from_numpy(np.asarray(self.order[1:], dtype=np.int64)).to(self.kpos.device)
        self.cls_total = self.cls_logp.index_select(0, rows).sum(0)

    def _views(self) -> None:
        """Per-layer views the update reads (remade whenever the tensors are reallocated)."""
        d, H, L = self.cfg.hidden_size, self.cfg.num_attention_heads, self.cfg.num_hidden_layers
        n = self.cap + 1
        self.layer_views = []
        for l in range(L):
            t = self.qkv[l]
            self.layer_views.append(_Edit(
                qkv=t, sp=self.sp[l], codes=self.codes[l],
                kh=t[:, d : 2 * d].view(n, H, d // H).permute(1, 2, 0),  # every key, head-major (H, hd, n)
                vh=t[:, 2 * d :].view(n, H, d // H).transpose(0, 1),  # every value, head-major (H, n, hd)
                qh=t[:, :d].view(n, H, d // H),  # every query (n, H, hd)
                qhT=t[:, :d].view(n, H, d // H).transpose(0, 1),  # and head-major (H, n, hd): gathers of a few rows, by
                # advanced indexing (aten.index reads only those rows; index_select on this view copied all of q first)
                x=None if self.x is None else self.x[l], kpos=self.kpos))  # the layer's outputs (full layout)

    def _dense(self, ids: torch.Tensor, pos: torch.Tensor):
        if self.consts.dense is not None:  # another backend (inference/onnx_dense.py) where it was measured faster
            return self.consts.dense(ids, pos)
        return self.net(ids.unsqueeze(0), pos.unsqueeze(0), collect=True)

    def _layer_input(self, l: int, rows: torch.Tensor) -> torch.Tensor:
        """Input rows of layer l (l = L: the last layer's output): kept (full layout), or from the
        rows' embedding and their codes at the earlier layers, the same finish as the pass that wrote
        them (l output projections and FFNs per row, no attention). An update needs it only for rows
        whose code flipped at layer l without being dirty there."""
        if l and self.x is not None:  # the full layout keeps them
            return self.layer_views[l - 1].x.index_select(0, rows)
        x = self.consts.embed(self.emb_idx.index_select(0, rows))
        for j in range(l):
            x = self._finish(j, self.net.layers[j], x, self._code_vectors(j, self.codes[j].index_select(0, rows)))
        return x

    def _code_vectors(self, l: int, codes: torch.Tensor) -> torch.Tensor:
        """A VQ layer's output before its projection: each VQ head's code vector, concatenated (r, d)."""
        return self.net.layers[l].vq.codebook[self.consts.vq_heads_idx, codes].flatten(-2)

    def hidden(self, slots: torch.Tensor) -> torch.Tensor:
        """Final hidden states (after the last LayerNorm) of some slots: what the LM head reads
        (lean layout: recomputed from their codes, L layer finishes per row)."""
        return self.net.decoder.final_layer_norm(self._layer_input(self.cfg.num_hidden_layers, slots))

    def _successors(self) -> np.ndarray:
        """Each slot's next row in document order (the trash slot for the last row and dead slots)."""
        succ = np.full(self.cap + 1, self.trash, dtype=np.int64)
        succ[self.order[:-1]] = self.order[1:]
        return succ

    def _fill_heads(self, slots: np.ndarray, hidden: torch.Tensor | None = None, cls_logits: torch.Tensor | None = None) -> None:
        """The heads of rows (host slots) from their final hidden states: class log-probabilities,
        and the surprise of each row's successor token (the last row's goes to the trash slot).
        hidden None: from the rows' kept last-layer outputs (full layout), one gather."""
        succ = self._successors()[slots]
        rows, succ, next_ids = torch.from_numpy(np.stack([slots, succ, self.ids_host[succ]])).to(self.kpos.device).unbind()
        if hidden is None:
            hidden, cls_logits = self.net.heads(self.layer_views[-1].x.index_select(0, rows))
        self.cls_logp.index_put_((rows,), torch.log_softmax(cls_logits, -1))
        self.nll.index_put_((succ,), self._next_nll(hidden, next_ids))

    def _next_nll(self, hidden: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
        """-log p(next_ids[i] | hidden[i]). LM logits in chunks of rows: (rows x vocab) for a whole
        window would be the largest temporary of a build (2048 x 8192 float64 = 128 MiB, several times over)."""
        if len(next_ids) > LSE_CHUNK_ROWS:
            return torch.cat([self._next_nll(hidden[a:a + LSE_CHUNK_ROWS], next_ids[a:a + LSE_CHUNK_ROWS])
                              for a in range(0, len(next_ids), LSE_CHUNK_ROWS)])
        return F.cross_entropy(self.consts.lm_logits(hidden), next_ids, reduction="none")  # log-sum-exp less the id's logit

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
        return torch.tensor(self.order[1 + start : 1 + end], dtype=torch.long, device=self.kpos.device)

    def surprise(self, start: int, end: int) -> torch.Tensor:
        """-log p(token | prefix) for tokens [start, end), as the update left them."""
        return self.nll.index_select(0, self.token_slots(start, end))

    def dense_macs(self) -> int:
        return dense_macs(self.cfg, len(self.order))

    def state_bytes(self) -> int:
        """Memory held by this window's tensors and host arrays (capacity included)."""
        tensors = sum(t.element_size() * t.nelement() for t in vars(self).values() if isinstance(t, torch.Tensor))
        return tensors + self.ids_host.nbytes + self.pos_host.nbytes

    # ----------------------------------------------------------------- editing
    def _alloc(self, count: int) -> list[int]:
        if len(self.free) < count:
            self._grow(max(int(self.cap * SLACK) + 16, self.cap + count))
        return [self.free.pop() for _ in range(count)]

    def _grow(self, cap: int) -> None:
        old = self.cap
        for name in ("ids_host", "pos_host"):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr[:old], np.zeros(cap + 1 - old, dtype=arr.dtype)]))
        for name, dim in (("kpos", 0), ("emb_idx", 0), ("cls_logp", 0),
                          ("nll", 0), ("x", 1), ("qkv", 1), ("sp", 1), ("codes", 1)):
            t = getattr(self, name)
            if t is None:
                continue
            shape = list(t.shape)
            shape[dim] = cap + 1 - old
            pad = t.new_full(shape, FAR) if name == "kpos" else t.new_zeros(shape)
            setattr(self, name, torch.cat([t.narrow(dim, 0, old), pad], dim=dim))
        self.cap = cap
        self.free = list(range(cap - 1, old - 1, -1)) + self.free
        self._views()

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
        if self.kpos.is_cuda:
            torch.cuda.synchronize()
        cost.seconds = time.perf_counter() - t0
        return cost

    def _apply(self, splices: Sequence[Splice]) -> Cost:
        """Host bookkeeping (order, positions, the affected rows A), then the batched layer passes."""
        cfg = self.cfg
        dev = self.kpos.device
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
        in_a = assignment.positions >= pmin
        a_slots = order_arr[in_a]
        exact = self.consts.sizing == "exact"
        a = len(a_slots)
        ab1 = a if exact else bucket(a) + 1  # rows of A; padded, its last entry (tl) is the trash slot
        tl, trash = (ab1 if exact else ab1 - 1), self.trash
        A = np.full(ab1, trash, dtype=np.int64)
        A[:a] = a_slots
        local = np.full(self.cap + 1, tl, dtype=np.int64)
        local[a_slots] = np.arange(a)
        nt, nd = len(touched), len(deleted_a)
        loc0 = np.full(nt if exact else bucket(nt), tl, dtype=np.int64)
        loc0[:nt] = local[touched]
        scale = cfg.attention_scale
        valid = np.zeros(ab1)
        valid[:a] = 1.0
        prio = valid * 1.0
        prio[loc0[:nt]] = 1.0 + 2.0 ** -20  # edited rows first: a capped next set never drops them
        # per changed key, by local index: new keys [0, ab1) and old keys [ab1, 2 ab1) of the rows
        # of A (key_dirty), then the deleted rows' keys (key_deleted): +-scale (0 for padding), position
        key_dirty = np.concatenate([valid * scale, -(valid * ~is_new[A]) * scale, self.pos_host[A], pos_old[A]])
        key_deleted = np.concatenate([np.full(nd, -scale), pos_old[deleted_a]])

        # one host-to-device copy for every index and one for every float table of the update, split
        nl = len(loc0)
        emb = self.consts.embed_rows(self.ids_host[touched], self.pos_host[touched]).ravel()
        ints = torch.from_numpy(np.concatenate([A, loc0, touched, deleted_a, [tl], emb])).to(dev)
        A_t, dloc, moved, tl_t, touched_emb = ints.split([ab1, nl, nt + nd, 1, 3 * nt])
        flts = torch.from_numpy(np.concatenate([key_dirty, key_deleted, self.pos_host[A], valid, prio,
                                                self.pos_host[touched], np.full(nd, FAR)])).to(dev, self.kpos.dtype)
        key_dirty, key_deleted, posA, valid_t, prio_t, moved_pos = flts.split([4 * ab1, 2 * nd, ab1, ab1, ab1, nt + nd])
        touched_t, deleted_t = moved.split([nt, nd])
        self.kpos.index_put_((moved,), moved_pos)  # new positions of edited rows, FAR for deleted ones
        ctx = _Edit(A=A_t, ab=ab1 - 1, tl=tl, tl_t=tl_t, host_dloc=loc0, valid=valid_t, prio=prio_t, deleted=deleted_t,
                    key_dirty=key_dirty.view(2, 2, ab1), key_deleted=key_deleted.view(2, nd), posA_col=posA.unsqueeze(1),
                    dv0=touched_t if exact else None,  # exact sizes: A[dloc] is the edited rows, in order
                    host=dict(A=A, a=a, is_new=is_new, pos_old=pos_old, deleted=deleted_a, order=order_arr))
        if not exact or not cfg.vq:  # tables of the padded path (and of models without VQ)
            ctx.zeros, ctx.valid_b = torch.zeros(ab1, dtype=torch.bool, device=dev), valid_t > 0
            ctx.zero, ctx.empty = torch.zeros((), dtype=self.kpos.dtype, device=dev), A_t[:0]
        if nt:
            self.emb_idx.index_put_((touched_t,), touched_emb.view(nt, 3))
        finals = []
        # rows whose last-layer output the heads need although it may not change: the predecessors
        # of tokens with a new predecessor or id (their surprise). They ride along the first pass.
        riders = self._stale_predecessors(np.asarray(old_order, dtype=np.int64), np.asarray(inserted + changed, dtype=np.int64))
        ctx.riders = torch.from_numpy(riders).to(dev) if len(riders) and a and self.x is None else None
        rode, ctx.rider_x = ctx.riders is not None, None
        if a:  # (none: only the last rows were deleted, and no row sees a changed key)
            caps = None if exact else self._capacities(0, max(1, nt), ab1 - 1)
            self._pass(ctx, 0, dloc, caps, cost, True, {}, finals)
        self._update_heads(finals, riders, ctx.rider_x if rode else None, cost)
        self.free += deleted
        self._total()
        return cost

    def _stale_predecessors(self, old_order: np.ndarray, edited: np.ndarray) -> np.ndarray:
        """Slots whose successor token is new, has a new id, or follows a new predecessor: the
        surprise of that successor must be recomputed from their output."""
        order = np.asarray(self.order, dtype=np.int64)
        prev_old = np.full(self.cap + 1, -1, dtype=np.int64)
        prev_old[old_order[1:]] = old_order[:-1]
        stale = (prev_old[order[1:]] != order[:-1]) | np.isin(order[1:], edited)
        return order[:-1][stale]

    def _update_heads(self, finals: list, riders: np.ndarray, rider_x, cost: Cost) -> None:
        """Heads of the rows whose last-layer output changed (each pass's last layer gave it, a later
        pass's winning) and of the riders (their output from the first pass, or recomputed from their
        codes when none ran): class log-probabilities and the next token's surprise."""
        cfg, L = self.cfg, self.cfg.num_hidden_layers
        slots = np.concatenate([f[0] for f in finals]) if finals else np.zeros(0, dtype=np.int64)
        if self.x is not None:  # kept outputs: every row's is in the last layer's, read once (padded with
            rows = np.union1d(slots, riders)  # the trash slot to the row count the LM head runs fastest at)
            rows = rows[rows != self.trash]
            if len(rows):
                cost.incremental_macs += len(rows) * head_row_macs(cfg)
                self._fill_heads(np.concatenate([rows, np.full(self.consts.lm_pad(len(rows), self.kpos), self.trash)]))
            return
        outs = [torch.cat([f[1] for f in finals]) if len(finals) > 1 else finals[0][1]] if finals else []
        if len(finals) > 1 or (slots == self.trash).any():  # padded, or several passes: the last output per row
            last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]
            last = last[slots[last] != self.trash]
            slots, outs = slots[last], [outs[0].index_select(0, torch.from_numpy(last).to(outs[0].device))]
        new = ~np.isin(riders, slots)  # (a rider whose output changed anyway is among the pass's rows)
        need = riders[new]
        if len(need) and rider_x is None:  # kept outputs (full layout), or no pass ran: recomputed
            outs.append(self._layer_input(L, torch.from_numpy(need).to(self.kpos.device)))
            if self.x is None:
                cost.incremental_macs += len(need) * L * finish_row_macs(cfg)
        elif len(need):
            outs.append(rider_x if new.all() else rider_x.index_select(0, torch.from_numpy(np.flatnonzero(new)).to(rider_x.device)))
        if outs:
            rows = np.concatenate([slots, need])
            hidden, logits = self.net.heads(torch.cat(outs) if len(outs) > 1 else outs[0])
            self._fill_heads(rows, hidden, logits)
            cost.incremental_macs += len(rows) * head_row_macs(cfg)

    def _capacities(self, first: int, rows: int, ab: int) -> list[tuple[int, int]]:
        """Padded (dirty rows, near-tie rows) per layer first..L for a pass starting with `rows` rows.

        Entry l holds layer l's dirty-row and near-tie capacities, entry L the last layer's
        output rows. Rows whose code flips join the next layer's dirty set, and how many do is
        unknown until the pass has run: the pass reserves a guess that grows with depth
        (`growth`), and an update that overflows it goes on with a further pass (see `_pass`)."""
        cfg = self.cfg
        L = cfg.num_hidden_layers
        full = ab + 1
        if not cfg.vq:  # every affected row is dirty after the first layer
            return [(0, 0)] * first + [(bucket(rows), 0)] + [(full, 0)] * (L - first)
        ties = 0 if self.tie_rel <= 1e-8 else TIE_ROWS
        g, add = self._growth()
        out, c = [(0, 0)] * first, rows
        for l in range(first, L + 1):
            out.append((min(full, bucket(c)), min(ties, full)))
            c = math.ceil(c * g + add)
        return out

    def _growth(self) -> tuple[float, int]:
        return GROWTH.get(self.kpos.device.type, GROWTH["cuda"])

    def _pass(self, ctx: _Edit, first: int, dloc: torch.Tensor, caps, cost: Cost, with_deleted: bool,
              extras: dict, finals: list) -> None:
        """Layers first..L-1 of an update; `caps` None: exact sizes (each layer reads its next set),
        else fixed capacities and one host sync at the end.

        On overflow (more flipped rows or near-ties than reserved) the state of every layer is
        still self-consistent: each layer's q, k, v, proj, codes match the inputs it was given, and
        the rows left out have simply not been propagated yet. A further pass from the first
        layer that overflowed propagates them, exactly like an edit of those rows."""
        L = self.cfg.num_hidden_layers
        ctx.counts, ctx.records, ctx.saved, ctx.pass_first, ctx.carry = [], [], {}, first, None
        for l in range(first, L):
            full, nxt = extras.get(l, (None, None))
            tcap, ncap = (0, None) if caps is None else (caps[l][1], caps[l + 1][0])
            dloc = self._layer(l, self.net.layers[l], ctx, dloc, tcap, ncap, with_deleted, full, nxt)
        if ctx.riders is not None:  # they rode this pass (the first) through every layer
            cost.incremental_macs += len(ctx.riders) * L * finish_row_macs(self.cfg)
            ctx.riders = None
        if caps is None:  # exact sizes: the host read every set already
            sets = [rec["sets"] for rec in ctx.records]
            self._account(ctx, sets, first, cost)
            finals.append((ctx.host["A"][sets[-1][2]], ctx.carry[1]))  # the last layer's rows and outputs
            return
        # padded: the counts and every row set in one read, for overflow and the host's exact accounting
        parts = [torch.stack(ctx.counts)] + [t for rec in ctx.records for t in rec["sets"]]
        flat = torch.cat(parts).tolist()
        at = len(ctx.counts)
        counts = flat[:at]
        sets = []
        for rec in ctx.records:
            got = []
            for t in rec["sets"]:
                got.append(np.asarray(flat[at : at + t.numel()], dtype=np.int64))
                at += t.numel()
            sets.append(got)
        overflow = None
        for i, rec in enumerate(ctx.records):
            n_tied, n_next = int(counts[2 * i]), int(counts[2 * i + 1])
            rec["n_tied"], rec["n_next"] = n_tied, n_next
            if overflow is None and (n_next > rec["ncap"] or n_tied > rec["tcap"]):
                overflow = i
        self._account(ctx, sets, first, cost)
        finals.append((ctx.host["A"][sets[-1][2]], ctx.carry[1]))
        if overflow is not None:
            self._resume(ctx, first + overflow, cost, finals)

    def _account(self, ctx: _Edit, sets, first: int, cost: Cost) -> None:
        """Count the real rows and (query, key) pairs of a pass on the host; padding is not counted.

        Positions increase along the document, so the keys a row sees are counted by binary
        search. The bound u's few numbers per row are not counted (like LayerNorms)."""
        cfg, host = self.cfg, ctx.host
        d, K, G = cfg.hidden_size, cfg.vq_codes, self.consts.segments
        A, a, tl = host["A"], host["a"], ctx.tl
        pos = self.pos_host
        alive_pos = pos[host["order"]]  # sorted: the order is the document order
        a_pos = pos[A[:a]]  # sorted too
        for i, rec in enumerate(ctx.records):
            l = first + i
            dl, fl, nl = sets[i]  # dirty rows, rows recomputed in full (dirty first), next rows
            dl, fl, nl = dl[dl != tl], fl[fl != tl], nl[nl != tl]
            dirty = len(dl)
            cost.dirty_per_layer[l] += dirty
            if rec["whole"]:
                cost.whole_layers += 1
            else:  # near-ties (and a resumed pass's unchecked ones) recomputed in full
                cost.near_ties += len(fl) - dirty
            macs = dirty * 3 * d * d  # q, k, v
            if rec["keys"]:
                dslots = A[dl]
                old = dslots[~host["is_new"][dslots]]
                keys = [pos[dslots], host["pos_old"][old]]
                if rec["with_deleted"] and len(host["deleted"]):
                    keys.append(host["pos_old"][host["deleted"]])
                pk = np.concatenate(keys)
                seen = a - np.searchsorted(a_pos, pk, side="left")  # affected rows at or after each key
                dirty_pos = np.sort(pos[dslots])
                seen -= len(dirty_pos) - np.searchsorted(dirty_pos, pk, side="left")  # dirty rows are recomputed
                pairs = int(seen.sum())
                macs += pairs * 2 * d
                if cfg.vq and rec["block"]:
                    macs += len(pk) * d * K  # each changed key's v projected on its VQ head's codes, per head
                    macs += pairs * G * K + (a - dirty) * (G - cfg.vq_heads) * K  # moves, then summed per VQ head
                elif cfg.vq:
                    macs += (a - dirty) * K * d  # every affected row's move of s projected on the codes
            if len(fl):
                macs += int(np.searchsorted(alive_pos, pos[A[fl]], side="right").sum()) * 2 * d
            if cfg.vq:
                macs += len(fl) * K * d  # code distances of the rows recomputed in full
            finish = finish_row_macs(cfg)
            macs += len(nl) * finish
            # inputs recomputed from codes: l finishes per row (exact sizes: the next rows that were
            # not dirty; padded: every next row; and a resumed pass's first dirty rows)
            inputs = (len(nl) if rec["inputs"] is None else rec["inputs"]) + (dirty if rec["dirty_inputs"] else 0)
            macs += inputs * l * finish
            cost.incremental_macs += macs

    def _resume(self, ctx: _Edit, first: int, cost: Cost, finals: list) -> None:
        """Propagate what a pass left out from layer `first` on: near-ties it had no room to check
        and rows cut from a next set.

        Sizes are known from the pass's sync. Near-ties alone are recomputed on their own (they
        rarely change a code); only rows whose output changed start a further pass, from the
        layer where they are, with room for all the leftovers there (later layers may overflow
        again and resume again, each time from a later layer, so it ends)."""
        L, tl = self.cfg.num_hidden_layers, ctx.tl
        full = ctx.ab + 1
        left = {}
        for i, rec in enumerate(ctx.records):
            l = ctx.pass_first + i
            saved = ctx.saved[l]
            n_u, n_drop = max(0, rec["n_tied"] - rec["tcap"]), max(0, rec["n_next"] - rec["ncap"])
            uloc = dropped = None
            if n_u:
                untreated = saved["tied"].index_fill(0, saved["tloc"], False)
                v, ix = torch.topk(untreated.to(ctx.valid.dtype), min(full, bucket(n_u)))
                uloc = torch.where(v > 0, ix, tl)
            if n_drop:
                dropped = saved["nxt"].index_fill(0, saved["nloc"], False)
            left[l] = [uloc, dropped, n_u, n_drop]
        start = first
        while start < L:
            uloc, dropped, n_u, n_drop = left[start]
            if n_drop == 0 and n_u:  # near-ties only: fix them alone, go on only if a code changed
                changed = self._fix_ties(ctx, start, uloc, cost)
                left[start] = [None, changed, 0, n_u if changed is not None else 0]
                if changed is None:
                    start += 1
                    continue
            if left[start][3] or left[start][2]:
                break
            start += 1
        if start >= L:
            return
        extras, caps = {}, [(0, 0)] * (start + 1)
        ties = 0 if self.tie_rel <= 1e-8 else TIE_ROWS
        c = 0
        for l in range(start, L):
            uloc, dropped, n_u, n_drop = left[l]
            extras[l] = (uloc, dropped)
            c = min(full, bucket(max(math.ceil(c * self._growth()[0]), c + n_drop + n_u, 1)))
            if l > start:
                caps[l] = (caps[l][0], min(ties, full))
            caps.append((c, 0))
        self._pass(ctx, start, ctx.empty, caps, cost, False, extras, finals)

    def _layer(self, l, layer, ctx: _Edit, dloc, tcap: int, ncap: int, with_deleted: bool,
               extra_full=None, extra_next=None) -> torch.Tensor:
        """Bring layer l up to date for the dirty rows A[dloc]; returns the next layer's rows (local).

        A fixed handful of batched ops. ncap None (exact sizes): the host reads the next rows at
        the end. Otherwise no host decision: padded entries point at the trash row and carry zero
        weight, and every shape is a bucketed size known before the pass."""
        cfg, consts = self.cfg, self.consts
        d, H = cfg.hidden_size, cfg.num_attention_heads
        A = ctx.A
        ab1 = A.shape[0]
        V = self.layer_views[l]
        C = dloc.shape[0]
        nd = ctx.deleted.shape[0] if with_deleted else 0
        m = 2 * C + nd
        exact = ncap is None
        carried = ctx.carry if C else None  # the previous layer's next rows and their outputs
        ctx.carry = None
        if C:
            dv = carried[0] if carried is not None else ctx.dv0 if ctx.dv0 is not None else A.index_select(0, dloc)
        # near-ties are looked for among rows not recomputed in full (exact sizes: the host drops those)
        clean = None if exact else ctx.valid_b.index_fill(0, dloc, False) if C else ctx.valid_b

        # 1. q|k|v of the dirty rows: one fused matmul; the old k|v of every changed key
        if C:
            b = consts.qkv_bias[l]
            x_dirty = carried[1] if carried is not None else self._layer_input(l, dv)  # their input
            a_in = layer.self_attn_layer_norm(x_dirty)
            new = torch.addmm(b, a_in, consts.qkv_weight[l]) if b is not None else a_in @ consts.qkv_weight[l]
            if not consts.q_scaled:
                new[:, :d] *= cfg.head_dim ** -0.5
        # exact sizes: moving every affected row by m changed keys, then recomputing the C dirty ones
        # over all S slots, costs more than recomputing all of them (a large revision): do that
        S = V.kh.shape[-1]
        whole = bool(exact and m and ab1 * m + C * S >= ab1 * S)
        if whole:
            if C:
                V.qkv.index_put_((dv,), new)
            spA = self._full_rows(l, V, V.qhT[:, A], ctx.posA_col)  # fresh codes and bounds: no near-ties
        else:
            spA = V.sp.index_select(0, A)
        sp3, uA = self._split_sp(spA) if cfg.vq else (None, None)  # code projections (a, h, K), bounds u (a, h)
        if m and not whole:
            old = V.qkv.index_select(0, (torch.cat([dv, ctx.deleted]) if nd else dv) if C else ctx.deleted)
            if C:
                V.qkv.index_put_((dv,), new)
                kn = torch.cat([new, old])
                ks = ctx.key_dirty.index_select(2, dloc).flatten(1)  # new keys then old keys of the dirty rows
                if nd:
                    ks = torch.cat([ks, ctx.key_deleted], 1)
            else:
                kn, ks = old, ctx.key_deleted
            coef, pk = ks  # +-scale per new / old key (0 for padding), and key positions
            # 2. every affected query against every changed key, all heads in one product; the
            #    same weights move the code projections (linearity in v), into spA in place, and
            #    u by a bound of each move's norm
            qh = V.qh.index_select(0, A).transpose(0, 1)  # (H, a, hd) (gathering whole rows is 3x faster than per head)
            kh = kn.as_strided((H, d // H, m), (d // H, 1, kn.stride(0)), kn.storage_offset() + d)  # keys (H, hd, m)
            wts = torch.bmm(qh, kh)  # (H, a, m), then weighted in place: a fresh (H, a, m) temporary per op
            gelu_(wts).mul_((pk <= ctx.posA_col) * coef)  # costs page faults on a CPU (3x for a = 1,500, m = 60)
            vals = kn.narrow(1, 2 * d, d)  # (m, d)
            if m < consts.block_keys:  # few keys: each key's v per head, mapped to sp layout (zeros elsewhere)
                vb = (vals * consts.head_mask).view(H * m, d)  # each key's v per head, zeros elsewhere
                wflat = wts.transpose(0, 1).reshape(ab1, H * m)
                spA.addmm_(wflat, torch.mm(vb, consts.sp_map[l]))  # (H m, C) maps them to sp layout
                if cfg.vq:
                    self._widen(uA, wflat, vb)
            else:  # many keys: move s per head, then map the moves to sp layout (K d per row)
                ds = torch.bmm(wts, vals.view(m, H, -1).transpose(0, 1)).transpose(0, 1).reshape(ab1, d)
                spA.addmm_(ds, consts.sp_map[l])
                if cfg.vq:
                    uA.mul_(1.0 + self.tie_growth).add_(self._norms(ds))

        # 3. near-ties among the moved rows, when this dtype reserves room to recompute them here
        tied, tloc = None, None
        if cfg.vq and m and tcap:
            dist = self._dist(sp3, l)
            tied = self._tied(l, uA, dist, dist.amin(-1), clean)
            tv, ti = torch.topk(tied.to(spA.dtype), tcap)
            tloc = torch.where(tv > 0, ti, ctx.tl_t)

        # 4. rows recomputed in full over every key: dirty rows, near-ties, a resumed pass's rows
        parts = [p for p in (dloc if C else None, tloc, extra_full) if p is not None]
        R = (torch.cat(parts) if len(parts) > 1 else parts[0]) if parts and not whole else None
        if R is not None:
            qR = V.qhT[:, dv if R is dloc else A.index_select(0, R)]  # (H, r, hd) (index_select along dim 1 would copy all of q)
            spA.index_put_((R,), self._full_rows(l, V, qR, ctx.posA_col.index_select(0, R)))
        V.sp.index_put_((A,), spA)

        # 5. next layer's rows: dirty rows and rows whose code flipped
        codes = None
        if cfg.vq:
            dist = self._dist(sp3, l)
            best, codes = dist.min(-1)  # (a, h): the first of equal minima, as argmin
            if tied is None and m and not whole:  # (exact sizes: counts, compared on the host)
                tied = self._tied(l, uA, dist, best, clean, counts=exact)
            flipped = codes != V.codes.index_select(0, A)
            nxt = flipped.sum(-1) if exact else flipped.any(-1)  # a code flipped (exact sizes: how many, read with the ties)
        else:
            nxt = ctx.valid_b if m else ctx.zeros
        if C and not exact:  # (exact sizes: the host adds them)
            nxt = nxt.index_fill(0, dloc, True)
        if extra_next is not None:
            nxt = nxt | extra_next
        if ncap is None:  # exact sizes: read the set (and the near-ties the moves left) on the host
            nloc, tloc, host_sets = self._read_sets(l, ctx, nxt, tied, codes)
            if tloc is not None:
                R = tloc if R is None else torch.cat([R, tloc])
        else:  # padded: compacted without a sync; a set larger than ncap overflows into a further pass
            score = nxt * ctx.prio  # 0 outside A's real rows, 1 + 2^-20 for edited rows (first), 1 otherwise
            nv, ni = torch.topk(score, ncap)
            nloc = torch.where(nv > 0, ni, ctx.tl_t)
            ctx.counts += [tied.sum(dtype=score.dtype) if tied is not None else ctx.zero, score.sum()]

        # 6. codes, output projection and FFN of the next layer's rows. Their input: kept (full layout),
        #    or the dirty rows' from step 1 and the others' (their code flipped) recomputed from their
        #    codes. Exact sizes list the dirty rows first; padded sets are in no known order, so every
        #    input is recomputed.
        dvn = A.index_select(0, nloc)
        riders = ctx.riders
        if cfg.vq:
            codes = codes.index_select(0, nloc)
            V.codes.index_put_((dvn,), codes)
            z = self._code_vectors(l, codes if riders is None else torch.cat([codes, V.codes.index_select(0, riders)]))
        else:
            z = spA.index_select(0, nloc)
        kept = self.x is not None
        if exact and not kept:
            inputs = len(nloc) - C  # rows whose input is recomputed
            x_in = x_dirty if C and not inputs else self._layer_input(l, dvn[C:])
            x_in = torch.cat([x_dirty, x_in]) if C and inputs else x_in
        else:
            inputs = 0 if kept or not l else None  # None: every next row
            x_in = self._layer_input(l, dvn)
        if riders is not None:  # the riders' layer outputs, from their codes, in the same batched finish
            x_in = torch.cat([x_in, ctx.rider_x if l else self._layer_input(0, riders)])
        out = self._finish(l, layer, x_in, z)
        if riders is not None:
            out, ctx.rider_x = out[: len(nloc)], out[len(nloc):]
        if kept:
            V.x.index_put_((dvn,), out)
        ctx.carry = (dvn, out)

        if whole:  # every row of A recomputed in full, none moved
            host_sets[1] = np.arange(ab1)
        ctx.records.append({"tcap": tcap if tied is not None else 0, "ncap": ncap, "keys": 0 if whole else m,
                            "block": m < consts.block_keys, "whole": whole,
                            "with_deleted": with_deleted, "inputs": inputs,
                            "dirty_inputs": bool(C) and carried is None and not kept,
                            "sets": host_sets if ncap is None else [dloc, R if R is not None else dloc, nloc]})
        if ncap is not None:  # what a resumed pass needs (padded sizes)
            ctx.saved[l] = {"tied": tied if tied is not None else ctx.zeros, "tloc": tloc if tloc is not None else ctx.empty,
                            "nxt": nxt, "nloc": nloc}
        return nloc

    def _read_sets(self, l: int, ctx: _Edit, nxt: torch.Tensor, tied, codes):
        """Exact sizes (CPU): the host reads which rows go on, one read per layer. Near-ties among
        the moved rows (rare) are recomputed in full here, as a dense pass computes them, and join
        the next rows if their code changed. Returns (next rows, near-tie rows or None, the
        layer's row sets on the host: dirty, recomputed in full, next)."""
        flags = (torch.stack([nxt, tied]) if tied is not None else nxt.unsqueeze(0)).numpy().copy()  # one read
        dl = ctx.host_dloc
        flags[:, dl] = 0  # the dirty rows (distinct) are listed first, and recomputed in full already
        nl = np.concatenate([dl, np.flatnonzero(flags[0])])  # the dirty rows, then flipped ones (in order)
        ties = np.flatnonzero(flags[1] > self.cfg.vq_heads) if tied is not None else dl[:0]
        tloc = None
        if len(ties):
            V, A = self.layer_views[l], ctx.A
            tloc = torch.from_numpy(ties)
            rows = A.index_select(0, tloc)
            spT = self._full_rows(l, V, V.qhT[:, rows], ctx.posA_col.index_select(0, tloc))
            V.sp.index_put_((rows,), spT)
            fresh = self._dist(self._per_vq_head(spT), l).argmin(-1)
            codes.index_put_((tloc,), fresh)
            nxt = nxt.index_put((tloc,), (fresh != V.codes.index_select(0, rows)).sum(-1))
            flipped = nxt.numpy().copy()  # a second read, only after near-ties
            flipped[dl] = 0
            nl = np.concatenate([dl, np.flatnonzero(flipped)])
        ctx.host_dloc = nl
        return torch.from_numpy(nl), tloc, [dl, np.concatenate([dl, ties]), nl]

    def _widen(self, u: torch.Tensor, wflat: torch.Tensor, vb: torch.Tensor) -> None:
        """u of the affected rows after a move by weights wflat (a, H m) over keys whose values per
        attention head are vb (H m, d): u (1 + tie_growth) + sum over keys and heads of |w| times
        the norm of v's part in the head and VQ head j, a bound of |delta s^j| (the rounding a row
        accumulates grows with its moves; a full recomputation resets u)."""
        h = self.cfg.vq_heads
        per_key = torch.linalg.vector_norm(vb.view(vb.shape[0], h, -1), dim=-1)  # (H m, h)
        u.addmm_(wflat.abs(), per_key, beta=1.0 + self.tie_growth)

    def _full_rows(self, l: int, V, qR: torch.Tensor, posR: torch.Tensor) -> torch.Tensor:
        """sp rows (p^j per VQ head j, then u = |s^j|) of rows with queries qR (H, r, hd) at
        positions posR (r, 1), over every key."""
        cfg, consts = self.cfg, self.consts
        r = qR.shape[1]
        mask = V.kpos <= posR  # (r, slots): causal, alive keys only
        wR = gelu_(torch.bmm(qR, V.kh))  # (H, r, slots), weighted in place (see _layer)
        if consts.scale_exact:  # c * sum gelu v == sum (c gelu) v exactly for a power of two: scale the map
            wR.mul_(mask)
            sp_map = consts.sp_map_scaled[l]
        else:
            wR.mul_(mask * cfg.attention_scale)
            sp_map = consts.sp_map[l]
        s = torch.bmm(wR, V.vh).transpose(0, 1).reshape(r, -1)  # (r, d)
        out = torch.mm(s, sp_map)
        if cfg.vq:
            u = self._bound(out)
            if consts.scale_exact:  # s is unscaled here (the scale is in sp_map_scaled)
                torch.mul(self._norms(s), cfg.attention_scale, out=u)
            else:
                self._norms(s, out=u)
        return out

    def _fix_ties(self, ctx: _Edit, l: int, uloc: torch.Tensor, cost: Cost) -> torch.Tensor:
        """Recompute near-ties a pass had no room for at layer l, alone (no affected-row work);
        returns the local mask of those whose code changed (their output must be propagated)."""
        cfg, V, A = self.cfg, self.layer_views[l], ctx.A
        rows = A.index_select(0, uloc)
        spR = self._full_rows(l, V, V.qhT[:, rows], ctx.posA_col.index_select(0, uloc))
        V.sp.index_put_((rows,), spR)
        codes = self._dist(self._per_vq_head(spR), l).argmin(-1)
        changed = (codes != V.codes.index_select(0, rows)).any(-1) & ctx.valid_b.index_select(0, uloc)
        V.codes.index_put_((rows,), codes)
        flat = torch.cat([changed.sum().view(1), uloc]).tolist()  # the rare overflow path: one more sync
        host = ctx.host
        real = np.asarray(flat[1:], dtype=np.int64)
        slots = host["A"][real[real != ctx.tl]]
        cost.near_ties += len(slots)
        pairs = int(np.searchsorted(self.pos_host[host["order"]], self.pos_host[slots], side="right").sum())
        cost.incremental_macs += pairs * 2 * cfg.hidden_size + len(slots) * cfg.vq_codes * cfg.hidden_size
        return ctx.zeros.index_put((uloc,), changed) if int(flat[0]) else None

    def _finish(self, l: int, layer, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """DecoderLayer.finish with its weights transposed once: the same addmm calls, fewer dispatches."""
        wo, bo, w1, b1, w2, b2 = self.consts.finish[l]
        x = x + (torch.addmm(bo, z, wo) if bo is not None else z @ wo)
        a = layer.final_layer_norm(x)
        a = torch.relu(torch.addmm(b1, a, w1) if b1 is not None else a @ w1)
        return x + (torch.addmm(b2, a, w2) if b2 is not None else a @ w2)

    def _dist(self, sp3: torch.Tensor, l: int) -> torch.Tensor:
        """|s - c|^2 - |s|^2 for every VQ head and code of the rows, from their projections (a, h, K)."""
        return torch.add(self.consts.code_sq[l], sp3, alpha=-2.0)

    def _tied(self, l: int, u, dist, best, clean, counts: bool = False) -> torch.Tensor:
        """Rows (among `clean` ones, None: all) whose best two codes are within the tie guard (bool (a,)):
        some VQ head has a second code closer than tie_rel * (u^2 + max |c|^2), u >= |s chunk|; best
        (a, h) is each head's smallest distance. counts: instead, how many codes of the row are within
        the guard (int (a,)): tied when more than h (each head's best is one)."""
        thr = torch.addcmul(best + self.tie_c[l], u, u, value=self.tie_rel)  # (a, h)
        within = (dist < thr.unsqueeze(-1)).sum((-2, -1))
        if counts:
            return within
        tied = within > self.cfg.vq_heads
        return tied if clean is None else tied & clean

    # ----------------------------------------------------------------- checking
    def verify(self) -> WindowCheck:
        """Run the dense pass at the same positions and compare codes and outputs."""
        order = torch.tensor(self.order, dtype=torch.long, device=self.kpos.device)
        ids = torch.from_numpy(self.ids_host[self.order]).to(order.device)
        with torch.no_grad():
            out = self._dense(ids, torch.from_numpy(self.pos_host[self.order]).to(order.device))
        mismatched = 0
        if self.cfg.vq:
            for l, tr in enumerate(out.traces):
                mismatched += int((tr.codes[0] != self.codes[l, order]).any(-1).sum())
        diffs = [
            (out.hidden[0] - self.hidden(order)).abs().max(),
            (torch.log_softmax(out.cls_logits[0], -1) - self.cls_logp[order]).abs().max(),
            (self._next_nll(out.hidden[0, :-1], ids[1:]) - self.nll[order[1:]]).abs().max() if len(order) > 1
            else out.hidden.new_zeros(()),
        ]
        return WindowCheck(mismatched == 0, mismatched, float(max(diffs)))
