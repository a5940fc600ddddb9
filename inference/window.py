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
    """Per-layer codebook views the engine needs, computed once per model."""

    def __init__(self, net: VQOPT) -> None:
        cfg = net.config
        heads, h = cfg.num_attention_heads, cfg.vq_heads
        self.segments = heads * h // math.gcd(heads, h)  # G: a segment lies in one attention and one VQ head
        width = cfg.hidden_size // self.segments
        per_vq = self.segments // h
        self.head_of_segment = torch.arange(self.segments) // (self.segments // heads)
        self.code_sq = []  # (h, K) per layer
        self.segment_codebook = []  # (G, K, width) per layer
        for layer in net.layers:
            cb = layer.vq.codebook.detach()  # (h, K, w)
            self.code_sq.append(cb.pow(2).sum(-1))
            seg = cb.reshape(h, cfg.vq_codes, per_vq, width).permute(0, 2, 1, 3)  # (h, G/h, K, width)
            self.segment_codebook.append(seg.reshape(self.segments, cfg.vq_codes, width))

    def to(self, device: torch.device) -> "LayerConstants":
        self.head_of_segment = self.head_of_segment.to(device)
        return self

    def key_code_projections(self, layer: int, v: torch.Tensor) -> torch.Tensor:
        """vc: every key's v segment projected on its VQ head's codes: (c, d) -> (c, G, K)."""
        seg = self.segment_codebook[layer]
        return torch.einsum("cgw,gkw->cgk", v.reshape(v.shape[0], self.segments, -1), seg)


