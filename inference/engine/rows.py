"""Pure kernels the engine's layer update calls on its rows: no state, tensors in, tensors out.

They compute what DecoderLayer computes, in the form an update needs: on a few gathered rows,
with the weights pre-fused or pre-transposed (LayerConstants), the attention weights in place,
and the attention sum kept as its code projections (a sums row) rather than as s. Where a
formula is the dense pass's own and exactness allows one function, it lives in inference/kernels.py
and both call it (`code_distances`). The rest cannot be the dense pass's function:
  - `finish_rows` is DecoderLayer.finish with the weights transposed once: the same addmm calls
    (F.linear of 2-D rows is addmm with the weight's transposed view), fewer dispatches per call.
  - `full_sums` weights with gelu in place and folds the attention scale into the codebook map
    when it is a power of two (exact), and maps s to its code projections with one matmul: the
    dense pass keeps s and quantizes it with `kernels.quantize`. The codes agree (the tie guard
    recomputes any row whose two best codes are closer than the rounding could move them).
"""

from __future__ import annotations

import torch

from .. import kernels
from ..config import VQOPTConfig
from .constants import LayerConstants


def gelu_(x: torch.Tensor) -> torch.Tensor:
    """F.gelu in place (the same kernel, the same numbers): attention weights are the update's
    largest temporaries."""
    return torch.ops.aten.gelu_(x)


