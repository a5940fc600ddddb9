"""Gapped positions from a large pool, and the order-maintenance relabelling that keeps them.

A window's rows are BOS at pool position 0 followed by its tokens at increasing positions in
(0, P). Opening a document spreads the tokens evenly, leaving gaps; an inserted token takes a
free position between its neighbours. When a gap is exhausted, a small neighbourhood around
the insertion is re-spread (its tokens are relabelled, which makes them dirty); only when the
whole window is too dense does that neighbourhood grow to the whole window (a full re-spread).
Training samples ordered random subsets of the pool so that the model uses only the order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

NEW = -1  # marks a row that still needs a position


def spread_positions(n: int, pool: int) -> torch.Tensor:
    """Evenly spread positions for n rows (BOS included, at 0): (n,) long."""
    if n > pool:
        raise ValueError(f"{n} rows do not fit a pool of {pool} positions")
    return torch.arange(n, dtype=torch.long) * pool // n


def sample_positions(n: int, pool: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Training positions: BOS at 0, then an ordered random subset of (0, P): (n,) long."""
    if n > pool:
        raise ValueError(f"{n} rows do not fit a pool of {pool} positions")
    rest = torch.randperm(pool - 1, generator=generator)[: n - 1] + 1
    return torch.cat([torch.zeros(1, dtype=torch.long), rest.sort().values])


@dataclass
class Assignment:
    positions: np.ndarray  # (n,) int64, strictly increasing, positions[0] == 0
    relabelled: np.ndarray  # indices of rows that had a position and got a new one
    full_respreads: int  # how many times the neighbourhood had to grow to the whole window


def _spread_between(left: int, right: int, count: int) -> np.ndarray:
    """count integers strictly between left and right, as evenly spaced as possible."""
    t = np.arange(1, count + 1, dtype=np.int64)
    return left + t * (right - left) // (count + 1)


def assign_positions(positions: np.ndarray, pool: int, density: float = 0.5) -> Assignment:
    """Give every NEW row a position between its neighbours, relabelling locally when needed.

    `positions` is in row order; row 0 (BOS) is fixed at 0 and every other known position is
    strictly increasing. A run of k NEW rows fits when its gap holds k free integers; otherwise
    the neighbourhood [lo, hi) around it doubles until its share of the pool has at most
    `density` occupancy, and its rows are spread evenly there.
    """
    pos = np.array(positions, dtype=np.int64)
    old = pos.copy()
    n = len(pos)
    if n > pool:
        raise ValueError(f"{n} rows do not fit a pool of {pool} positions")
    full = 0
    i = 1
    while i < n:
        if pos[i] != NEW:
            i += 1
            continue
        j = i
        while j < n and pos[j] == NEW:
            j += 1
        right = pos[j] if j < n else pool
        if right - pos[i - 1] - 1 >= j - i:
            pos[i:j] = _spread_between(pos[i - 1], right, j - i)
            i = j
            continue
        lo, hi = i, j
        while True:
            grow = max(1, hi - lo)
            lo, hi = max(1, lo - grow), min(n, hi + grow)
            while hi < n and pos[hi] == NEW:
                hi += 1
            left, right = pos[lo - 1], (pos[hi] if hi < n else pool)
            whole = lo == 1 and hi == n
            if right - left - 1 >= (hi - lo) / density or (whole and right - left - 1 >= hi - lo):
                break
            if whole:
                raise ValueError(f"{n} rows do not fit a pool of {pool} positions")
        full += int(lo == 1 and hi == n)
        pos[lo:hi] = _spread_between(left, right, hi - lo)
        i = hi
    moved = np.nonzero((old != NEW) & (old != pos))[0]
    return Assignment(positions=pos, relabelled=moved, full_respreads=full)
