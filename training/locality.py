"""Training for locality (beyond the paper): random edits and a code-stability margin.

One replaced token should change the codes of as few later positions as possible, since every
code flip adds a position to the engine's dirty set. During training we replace one token in a
copy of some sequences, run both through the model, and for every later, unedited position
penalise the edited copy's attention sum for not staying inside the original code's cell with
a margin:

    relu(d(s', c_orig) - min_{j != orig} d(s', c_j) + m)     (distances relative to |s|^2)

The same hinge on the unedited sequence keeps attention sums away from code boundaries. The
ablation flag is simply a weight of 0 (no edited copies are then made).

The margin has two units (``--margin-unit``). ``norm`` (above) measures it against the batch's
typical |s|^2. But attention sums are unnormalised (``s_n = c * sum_i gelu(q_n.k_i) v_i``), so |s|
grows with the number of tokens before a row while an edit's change to a later row does not: rows
early in a window, small beside that typical size, get a margin that is no room at all, and a
margin large enough for them holds most late rows at once. ``edit`` measures a row's room as its
Euclidean distance to its cell's nearest boundary plane, in units of the mean change this batch's
edits made to a later row's chunk: exactly what an edit must cross to flip a code, at every depth.
Measured beside ``norm`` (benchmarks/README.md, "Where layer 0's flips are"), it held layers 1-3
harder and cost tone, and did not lower layer 0's flips; ``norm`` stays the default.
"""

from __future__ import annotations

import torch

from .vq import chunks, distances

MARGIN_UNITS = ("norm", "edit")  # margin_hinge's unit, edit_hinge's


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


def plane_distance(x: torch.Tensor, ref: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """Distance (N, h) from chunks x (N, h, w) to the nearest boundary plane of code ``ref`` (N, h)'s
    cell; negative when x lies in another code's cell. The boundary with code j is the plane
    bisecting c_ref and c_j, at (d_j - d_ref) / (2 |c_j - c_ref|) from x."""
    h = codebook.shape[0]
    dist = distances(x, codebook)  # (N, h, K)
    gaps = torch.cdist(codebook, codebook)  # (h, K, K)
    gap = gaps[torch.arange(h, device=x.device)[None], ref]  # (N, h, K): |c_j - c_ref|
    d_ref = dist.gather(-1, ref[..., None])  # (N, h, 1)
    planes = (dist - d_ref) / (2 * gap.clamp(min=1e-12))  # (N, h, K)
    return planes.scatter(-1, ref[..., None], float("inf")).min(-1).values


def edit_hinge(
    s_new: torch.Tensor, codes_ref: torch.Tensor, codebook: torch.Tensor, unit: torch.Tensor, margin: float
) -> torch.Tensor:
    """Per-row hinge (B, T, h) in units of an edit's typical change ``unit`` (h,): how far s_new is
    from lying ``margin`` such changes inside code ``codes_ref``'s cell."""
    b, t, _ = s_new.shape
    h = codebook.shape[0]
    room = plane_distance(chunks(s_new, h), codes_ref.reshape(-1, h), codebook.detach())  # (B*T, h)
    return torch.relu(margin - room / unit).reshape(b, t, h)


def edit_change(s_orig: torch.Tensor, s_edit: torch.Tensor, later: torch.Tensor, heads: int) -> torch.Tensor:
    """The mean Euclidean change (h,) the edits made to a later row's VQ-head chunk (no gradient)."""
    delta = (chunks(s_edit.detach(), heads) - chunks(s_orig.detach(), heads)).norm(dim=-1)  # (E*T, h)
    rows = later.reshape(-1)
    return delta[rows].mean(0).clamp(min=1e-6) if rows.any() else delta.new_ones(heads)


def locality_loss(
    net,
    s_orig: list[torch.Tensor],
    codes_orig: list[torch.Tensor],
    s_edit: list[torch.Tensor],
    where: torch.Tensor,
    valid: torch.Tensor,
    margin: float,
    layer_weights: list[float] | None = None,
    unit: str = "norm",
) -> torch.Tensor:
    """Mean hinge over layers, VQ heads and later unedited valid positions (plus the originals).

    s_*: per-layer attention sums (E, T, d) of the originals and their edited copies;
    codes_orig: per-layer (E, T, h) codes of the originals; where: (E,) edited index.
    layer_weights: each layer's share of the mean (None: equal), normalised to sum to the number
    of layers, so the overall weight keeps its meaning: a layer whose codes flip more than the
    others' can be held harder without retuning ``--locality``. unit: the margin's unit, ``norm``
    (``margin_hinge``) or ``edit`` (``edit_hinge``; see the module's docstring).
    """
    shares = layer_shares(layer_weights, len(s_orig))
    t = valid.shape[1]
    later = (torch.arange(t, device=valid.device)[None, :] > where[:, None]) & valid  # (E, T)
    total = s_orig[0].new_zeros(())
    for layer, share, so, co, se in zip(net.layers, shares, s_orig, codes_orig, s_edit):
        book = layer.vq.codebook
        if unit == "edit":
            change = edit_change(so, se, later, book.shape[0])  # (h,)
            hinge_edit = edit_hinge(se, co, book, change, margin).mean(-1)  # (E, T)
            hinge_orig = edit_hinge(so, co, book, change, margin).mean(-1)  # (E, T)
        else:
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