LSE_CHUNK_ROWS = 256


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

    # ----------------------------------------------------------------- full pass
    def _build(self, rows: np.ndarray, pos: np.ndarray) -> None:
        """Allocate the slots and fill them with a dense pass (open, rebuild after a fault)."""
        cfg, net = self.cfg, self.net
        p = next(net.parameters())
        dev, dt = p.device, p.dtype
        n = len(rows)
        cap = max(16, int(n * 1.25))
        L, d, h, K, G = cfg.num_hidden_layers, cfg.hidden_size, cfg.vq_heads, cfg.vq_codes, self.consts.segments
        self.ids_host = np.zeros(cap, dtype=np.int64)
        self.pos_host = np.zeros(cap, dtype=np.int64)
        self.alive = torch.zeros(cap, dtype=torch.bool, device=dev)
        self.pos = torch.zeros(cap, dtype=torch.long, device=dev)
        self.x = torch.zeros(L + 1, cap, d, dtype=dt, device=dev)
        self.q, self.k, self.v, self.s = (torch.zeros(L, cap, d, dtype=dt, device=dev) for _ in range(4))
        self.proj = torch.zeros(L, cap, h, K, dtype=dt, device=dev)
        self.codes = torch.zeros(L, cap, h, dtype=torch.long, device=dev)
        self.vc = torch.zeros(L, cap, G, K, dtype=dt, device=dev)
        self.hidden = torch.zeros(cap, d, dtype=dt, device=dev)
        self.cls_logp = torch.zeros(cap, cfg.num_labels, dtype=dt, device=dev)  # per-token class log-probabilities
        self.lse = torch.zeros(cap, dtype=dt, device=dev)
        self.order = list(range(n))
        self.free = list(range(cap - 1, n - 1, -1))
        self.ids_host[:n], self.pos_host[:n] = rows, pos
        self.alive[:n] = True
        self.pos[:n] = torch.from_numpy(pos).to(dev)
        with torch.no_grad():
            out = self._dense(torch.from_numpy(rows).to(dev), self.pos[:n])
            for l, tr in enumerate(out.traces):
                self.x[l, :n], self.q[l, :n], self.k[l, :n], self.v[l, :n], self.s[l, :n] = (
                    t[0] for t in (tr.x, tr.q, tr.k, tr.v, tr.s)
                )
                if cfg.vq:
                    self.codes[l, :n] = tr.codes[0]
                    self.proj[l, :n] = kernels.code_projections(tr.s[0], net.layers[l].vq.codebook)
                    self.vc[l, :n] = self.consts.key_code_projections(l, tr.v[0])
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
            self._grow(max(2 * self.alive.numel(), self.alive.numel() + count))
        return [self.free.pop() for _ in range(count)]

    def _grow(self, cap: int) -> None:
        old = self.alive.numel()
        for name in ("ids_host", "pos_host"):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr, np.zeros(cap - old, dtype=arr.dtype)]))
        for name, dim in (("alive", 0), ("pos", 0), ("hidden", 0), ("cls_logp", 0), ("lse", 0), ("x", 1),
                          ("q", 1), ("k", 1), ("v", 1), ("s", 1), ("proj", 1), ("codes", 1), ("vc", 1)):
            t = getattr(self, name)
            shape = list(t.shape)
            shape[dim] = cap - old
            setattr(self, name, torch.cat([t, t.new_zeros(shape)], dim=dim))
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
        cfg, net = self.cfg, self.net
        dev = self.alive.device
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

        pos_before = self.pos.clone()
        proposal = self.pos_host[new_order].copy()
        is_new = np.zeros(len(self.ids_host), dtype=bool)
        is_new[inserted] = True
        proposal[is_new[new_order]] = NEW
        assignment = assign_positions(proposal, cfg.position_pool)
        order_arr = np.asarray(new_order, dtype=np.int64)
        relabelled = order_arr[assignment.relabelled].tolist()
        self.pos_host[order_arr] = assignment.positions
        touched = sorted(set(inserted) | set(changed) | set(relabelled))

        cost = Cost(dirty_per_layer=[], relabelled=len(relabelled), full_respreads=assignment.full_respreads)
        self.order = new_order
        t = lambda xs: torch.tensor(xs, dtype=torch.long, device=dev)  # noqa: E731
        touched_t, deleted_t = t(touched), t(deleted)
        self.pos[touched_t] = torch.from_numpy(self.pos_host[touched]).to(dev)
        self.alive[deleted_t] = False
        self.alive[t(inserted)] = True
        existed = torch.ones_like(self.alive)
        existed[t(inserted)] = False

        dirty = touched_t
        if len(touched):
            ids = torch.from_numpy(self.ids_host[touched]).to(dev)
            self.x[0, dirty] = net.embed(ids, self.pos[dirty])
        keys_all = self.alive.nonzero().squeeze(1)
        for l, layer in enumerate(net.layers):
            cost.dirty_per_layer.append(int(dirty.numel()))
            dirty = self._layer(l, layer, dirty, deleted_t, existed, pos_before, keys_all, cost)
        if dirty.numel():
            hidden, logits = net.heads(self.x[cfg.num_hidden_layers, dirty])
            self._fill_heads(dirty, hidden, logits)
            cost.incremental_macs += dirty.numel() * head_row_macs(cfg)
        self.free += deleted
        cost.dense_macs = self.dense_macs()
        return cost

    def _layer(self, l, layer, dirty, deleted, existed, pos_before, keys_all, cost: Cost) -> torch.Tensor:
        """Bring layer l up to date given its dirty rows; returns the next layer's dirty rows."""
        cfg, consts = self.cfg, self.consts
        d, K = cfg.hidden_size, cfg.vq_codes
        old_keys = torch.cat([dirty[existed[dirty]], deleted])
        k_old, v_old, vc_old = self.k[l, old_keys], self.v[l, old_keys], self.vc[l, old_keys]
        p_old = pos_before[old_keys]

        if dirty.numel():
            q, k, v = layer.attn_inputs(self.x[l, dirty])
            self.q[l, dirty], self.k[l, dirty], self.v[l, dirty] = q, k, v
            cost.incremental_macs += dirty.numel() * 3 * d * d
            if cfg.vq:
                self.vc[l, dirty] = consts.key_code_projections(l, v)
                cost.incremental_macs += dirty.numel() * K * d
        n_changed = old_keys.numel() + dirty.numel()
        if n_changed == 0:
            return dirty

        # clean queries at or after the first changed key: move s (and proj) by the delta
        p_new = self.pos[dirty]
        pmin = torch.cat([p_old, p_new]).min()
        dirty_mask = torch.zeros_like(self.alive)
        dirty_mask[dirty] = True
        aff = (self.alive & ~dirty_mask & (self.pos >= pmin)).nonzero().squeeze(1)
        if aff.numel():
            proj_delta = cfg.vq and n_changed * consts.segments < d
            qa, pa = self.q[l, aff], self.pos[aff]
            ds_new, dp_new, pairs_new = self._contrib(layer, qa, pa, self.k[l, dirty], self.v[l, dirty],
                                                      self.vc[l, dirty], p_new, proj_delta)
            ds_old, dp_old, pairs_old = self._contrib(layer, qa, pa, k_old, v_old, vc_old, p_old, proj_delta)
            self.s[l, aff] += ds_new - ds_old
            pairs = pairs_new + pairs_old
            cost.incremental_macs += pairs * 2 * d
            if proj_delta:
                self.proj[l, aff] += dp_new - dp_old
                cost.incremental_macs += pairs * consts.segments * K
            elif cfg.vq:
                self.proj[l, aff] = kernels.code_projections(self.s[l, aff], layer.vq.codebook)
                cost.incremental_macs += aff.numel() * K * d

        self._full_rows(l, layer, dirty, keys_all, cost)

        if not cfg.vq:
            nxt = torch.cat([dirty, aff]) if aff.numel() else dirty
            z = self.s[l, nxt]
        else:
            nxt = dirty
            if aff.numel():
                codes, gap = kernels.nearest_codes(self.proj[l, aff], consts.code_sq[l])
                chunk_sq = self.s[l, aff].reshape(aff.numel(), cfg.vq_heads, -1).pow(2).sum(-1)
                tol = self.tie_rel * (chunk_sq + consts.code_sq[l].max(-1).values)
                tied = (gap < tol).any(-1)
                if tied.any():
                    rows = aff[tied]
                    cost.near_ties += int(rows.numel())
                    self._full_rows(l, layer, rows, keys_all, cost)
                    codes[tied] = kernels.nearest_codes(self.proj[l, rows], consts.code_sq[l])[0]
                flipped = (codes != self.codes[l, aff]).any(-1)
                self.codes[l, aff] = codes
                nxt = torch.cat([dirty, aff[flipped]])
            if dirty.numel():
                self.codes[l, dirty] = kernels.nearest_codes(self.proj[l, dirty], consts.code_sq[l])[0]
            z = kernels.gather_codes(layer.vq.codebook, self.codes[l, nxt])
        if nxt.numel():
            self.x[l + 1, nxt] = layer.finish(self.x[l, nxt], z)
            cost.incremental_macs += nxt.numel() * (d * d + 2 * d * cfg.ffn_dim)
        return nxt

    def _contrib(self, layer, qa, pa, k, v, vc, pk, with_proj: bool):
        """Sum over keys (k, v at positions pk) of c gelu(q.k) v for queries qa at pa; and its proj."""
        cfg = self.cfg
        if k.shape[0] == 0:
            return 0.0, 0.0, 0
        heads = cfg.num_attention_heads
        qh, kh, vh = (kernels.split_heads(t, heads) for t in (qa, k, v))  # (H, m|c, hd)
        mask = kernels.causal_mask(pa, pk)  # (m, c)
        w = kernels.gelu_weights(qh @ kh.transpose(-1, -2), mask.unsqueeze(0), cfg.attention_scale)  # (H, m, c)
        ds = kernels.merge_heads(w @ vh)  # (m, d)
        dp = 0.0
        if with_proj:
            w_seg = w[self.consts.head_of_segment]  # (G, m, c)
            per_seg = torch.einsum("gmc,cgk->mgk", w_seg, vc)  # (m, G, K)
            dp = per_seg.reshape(per_seg.shape[0], cfg.vq_heads, -1, cfg.vq_codes).sum(2)  # (m, h, K)
        return ds, dp, int(mask.sum())

    def _full_rows(self, l, layer, rows, keys_all, cost: Cost) -> None:
        """Recompute s (and proj) of `rows` from every key they see."""
        if rows.numel() == 0:
            return
        cfg = self.cfg
        mask = kernels.causal_mask(self.pos[rows], self.pos[keys_all])  # (m, n)
        s = layer.attention_sum(self.q[l, rows], self.k[l, keys_all], self.v[l, keys_all], mask)
        self.s[l, rows] = s
        cost.incremental_macs += int(mask.sum()) * 2 * cfg.hidden_size
        if cfg.vq:
            self.proj[l, rows] = kernels.code_projections(s, layer.vq.codebook)
            cost.incremental_macs += rows.numel() * cfg.vq_codes * cfg.hidden_size

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
