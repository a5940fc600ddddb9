"""Training for locality (beyond the paper): random edits and a code-stability margin.

One replaced token should change the codes of as few later positions as possible, since every
code flip adds a position to the engine's dirty set. During training we replace one token in a
copy of some sequences, run both through the model, and for every later, unedited position
penalise the edited copy's attention sum for not staying inside the original code's cell with
a margin:

    relu(d(s', c_orig) - min_{j != orig} d(s', c_j) + m)     (distances relative to |s|^2)

The same hinge on the unedited sequence keeps attention sums away from code boundaries. The
ablation flag is simply a weight of 0 (no edited copies are then made).
"""

from __future__ import annotations

import torch

from .vq import chunks, distances


def make_edits(
    ids: torch.Tensor, valid: torch.Tensor, vocab: int, generator: torch.Generator, low_id: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace one random non-BOS valid token per row by a random token.

    Returns (edited ids (B, T), edited index (B,)).
    """
    b, _ = ids.shape
    lengths = valid.sum(1).cpu()  # (B,)
    where = 1 + (torch.rand(b, generator=generator) * (lengths - 1).clamp(min=1)).long()  # (B,)
    new = torch.randint(low_id, vocab, (b,), generator=generator)  # (B,)
    edited = ids.clone()
    where, new = where.to(ids.device), new.to(ids.device)
    edited[torch.arange(b, device=ids.device), where] = new
    return edited, where


def margin_hinge(s_new: torch.Tensor, codes_ref: torch.Tensor, codebook: torch.Tensor, margin: float) -> torch.Tensor:
    """Per-row hinge (B, T, h): how far s_new is from staying in code ``codes_ref`` with margin.

    s_new (B, T, d); codes_ref (B, T, h) long; codebook (h, K, w).
    """
    b, t, _ = s_new.shape
    h = codebook.shape[0]
    x = chunks(s_new, h)  # (B*T, h, w)
    dist = distances(x, codebook.detach())  # (B*T, h, K)
    scale = x.detach().pow(2).sum(-1).mean().clamp(min=1e-8)  # typical |chunk|^2
    ref = codes_ref.reshape(-1, h)  # (B*T, h)
    d_ref = dist.gather(-1, ref[..., None]).squeeze(-1)  # (B*T, h)
    others = dist.scatter(-1, ref[..., None], float("inf"))  # (B*T, h, K)
    d_alt = others.min(-1).values  # (B*T, h)
    return torch.relu((d_ref - d_alt) / scale + margin).reshape(b, t, h)


def locality_loss(
    net,
    s_orig: list[torch.Tensor],
    codes_orig: list[torch.Tensor],
    s_edit: list[torch.Tensor],
    where: torch.Tensor,
    valid: torch.Tensor,
    margin: float,
    layer_weights: list[float] | None = None,
) -> torch.Tensor:
    """Mean hinge over layers, VQ heads and later unedited valid positions (plus the originals).

    s_*: per-layer attention sums (E, T, d) of the originals and their edited copies;
    codes_orig: per-layer (E, T, h) codes of the originals; where: (E,) edited index.
    layer_weights: each layer's share of the mean (None: equal), normalised to sum to the number
    of layers, so the overall weight keeps its meaning: a layer whose codes flip more than the
    others' can be held harder without retuning ``--locality``.
    """
    shares = layer_shares(layer_weights, len(s_orig))
    t = valid.shape[1]
    later = (torch.arange(t, device=valid.device)[None, :] > where[:, None]) & valid  # (E, T)
    total = s_orig[0].new_zeros(())
    for layer, share, so, co, se in zip(net.layers, shares, s_orig, codes_orig, s_edit):
        book = layer.vq.codebook
        hinge_edit = margin_hinge(se, co, book, margin).mean(-1)  # (E, T)
        hinge_orig = margin_hinge(so, co, book, margin).mean(-1)  # (E, T)
        term = (hinge_edit * later).sum() / later.sum().clamp(min=1)
        term = term + (hinge_orig * valid).sum() / valid.sum().clamp(min=1)
        total = total + share * term
    return total / len(s_orig)


class LocalityLayersError(ValueError):
    """--locality-layers does not fit the model: the CLI says so instead of a traceback."""


def layer_shares(weights: list[float] | None, layers: int) -> list[float]:
    """Per-layer multipliers of the locality term: ``weights`` scaled to sum to ``layers`` (all 1
    when None). A model with fewer or more layers than weights given is a usage error."""
    if weights is None:
        return [1.0] * layers
    if len(weights) != layers or min(weights) < 0 or sum(weights) <= 0:
        raise LocalityLayersError(
            f"--locality-layers needs {layers} non-negative weights, one per layer, not all zero; got {weights}"
        )
    return [layers * w / sum(weights) for w in weights]
