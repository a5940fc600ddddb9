"""Exact sizes: which affected rows go on to the next layer, read on the host (once or twice a layer).

A row goes on when one of its codes changed. A dense pass picks each VQ head's code by argmin over
its codes; for the rows an edit only moved (hundreds per edit) the engine needs less: whether that
argmin is still the row's old code, and whether a second code came close enough to tie.
  - The old code is still the argmin when its distance is the smallest and no other code is within
    the tie guard: a gather and an amin.
  - A head that kept its code is a near-tie when the smallest distance among its other codes (the
    old one set to infinity, another amin) is within the guard.
On a CPU, an argmin with indices costs about ten times an amin over the same distances, and a
comparison that writes a flag per code several times an add: here both run only on the few rows
that go on. A head whose best code moved off the old one sends its row on anyway; whether that
row is a near-tie is counted exactly on those rows alone (a second read). Near-ties are
recomputed in full, as a dense pass computes them, and go on if their code changed. On a GPU an
argmin is one kernel and every read a stall, so there every row is checked by argmin and a tie
count, with one read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import rows as kernels
from .full_rows import full_sums_of
from .plan import EditPlan, PassState, to_device, to_host

if TYPE_CHECKING:
    from .state import WindowState

# devices whose check reads the old codes' distances (an argmin with indices is a slow reduction
# there); elsewhere one argmin kernel over every row costs less than more launches and reads
OLD_CODE_CHECK_DEVICES = ("cpu",)


@dataclass
class CheckedCodes:
    """What step 5 found (local rows of A), with exact sizes after moves."""

    codes: torch.Tensor  # (a, h) every affected row's code: the old one where it did not change
    next_rows: torch.Tensor  # the dirty rows, then those whose code flipped, in order
    tie_rows: torch.Tensor | None  # near-ties recomputed in full here
    host_sets: list[np.ndarray]  # on the host: dirty, recomputed in full, next


def check_moved_rows(
    state: WindowState, plan: EditPlan, run: PassState, l: int, proj: torch.Tensor, bounds: torch.Tensor
) -> CheckedCodes:
    """Step 5 with exact sizes, after moves, for the affected rows' projections (a, h, K) and
    bounds (a, h): the next rows, the near-ties recomputed in full, and the codes of the rows that
    go on. On a CPU as the module's docstring says; elsewhere by one argmin and one tie count over
    every row (a kernel each, and one read per layer)."""
    old = state.layer_views[l].codes.index_select(0, plan.affected)  # (a, h): the old codes, a copy
    dirty = run.host_dirty
    by_old_codes = proj.device.type in OLD_CODE_CHECK_DEVICES
    codes, flipped, ties = (_by_old_codes if by_old_codes else _by_argmin)(state, l, proj, bounds, old, dirty)
    tie_rows = None
    if len(ties):
        tie_rows = to_device(ties, codes)
        fresh, tie_flips = recompute_codes(state, plan, l, tie_rows)
        codes.index_put_((tie_rows,), fresh)
        flipped = np.union1d(np.setdiff1d(flipped, ties, assume_unique=True), ties[to_host(tie_flips)])
    next_rows = np.concatenate([dirty, flipped])
    run.host_dirty = next_rows
    return CheckedCodes(codes, to_device(next_rows, codes), tie_rows, [dirty, np.concatenate([dirty, ties]), next_rows])


Found = tuple[torch.Tensor, np.ndarray, np.ndarray]  # every affected row's code, flipped rows, near-ties


def _by_old_codes(
    state: WindowState, l: int, proj: torch.Tensor, bounds: torch.Tensor, old: torch.Tensor, dirty: np.ndarray
) -> Found:
    """The CPU's check: flags from the old codes' distances, then argmin and the exact tie count on
    the rows that go on alone. `old` becomes the codes."""
    flags = to_host(_moved_off_and_tied(state, l, proj, bounds, old))  # (2, a): one read
    flags[:, dirty] = False  # the dirty rows (distinct) are listed first, and recomputed in full already
    flipped, ties = np.flatnonzero(flags[0]), np.flatnonzero(flags[1])
    on = np.concatenate([dirty, flipped])
    if len(on):  # the rows that go on: their codes by argmin, as a dense pass; flipped ones' ties counted
        rows = to_device(on, old)
        distances = kernels.code_distances(state.consts, l, proj.index_select(0, rows))
        old.index_put_((rows,), distances.argmin(-1))
        if len(flipped):
            guard = bounds.index_select(0, rows[len(dirty) :])
            ties = np.union1d(ties, flipped[_tied(state, l, guard, distances[len(dirty) :])])
    return old, flipped, ties


def _by_argmin(
    state: WindowState, l: int, proj: torch.Tensor, bounds: torch.Tensor, old: torch.Tensor, dirty: np.ndarray
) -> Found:
    """The check of every row at once: argmin (the first of equal minima) and the tie count."""
    distances = kernels.code_distances(state.consts, l, proj)
    best, codes = distances.min(-1)
    tie_term = state.tie_code_term[l]
    counts = kernels.near_ties(state.cfg, state.tie_rel, tie_term, bounds, distances, best, None, counts=True)
    flags = to_host(torch.stack([(codes != old).sum(-1), counts]))  # one read
    flags[:, dirty] = 0
    return codes, np.flatnonzero(flags[0]), np.flatnonzero(flags[1] > state.cfg.vq_heads)


def _moved_off_and_tied(
    state: WindowState, l: int, proj: torch.Tensor, bounds: torch.Tensor, old: torch.Tensor
) -> torch.Tensor:
    """Per row (bool (2, a)): whether the old code of some VQ head is no longer the smallest
    distance, and whether some head is a near-tie: its second-best code within the tie guard. A
    head that kept its code knows its second best (the best of the others); for one that moved
    off, the old code bounds it from above, so a near-tie found there is one, and the rest of
    those rows are counted exactly once read (`_tied`)."""
    distances = kernels.code_distances(state.consts, l, proj)  # a fresh (a, h, K), spent below
    at = old.unsqueeze(-1)
    at_old = distances.gather(-1, at).squeeze(-1)
    best = distances.amin(-1)
    threshold = kernels.tie_threshold(state.tie_rel, state.tie_code_term[l], bounds, best)
    others = distances.scatter_(-1, at, math.inf).amin(-1)  # the best of the other codes
    second = others.maximum(at_old)  # kept: the second best; moved off: at least the second best
    return torch.stack([at_old > best, second < threshold]).any(-1)


def _tied(state: WindowState, l: int, bounds: torch.Tensor, distances: torch.Tensor) -> np.ndarray:
    """Which rows (distances (r, h, K), bounds (r, h)) have two codes of some head within the tie
    guard, counted over their codes as `kernels.near_ties` counts them (host flags)."""
    tie_term, best = state.tie_code_term[l], distances.amin(-1)
    counts = kernels.near_ties(state.cfg, state.tie_rel, tie_term, bounds, distances, best, None, counts=True)
    return to_host(counts) > state.cfg.vq_heads


def recompute_codes(
    state: WindowState, plan: EditPlan, l: int, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of A (local) recomputed in full over every key, their sums written to the state (near-
    ties: their codes then are what a dense pass picks); returns their codes (argmin) and whether
    each differs from the state's code (bool, on the device). The state's codes are left as they were."""
    view = state.layer_views[l]
    slots = plan.affected.index_select(0, rows)
    sums = full_sums_of(state, view, l, view.queries_by_head[:, slots], plan.affected_pos_col.index_select(0, rows))
    view.sums.index_put_((slots,), sums)
    fresh = kernels.code_distances(state.consts, l, state.per_vq_head(sums)).argmin(-1)
    return fresh, (fresh != view.codes.index_select(0, slots)).any(-1)
