"""Pure tensor functions of the dense forward pass (model.py), and those the engine shares with it.

Both paths must compute the same numbers. The engine calls the functions here where one function
can serve both bit for bit: `position_rows` (which rows of the position tables a position reads)
and `code_distances` (|s - c|^2 less |s|^2 from code projections). The dense pass uses the rest:
positional embeddings from the factorised pool, the attention weighting (softmax, or GELU
without normalisation), head splitting and vector quantization. The engine's own forms of the
same formulas (on gathered rows, weights in place, s kept as its code projections) are in
inference/engine/rows.py, whose docstring says why each cannot be the function here. Modules
only hold parameters; nothing here keeps state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PARKED_CODE = 1e4  # every coordinate of a parked code: far outside any attention sum, so never the nearest


def parked_codes(codebook: torch.Tensor) -> torch.Tensor:
    """(h, K) True for parked codes (every coordinate ``PARKED_CODE``): a layer trained with fewer
    codes than the config's K keeps the rest there (``vq-train finetune --refit-codes``). Argmin
    never picks them, and the engine's tie guard leaves them out of its largest-code term."""
    return (codebook == PARKED_CODE).all(-1)


def position_rows(positions, repeat: int):
    """Rows of the coarse and the fine position tables for pool positions (tensors or arrays):
    (p // r + 2, p % r), with OPT's offset of 2."""
    return positions // repeat + 2, positions % repeat


def position_embedding(coarse: torch.Tensor, fine: torch.Tensor, positions: torch.Tensor, repeat: int) -> torch.Tensor:
    """Embedding of pool positions: coarse[p // r + 2] + fine[p % r]."""
    coarse_row, fine_row = position_rows(positions, repeat)
    return coarse[coarse_row] + fine[fine_row]  # (..., d)


def causal_mask(query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
    """True where key i is visible to query n: causality is by position value, pos_i <= pos_n."""
    return key_pos.unsqueeze(-2) <= query_pos.unsqueeze(-1)  # (..., Tq, Tk)


def gelu_weights(scores: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """GELU attention weights c * gelu(q.k), zero where masked; no per-query normalisation.

    Where no graph is recorded (inference: a build's dense pass) the weights are worked out in the
    scores' own memory, which the caller gives up: the same kernels in the same order, so the same
    numbers, but one (H, T, T) tensor alive instead of three or four. Out of place, a 2,048-token
    window's pass held about 200 MiB of them in float32, above the memory budget, while a long
    document was built. Training (autograd) and the ONNX export (tracing) keep the plain form."""
    if scores.requires_grad or torch.jit.is_tracing():
        return torch.where(mask, F.gelu(scores) * scale, scores.new_zeros(()))
    weights = torch.ops.aten.gelu_(scores)
    weights.mul_(scale)
    return weights.masked_fill_(~mask, 0)


def softmax_weights(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Plain OPT softmax weights; a fully masked row (padding query) gets all zeros."""
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask.any(-1, keepdim=True)


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., T, d) -> (..., heads, T, d // heads)."""
    *lead, t, d = x.shape
    return x.reshape(*lead, t, heads, d // heads).transpose(-3, -2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(..., heads, T, hd) -> (..., T, heads * hd)."""
    *lead, h, t, hd = x.shape
    return x.transpose(-3, -2).reshape(*lead, t, h * hd)


def code_projections(s: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """s . c for every VQ head's chunk of s and every code: (..., d) -> (..., h, K)."""
    h, k, w = codebook.shape
    chunks = s.reshape(*s.shape[:-1], h, w)  # (..., h, w)
    return torch.einsum("...hw,hkw->...hk", chunks, codebook)


def code_distances(proj: torch.Tensor, code_sq: torch.Tensor) -> torch.Tensor:
    """|s - c|^2 - |s|^2 for every code, from the projections s . c (..., h, K) and |c|^2 (h, K).

    |s|^2 is the same for every code and dropped. One add with alpha -2: 2 s.c is exact, so this
    is the same number as code_sq - 2 proj, in one op (the engine runs it per layer of an update)."""
    return torch.add(code_sq, proj, alpha=-2.0)


def nearest_codes(proj: torch.Tensor, code_sq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmin over codes of |s - c|^2 = |s|^2 - 2 s.c + |c|^2, from projections alone.

    Returns the codes (..., h) and the gap between the best and second best distance (..., h),
    which the engine's near-tie guard reads.
    """
    dist = code_distances(proj, code_sq)  # (..., h, K)
    top = torch.topk(dist, 2, dim=-1, largest=False)
    return top.indices[..., 0], top.values[..., 1] - top.values[..., 0]


def gather_codes(codebook: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Concatenate the chosen code vectors: codes (..., h) -> (..., h * w)."""
    h = codebook.shape[0]
    heads = torch.arange(h, device=codes.device)
    return codebook[heads, codes].flatten(-2)  # (..., d)


def straight_through(continuous: torch.Tensor, quantized: torch.Tensor) -> torch.Tensor:
    """Value exactly `quantized`, gradient to `continuous` (the bit-exact form training/vq.py uses too)."""
    return quantized.detach() + (continuous - continuous.detach())


def quantize(s: torch.Tensor, codebook: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hard multi-head VQ with straight-through gradient: s (..., d) -> (z, codes (..., h))."""
    codes, _ = nearest_codes(code_projections(s, codebook), codebook.pow(2).sum(-1))
    return straight_through(s, gather_codes(codebook, codes)), codes