def head_norms(cfg: VQOPTConfig, s: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """|s^j| per VQ head of attention sums (r, d): (r, h), what a row's bound u is reset to."""
    return torch.linalg.vector_norm(s.view(s.shape[0], cfg.vq_heads, -1), dim=-1, out=out)


def code_distances(consts: LayerConstants, layer: int, proj: torch.Tensor) -> torch.Tensor:
    """|s - c|^2 - |s|^2 for every VQ head and code of the rows, from their projections (a, h, K)."""
    return kernels.code_distances(proj, consts.code_sq[layer])


BLOCKED_ROWS = 64  # rows recomputed at once from which full_sums goes by blocks of positions
MAX_BLOCKS = 8


def blocks_for(rows: int, exact: bool) -> int:
    """The blocks of positions full_sums takes for `rows` rows: 1 (one product) below BLOCKED_ROWS
    or without exact sizes (a padded pass reads no block sizes), then one more per BLOCKED_ROWS."""
    return min(MAX_BLOCKS, rows // BLOCKED_ROWS + 1) if exact and rows >= BLOCKED_ROWS else 1


def full_sums(
    cfg: VQOPTConfig,
    consts: LayerConstants,
    layer: int,
    keys_by_head: torch.Tensor,
    values_by_head: torch.Tensor,
    key_pos: torch.Tensor,
    queries: torch.Tensor,
    query_pos: torch.Tensor,
    blocks: int = 1,
) -> torch.Tensor:
    """Sums rows (p^j per VQ head j, then u = |s^j|) of rows with queries (H, r, hd) at positions
    query_pos (r, 1), over every key (keys (H, hd, slots), values (H, slots, hd), their positions).

    blocks > 1: the rows go in that many blocks by position, each against only the keys at or
    before its last row. One product with every key, the later ones masked, spends about half its
    work on nothing when the rows spread over a window; the keys are gathered in position order
    once, and the host reads each block's key count (one read: for exact sizes only)."""
    if blocks == 1:
        mask = key_pos <= query_pos  # (r, slots): causal, alive keys only
        s = _attention_sums(cfg, consts, queries, keys_by_head, values_by_head, mask)
        return sums_rows(cfg, consts, layer, s)
    r = queries.shape[1]
    key_order = torch.argsort(key_pos)
    sorted_pos = key_pos.index_select(0, key_order)
    row_order = torch.argsort(query_pos[:, 0])
    row_pos = query_pos.index_select(0, row_order)  # (r, 1), ascending
    edges = [r * b // blocks for b in range(blocks + 1)]
    ends = torch.tensor(edges[1:], device=query_pos.device) - 1
    counts = torch.searchsorted(sorted_pos, row_pos[ends, 0], right=True).tolist()
    keys = keys_by_head.index_select(2, key_order[: counts[-1]])  # (H, hd, n): in position order
    values = values_by_head.index_select(1, key_order[: counts[-1]])  # (H, n, hd)
    rows = queries.index_select(1, row_order)
    s = queries.new_empty(r, cfg.hidden_size)
    for lo, hi, n in zip(edges, edges[1:], counts):
        if hi > lo:
            mask = sorted_pos[:n] <= row_pos[lo:hi]  # (rows, n)
            s[lo:hi] = _attention_sums(cfg, consts, rows[:, lo:hi], keys[:, :, :n], values[:, :n], mask)
    return sums_rows(cfg, consts, layer, s.index_select(0, torch.argsort(row_order)))


def _attention_sums(
    cfg: VQOPTConfig,
    consts: LayerConstants,
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """s (r, d) of queries (H, r, hd) over keys (H, hd, n) and values (H, n, hd) where mask (r, n)
    holds; unscaled when the scale is exact (sum_map_scaled then carries it, see sums_rows)."""
    r = queries.shape[1]
    weights = gelu_(torch.bmm(queries, keys))  # (H, r, n), weighted in place
    if consts.scale_exact:  # c * sum gelu v == sum (c gelu) v exactly for a power of two: scale the map
        weights.mul_(mask)
    else:
        weights.mul_(mask * cfg.attention_scale)
    return torch.bmm(weights, values).transpose(0, 1).reshape(r, -1)  # (r, d)


def sums_rows(cfg: VQOPTConfig, consts: LayerConstants, layer: int, s: torch.Tensor) -> torch.Tensor:
    """Sums rows of attention sums s (r, d): their code projections, then the bounds u = |s^j|."""
    sum_map = consts.sum_map_scaled[layer] if consts.scale_exact else consts.sum_map[layer]
    out = torch.mm(s, sum_map)
    if cfg.vq:
        bounds = out[..., consts.proj_width :]
        if consts.scale_exact:  # s is unscaled here (the scale is in sum_map_scaled)
            torch.mul(head_norms(cfg, s), cfg.attention_scale, out=bounds)
        else:
            head_norms(cfg, s, out=bounds)
    return out


def widen_bounds(
    cfg: VQOPTConfig, bounds: torch.Tensor, weights: torch.Tensor, values_per_head: torch.Tensor, tie_growth: float
) -> None:
    """The bounds u of the affected rows after a move by weights (a, H m) over keys whose values per
    attention head are values_per_head (H m, d): u (1 + tie_growth) + the sum over keys and heads of
    |w| times the norm of v's part in the head and VQ head j, a bound of |delta s^j| (the rounding
    a row accumulates grows with its moves; a full recomputation resets u)."""
    per_key = torch.linalg.vector_norm(values_per_head.view(values_per_head.shape[0], cfg.vq_heads, -1), dim=-1)
    bounds.addmm_(weights.abs(), per_key, beta=1.0 + tie_growth)


def tie_threshold(
    tie_rel: float, tie_code_term: torch.Tensor, bounds: torch.Tensor, best: torch.Tensor
) -> torch.Tensor:
    """The tie guard's distance per row and VQ head (a, h): a code closer than this to the row than
    best + tie_rel * (u^2 + max |c|^2) is a near-tie of the best one (u >= |s chunk|)."""
    return torch.addcmul(best + tie_code_term, bounds, bounds, value=tie_rel)


def near_ties(
    cfg: VQOPTConfig,
    tie_rel: float,
    tie_code_term: torch.Tensor,
    bounds: torch.Tensor,
    distances: torch.Tensor,
    best: torch.Tensor,
    clean: torch.Tensor | None,
    counts: bool = False,
) -> torch.Tensor:
    """Rows (among `clean` ones, None: all) whose best two codes are within the tie guard (bool (a,)):
    some VQ head has a second code closer than tie_rel * (u^2 + max |c|^2), u >= |s chunk|; best
    (a, h) is each head's smallest distance. counts: instead, how many codes of the row are within
    the guard (int (a,)): tied when more than h (each head's best is one)."""
    threshold = tie_threshold(tie_rel, tie_code_term, bounds, best)  # (a, h)
    within = (distances < threshold.unsqueeze(-1)).sum((-2, -1))
    if counts:
        return within
    tied = within > cfg.vq_heads
    return tied if clean is None else tied & clean


def finish_rows(
    consts: LayerConstants, layer: int, final_norm: torch.nn.LayerNorm, x: torch.Tensor, z: torch.Tensor
) -> torch.Tensor:
    """DecoderLayer.finish with its weights transposed once: the same addmm calls, fewer dispatches."""
    wo, bo, w1, b1, w2, b2 = consts.finish[layer]
    x = x + (torch.addmm(bo, z, wo) if bo is not None else z @ wo)
    a = final_norm(x)
    a = torch.relu(torch.addmm(b1, a, w1) if b1 is not None else a @ w1)
    return x + (torch.addmm(b2, a, w2) if b2 is not None else a @ w2)
