"""The update of a window: one revision, its passes layer after layer, overflow resumption and
near-tie fixes.

`apply` is a revision (rebuilt by a dense pass, dense.build, if anything fails half-way);
`settle` a revision that re-spreads the rows to an open's layout. An update plans on the host
(plan.py), then runs a pass over layers 0..L-1 (layer.update_layer for each), then refreshes
the heads of the rows whose output changed. Exact sizes (CPU) read each layer's next rows on the
host, so one pass always completes. Padded sizes (GPU) reserve each layer's rows in advance
(policy.Room) and read everything once at the end; a layer that found more flipped rows or
near-ties than it had room for leaves the state self-consistent (each layer's q, k, v, sums and
codes match the inputs it was given) and a further pass from that layer propagates what was left
out, exactly like an edit of those rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..costs import Cost, finish_row_macs
from ..edits import Splice
from ..pass_costs import account_pass
from ..positions import spread_array
from . import dense
from . import layer as layer_update
from .code_check import recompute_codes
from .graphs import PassGraphs
from .heads import update_heads
from .plan import EditPlan, PassState, Riders, plan_edit, reorder, stale_predecessors
from .policy import Room, bucket, growth, tie_rows

if TYPE_CHECKING:
    from .state import WindowState

Finals = list[tuple[np.ndarray, torch.Tensor]]  # (slots, outputs) of each pass's last layer, for the heads


def apply(state: WindowState, splices: Sequence[Splice], layout: np.ndarray | None = None) -> Cost:
    """Apply validated, sorted, non-overlapping splices (window-local token offsets) as one revision.
    `layout`: every row's position afterwards (a re-spread), else they are assigned (positions.py)."""
    t0 = time.perf_counter()
    before = (state.ids_host[state.order].copy(), state.pos_host[state.order].copy())
    try:
        with torch.no_grad():
            cost = apply_update(state, splices, layout)
    except BaseException:
        dense.build(state, *before)  # never leave a half-updated state behind
        raise
    finally:
        state.revision += 1
    if state.key_pos.is_cuda:
        torch.cuda.synchronize()
    cost.seconds = time.perf_counter() - t0
    return cost


def at_rest(state: WindowState) -> bool:
    """Whether the rows sit where an open of the same tokens puts them (positions.spread_positions)."""
    return bool(np.array_equal(state.pos_host[state.rows()], spread_array(len(state.order), state.cfg.position_pool)))


def settle(state: WindowState) -> Cost:
    """Re-spread the rows to an open's layout, as an update that relabels the rows that moved
    (every row from the first moved one on is recomputed; the rows before it keep their state)."""
    return apply(state, [], spread_array(len(state.order), state.cfg.position_pool))


def apply_update(state: WindowState, splices: Sequence[Splice], layout: np.ndarray | None = None) -> Cost:
    """Host bookkeeping (order, positions, the affected rows A), then the batched layer passes.
    `layout`: the positions of every row after the update (see plan_edit)."""
    edit = reorder(state, splices)
    cost, plan = plan_edit(state, edit, layout)
    if plan is None:
        return cost
    finals: Finals = []
    # rows whose last-layer output the heads need although it may not change: the predecessors
    # of tokens with a new predecessor or id (their surprise). They ride along the first pass.
    riders = stale_predecessors(
        state, np.asarray(edit.old_order, dtype=np.int64), np.asarray(edit.inserted + edit.changed, dtype=np.int64)
    )
    a = plan.host.n_affected
    rode = None
    if len(riders) and a and state.outputs is None:
        rode = Riders(torch.from_numpy(riders).to(state.key_pos.device))
    if a:  # (none: only the last rows were deleted, and no row sees a changed key)
        cfg = state.cfg
        rooms = plan.sizing.first_pass(
            cfg.num_hidden_layers,
            cfg.vq,
            state.tie_rel,
            state.key_pos.device.type,
            max(1, plan.host.n_edited),
            plan.last_affected,
        )
        run_pass(state, plan, 0, plan.edited_rows, rooms, cost, True, {}, finals, rode)
    update_heads(state, finals, riders, rode.outputs if rode is not None else None, cost)
    state.free += edit.deleted
    state.update_total()
    return cost


