"""Pool positions for training that look like the ones the engine leaves behind.

The model is not order-only: a row's position embedding reaches its scores, so a text scored at
two different layouts of the same order can get two different scores. The engine produces two
kinds of layout (``inference.positions``): the *spread* layout of an open, of typing at the end
and of a settled document, and the *edited* layout that middle insertions and deletions leave
until the document settles (runs of rows squeezed into a gap, neighbourhoods re-spread, holes
where rows were deleted). Training on uniformly sampled subsets of the pool, as distillation
does, sees neither exactly. A tail trained on the layouts inference produces, with a consistency
term between two of them (``post_vq``), scores the same text the same way whichever edits led
to it.

Each layout is a function ``n -> (n,) long`` positions (BOS at 0, strictly increasing, inside
the pool), drawn from a seeded generator so cached features are reproducible.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from inference.positions import NEW, assign_positions, sample_positions, spread_array, spread_positions

LAYOUTS = ("sampled", "spread", "edited")

Layout = Callable[[int], torch.Tensor]


def edited_positions(n: int, pool: int, rng: np.random.Generator) -> torch.Tensor:
    """The layout of n rows after a short edit history on a spread window, as the engine assigns it.

    The history: a window of ``n - inserted + deleted`` rows was opened (spread layout), ``deleted``
    of its rows were removed (leaving holes) and ``inserted`` rows were typed in one to three runs
    in the middle, each placed by ``assign_positions`` (gaps filled evenly, crowded neighbourhoods
    re-spread). Up to a third of the rows are new, as after a revision rewrites a passage."""
    if n <= 2:
        return spread_positions(n, pool)
    inserted = int(rng.integers(1, max(2, (n - 1) // 3 + 1)))
    deleted = int(rng.integers(0, max(1, (n - 1) // 6 + 1)))
    before = n - inserted + deleted
    opened = spread_array(before, pool)
    keep = np.ones(before, dtype=bool)
    if deleted:
        keep[1 + rng.choice(before - 1, size=deleted, replace=False)] = False
    kept = opened[keep]  # BOS and the surviving rows, in order
    sizes = _split(inserted, int(rng.integers(1, 4)), rng)
    where = np.sort(rng.integers(1, len(kept) + 1, size=len(sizes)))  # insert before row `where`
    pieces, last = [], 0
    for at, size in zip(where, sizes):
        pieces.append(kept[last:at])
        pieces.append(np.full(size, NEW, dtype=np.int64))
        last = at
    pieces.append(kept[last:])
    return torch.from_numpy(assign_positions(np.concatenate(pieces), pool).positions)


def _split(total: int, parts: int, rng: np.random.Generator) -> list[int]:
    """``total`` rows in at most ``parts`` non-empty runs."""
    parts = max(1, min(parts, total))
    cuts = np.sort(rng.choice(np.arange(1, total), size=parts - 1, replace=False)) if parts > 1 else np.array([])
    bounds = np.concatenate([[0], cuts, [total]]).astype(int)
    return [int(b - a) for a, b in zip(bounds[:-1], bounds[1:])]


def layout_function(name: str, pool: int, seed: int) -> Layout:
    """The positions callback of a named layout, seeded (a shard's content depends on its seed only)."""
    if name == "spread":
        return lambda n: spread_positions(n, pool)
    if name == "sampled":
        g = torch.Generator().manual_seed(seed)
        return lambda n: sample_positions(n, pool, g)
    if name == "edited":
        rng = np.random.default_rng(seed)
        return lambda n: edited_positions(n, pool, rng)
    raise ValueError(f"unknown layout {name!r}: expected one of {', '.join(LAYOUTS)}")
