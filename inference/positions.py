"""Gapped positions from a large pool, and the order-maintenance relabelling that keeps them.

A window's rows are BOS at pool position 0 followed by its tokens at increasing positions in
(0, P). One layout rule places the rows of a window that is opened or re-spread: row i sits at
i * stride, the stride depending only on the *capacity bucket* of the row count (buckets grow
geometrically, BUCKETS_PER_OCTAVE to a doubling, like a growing array's capacity), so the rows
fill between four fifths and all of the pool. The model is not order-only (a row's position
embedding reaches its scores), so the positions an edit history leaves behind decide what a
writer sees: this rule is what makes a document typed at its end equal, bit for bit, a fresh
open of the same text. Tokens appended at the end continue at the bucket's stride; an append
that crosses into the next bucket re-spreads the whole window (amortised O(1) rows per token).

An inserted token in the middle takes a free position between its neighbours. When a gap is
exhausted, a small neighbourhood around the insertion is re-spread (its tokens are relabelled,
which makes them dirty); only when the whole window is too dense does that neighbourhood grow
to the whole window (a full re-spread). Middle insertions therefore leave a layout that is not
a fresh open's: `spread_positions` of the row count is what a window is re-spread to when it is
at rest (IncrementalDocument.settle). Training samples ordered random subsets of the pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

NEW = -1  # marks a row that still needs a position


BUCKETS_PER_OCTAVE = 4  # capacity buckets per doubling: 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ...


def capacity_bucket(n: int) -> int:
    """The smallest capacity bucket holding n rows (at least 4): k * 2**j, k in [B, 2B) for
    B = BUCKETS_PER_OCTAVE (a power of two)."""
    if n <= 4:
        return 4
    j = max(0, (n - 1).bit_length() - BUCKETS_PER_OCTAVE.bit_length())  # then ceil(n / 2**j) <= 2B
    return -(-n // 2**j) * 2**j


def layout_stride(n: int, pool: int) -> int:
    """Pool positions between two neighbouring rows of the layout of n rows (at least 1).

    One less than an even division of the pool by the bucket: pools and buckets are round numbers,
    and a stride that is a multiple of the position embedding's fine period (`position_repeat`)
    would give every row the same fine position, a layout unlike the random subsets the model was
    trained on (single-token edits on it flipped more codes)."""
    if n > pool:
        raise ValueError(f"{n} rows do not fit a pool of {pool} positions")
    return max(1, (pool - 1) // min(capacity_bucket(n), pool))


def spread_positions(n: int, pool: int) -> torch.Tensor:
    """The layout of n rows (BOS included, at 0) that an open and a re-spread give: row i at
    i * layout_stride(n, pool), evenly spaced and leaving the rest of the bucket free for
    appends: (n,) long."""
    return torch.arange(n, dtype=torch.long) * layout_stride(n, pool)


def spread_array(n: int, pool: int) -> np.ndarray:
    """spread_positions as an int64 array (the host side of an update)."""
    return np.arange(n, dtype=np.int64) * layout_stride(n, pool)


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
    full_respreads: int  # how many times the whole window was re-spread (a crowded window, a bucket crossed)


def _spread_between(left: int, right: int, count: int) -> np.ndarray:
    """count integers strictly between left and right, as evenly spaced as possible."""
    t = np.arange(1, count + 1, dtype=np.int64)
    return left + t * (right - left) // (count + 1)


def _place_appends(pos: np.ndarray, pool: int) -> int:
    """Place a run of NEW rows at the end (in place) at the layout's stride, or re-spread every row
    to the layout when the stride changed or the run would pass the pool's end; returns the
    number of whole-window re-spreads (0 or 1)."""
    n = tail = len(pos)
    while tail > 1 and pos[tail - 1] == NEW:
        tail -= 1
    if tail == n:
        return 0
    stride = layout_stride(n, pool)
    known = int(np.count_nonzero(pos != NEW))
    end = pos[tail - 1] + stride * (n - tail)
    if layout_stride(known, pool) == stride and end < pool:
        pos[tail:] = pos[tail - 1] + stride * np.arange(1, n - tail + 1, dtype=np.int64)
        return 0
    pos[:] = spread_array(n, pool)  # every row, new ones included, at the layout
    return 1


def _neighbourhood(pos: np.ndarray, i: int, j: int, pool: int, density: float) -> tuple[int, int, int, int]:
    """(lo, hi, left, right): rows [lo, hi) around the NEW run [i, j), doubled until the positions
    strictly between left = pos[lo - 1] and right (pos[hi], or the pool's end) hold them at most
    `density` full (or, for the whole window, at all)."""
    n, lo, hi = len(pos), i, j
    while True:
        grow = max(1, hi - lo)
        lo, hi = max(1, lo - grow), min(n, hi + grow)
        while hi < n and pos[hi] == NEW:
            hi += 1
        left, right = pos[lo - 1], (pos[hi] if hi < n else pool)
        whole = lo == 1 and hi == n
        if right - left - 1 >= (hi - lo) / density or (whole and right - left - 1 >= hi - lo):
            return lo, hi, left, right
        if whole:
            raise ValueError(f"{n} rows do not fit a pool of {pool} positions")


def assign_positions(positions: np.ndarray, pool: int, density: float = 0.5) -> Assignment:
    """Give every NEW row a position between its neighbours, relabelling locally when needed.

    `positions` is in row order; row 0 (BOS) is fixed at 0 and every other known position is
    strictly increasing. A run of k NEW rows fits when its gap holds k free integers; otherwise
    the neighbourhood [lo, hi) around it doubles until its share of the pool has at most
    `density` occupancy, and its rows are spread evenly there.

    A run of NEW rows at the end (appends) continues at the layout's stride after the last
    known row, as `spread_positions` would place them; when that stride changed (the rows
    crossed into another capacity bucket) or the run would pass the pool's end, the whole window
    is re-spread to `spread_positions`. So a window opened with that layout and grown only by
    appends keeps exactly the layout a fresh open of its rows gives.
    """
    pos = np.array(positions, dtype=np.int64)
    old = pos.copy()
    n = len(pos)
    if n > pool:
        raise ValueError(f"{n} rows do not fit a pool of {pool} positions")
    full = _place_appends(pos, pool)
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
        lo, hi, left, right = _neighbourhood(pos, i, j, pool, density)
        full += int(lo == 1 and hi == n)
        pos[lo:hi] = _spread_between(left, right, hi - lo)
        i = hi
    moved = np.nonzero((old != NEW) & (old != pos))[0]
    return Assignment(positions=pos, relabelled=moved, full_respreads=full)