def run_pass(
    state: WindowState,
    plan: EditPlan,
    first: int,
    dirty: torch.Tensor,
    rooms: list[Room],
    cost: Cost,
    with_deleted: bool,
    extras: dict[int, tuple],
    finals: Finals,
    riders: Riders | None = None,
) -> None:
    """Layers first..L-1 of an update, layer l with room rooms[l - first]. Exact sizes: each layer
    reads its next set on the host. Padded: fixed room and one host sync at the end, then a
    resumed pass on overflow. `riders` ride the first pass only. Graphed sizing: a first pass is
    replayed from a capture of its shape (graphs.PassGraphs) where one exists."""
    cfg = state.cfg
    layers = cfg.num_hidden_layers
    exact = plan.sizing.reads_each_layer
    if plan.sizing.captures and first == 0 and not extras:
        if state.graphs is None:
            state.graphs = PassGraphs(state.key_pos.device)
        run = state.graphs.run(
            plan, rooms, riders, lambda p, r: layer_pass(state, p, 0, p.edited_rows, rooms, True, {}, r)
        )
    else:
        run = layer_pass(state, plan, first, dirty, rooms, with_deleted, extras, riders)
    if riders is not None:  # they rode this pass (the first) through every layer
        cost.incremental_macs += len(riders.slots) * layers * finish_row_macs(cfg)
    if exact:  # the host read every set already
        sets = [rec.sets for rec in run.records]
        _account(state, plan, run, sets, cost)
        finals.append((plan.host.affected[sets[-1][2]], run.carry[1]))  # the last layer's rows and outputs
        return
    # padded: the counts and every row set in one read, for overflow and the host's exact accounting
    parts = [torch.stack(run.counts)] + [t for rec in run.records for t in rec.sets]
    flat = torch.cat(parts).tolist()
    at = len(run.counts)
    counts = flat[:at]
    sets = []
    for rec in run.records:
        got = []
        for t in rec.sets:
            got.append(np.asarray(flat[at : at + t.numel()], dtype=np.int64))
            at += t.numel()
        sets.append(got)
    overflow = None
    for i, rec in enumerate(run.records):
        rec.n_tied, rec.n_next = int(counts[2 * i]), int(counts[2 * i + 1])
        if overflow is None and (rec.n_next > rec.next_cap or rec.n_tied > rec.tie_cap):
            overflow = i
    _account(state, plan, run, sets, cost)
    finals.append((plan.host.affected[sets[-1][2]], run.carry[1]))
    if overflow is not None:
        resume(state, plan, run, first + overflow, cost, finals)


def layer_pass(
    state: WindowState,
    plan: EditPlan,
    first: int,
    dirty: torch.Tensor,
    rooms: list[Room],
    with_deleted: bool,
    extras: dict[int, tuple],
    riders: Riders | None,
) -> PassState:
    """The device work of a pass, layers first..L-1 (padded sizes: no host read; a function of the
    plan's shapes, which is what lets graphed sizing capture it)."""
    exact = plan.sizing.reads_each_layer
    run = PassState(first=first, host_dirty=plan.host.edited_rows if exact else None, riders=riders)
    for l in range(first, state.cfg.num_hidden_layers):
        extra_full, extra_next = extras.get(l, (None, None))
        dirty = layer_update.update_layer(
            state, plan, run, l, dirty, rooms[l - first], with_deleted, extra_full, extra_next
        )
    return run


def _account(state: WindowState, plan: EditPlan, run: PassState, sets: list, cost: Cost) -> None:
    account_pass(
        state.cfg, state.consts.segments, state.pos_host, plan.host, plan.pad_index, run.records, sets, run.first, cost
    )


def resume(state: WindowState, plan: EditPlan, run: PassState, first: int, cost: Cost, finals: Finals) -> None:
    """Propagate what a pass left out from layer `first` on: near-ties it had no room to check
    and rows cut from a next set.

    Sizes are known from the pass's sync. Near-ties alone are recomputed on their own (they
    rarely change a code); only rows whose output changed start a further pass, from the
    layer where they are, with room for all the leftovers there (later layers may overflow
    again and resume again, each time from a later layer, so it ends)."""
    layers, pad = state.cfg.num_hidden_layers, plan.pad_index
    full = plan.last_affected + 1
    left = {}  # layer -> [unchecked near-ties (local) or None, dropped rows (mask) or None, counts of both]
    for i, rec in enumerate(run.records):
        l = run.first + i
        saved = run.saved[l]
        n_unchecked, n_dropped = max(0, rec.n_tied - rec.tie_cap), max(0, rec.n_next - rec.next_cap)
        unchecked = dropped = None
        if n_unchecked:
            untreated = saved.tied.index_fill(0, saved.tie_rows, False)
            top, where = torch.topk(untreated.to(plan.valid.dtype), min(full, bucket(n_unchecked)))
            unchecked = torch.where(top > 0, where, pad)
        if n_dropped:
            dropped = saved.goes_next.index_fill(0, saved.next_rows, False)
        left[l] = [unchecked, dropped, n_unchecked, n_dropped]
    start = first
    while start < layers:
        unchecked, dropped, n_unchecked, n_dropped = left[start]
        if n_dropped == 0 and n_unchecked:  # near-ties only: fix them alone, go on only if a code changed
            changed = fix_ties(state, plan, start, unchecked, cost)
            left[start] = [None, changed, 0, n_unchecked if changed is not None else 0]
            if changed is None:
                start += 1
                continue
        if left[start][3] or left[start][2]:
            break
        start += 1
    if start >= layers:
        return
    extras, rooms = {}, []
    ties = min(tie_rows(state.tie_rel), full)
    c = 0
    for l in range(start, layers):  # room for every leftover, and the growth of a pass beyond
        unchecked, dropped, n_unchecked, n_dropped = left[l]
        extras[l] = (unchecked, dropped)
        c = min(full, bucket(max(math.ceil(c * growth(state.key_pos.device.type)[0]), c + n_dropped + n_unchecked, 1)))
        rooms.append(Room(0 if l == start else ties, c))
    run_pass(state, plan, start, plan.empty, rooms, cost, False, extras, finals)


def fix_ties(state: WindowState, plan: EditPlan, l: int, unchecked: torch.Tensor, cost: Cost) -> torch.Tensor | None:
    """Recompute near-ties a pass had no room for at layer l, alone (no affected-row work);
    returns the local mask of those whose code changed (their output must be propagated)."""
    cfg, view = state.cfg, state.layer_views[l]
    codes, changed = recompute_codes(state, plan, l, unchecked)
    changed &= plan.valid_rows.index_select(0, unchecked)
    slots = plan.affected.index_select(0, unchecked)
    view.codes.index_put_((slots,), codes)
    flat = torch.cat([changed.sum().view(1), unchecked]).tolist()  # the rare overflow path: one more sync
    host = plan.host
    real = np.asarray(flat[1:], dtype=np.int64)
    fixed = host.affected[real[real != plan.pad_index]]
    cost.near_ties += len(fixed)
    pairs = int(np.searchsorted(state.pos_host[host.order], state.pos_host[fixed], side="right").sum())
    cost.incremental_macs += pairs * 2 * cfg.hidden_size + len(fixed) * cfg.vq_codes * cfg.hidden_size
    return plan.no_rows.index_put((unchecked,), changed) if int(flat[0]) else None
