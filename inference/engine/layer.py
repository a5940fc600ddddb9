"""The update of one layer of one window: the engine's algorithm, in steps over pure kernels.

Given the rows of A whose layer input changed (dirty rows), `update_layer` brings the layer's
q, k, v, sums and codes up to date for every affected row and returns the rows the next layer
must treat: the dirty rows and those whose code flipped. Steps:
  1. q|k|v of the dirty rows (one fused matmul); the old k|v of every changed key
  2. every affected query moved by the changed keys: the delta of gelu(q.k) v over them, mapped
     to code projections (linearity in v); the bound u widened by a bound of the move
  3. near-ties among the moved rows, when the dtype reserves room to recompute them here
  4. rows recomputed in full over every key: dirty rows, near-ties, a resumed pass's rows
  5. the next layer's rows: dirty rows and rows whose code flipped
  6. codes, output projection and FFN of the next layer's rows
one small function each, sharing a LayerWork record. A fixed handful of batched ops. Exact sizes
(policy.ExactSizing): the host reads the next rows at the end. Otherwise no host decision: padded
entries point at the trash row and carry zero weight, and every shape is a bucketed size known
before the pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import rows as kernels
from .code_check import check_moved_rows
from .full_rows import full_sums_of
from .plan import EditPlan, LayerRecord, PassState, SavedSets, to_device, to_host
from .policy import Room

if TYPE_CHECKING:
    from .state import LayerView, WindowState


@dataclass
class LayerWork:
    """What the steps of one layer's update share as they go (rows: local indices into A)."""

    l: int
    view: LayerView
    room: Room
    dirty: torch.Tensor  # rows whose layer input changed
    n_deleted: int  # deleted rows whose old keys are among the changed keys
    resumed: bool  # a resumed pass: the first wrote every touched row's new keys at every layer
    carried: bool  # the dirty rows' inputs and slots came from the previous layer's finish
    dirty_slots: torch.Tensor | None = None  # A[dirty]
    dirty_input: torch.Tensor | None = None  # their layer input
    new_qkv: torch.Tensor | None = None  # their new q|k|v (step 1)
    whole: bool = False  # every affected row recomputed in full instead of moved (exact sizes)
    clean: torch.Tensor | None = None  # padded: rows not recomputed in full, where near-ties are looked for
    sums: torch.Tensor | None = None  # the affected rows' sums rows, brought up to date
    proj: torch.Tensor | None = None  # their code projections per VQ head (a, h, K) (a view of sums)
    bounds: torch.Tensor | None = None  # their bounds u (a, h) (a view of sums)
    tied: torch.Tensor | None = None  # near-tie flags (padded sizes; exact sizes: code_check finds them)
    tie_rows: torch.Tensor | None = None  # near-ties recomputed in full in this layer
    full_rows: torch.Tensor | None = None  # every row recomputed in full
    codes: torch.Tensor | None = None  # the affected rows' codes
    goes_next: torch.Tensor | None = None  # flags of the rows that go on
    next_rows: torch.Tensor | None = None  # the next layer's rows
    host_sets: list | None = None  # exact sizes: (dirty, recomputed in full, next) rows on the host
    key_slots: int | None = None  # exact sizes: the first slots hold every key the dirty rows see

    @property
    def n_dirty(self) -> int:
        return self.dirty.shape[0]

    @property
    def n_keys(self) -> int:
        """Changed keys: new and old keys of the dirty rows, old keys of deleted rows."""
        return 2 * self.n_dirty + self.n_deleted


def update_layer(
    state: WindowState,
    plan: EditPlan,
    run: PassState,
    l: int,
    dirty: torch.Tensor,
    room: Room,
    with_deleted: bool,
    extra_full: torch.Tensor | None = None,
    extra_next: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bring layer l up to date for the dirty rows A[dirty] (local indices into A); returns the next
    layer's rows (local). extra_full / extra_next: a resumed pass's rows to recompute in full / to
    send on (local). The steps of the module's docstring, in order."""
    work = _start(state, plan, run, l, dirty, room, with_deleted)
    _dirty_qkv(state, work)  # 1
    _move_affected_rows(state, plan, work)  # 2
    _near_ties_in_place(state, plan, work)  # 3
    _recompute_in_full(state, plan, work, extra_full)  # 4
    _next_rows(state, plan, run, work, extra_next)  # 5
    inputs = _finish_next_rows(state, plan, run, work)  # 6
    _record(state, plan, run, work, inputs, with_deleted)
    return work.next_rows


def _start(
    state: WindowState, plan: EditPlan, run: PassState, l: int, dirty: torch.Tensor, room: Room, with_deleted: bool
) -> LayerWork:
    """The layer's work record: where the dirty rows are (carried over from the previous layer's
    finish, the edited rows at layer 0, else looked up in A)."""
    carried = run.carry if dirty.shape[0] else None  # the previous layer's next rows and their outputs
    run.carry = None
    work = LayerWork(
        l=l,
        view=state.layer_views[l],
        room=room,
        dirty=dirty,
        n_deleted=plan.deleted.shape[0] if with_deleted else 0,
        resumed=not with_deleted,
        carried=carried is not None,
    )
    if work.n_dirty:
        if plan.sizing.reads_each_layer:
            work.key_slots = plan.host.key_slots(run.host_dirty)
        if carried is not None:
            work.dirty_slots, work.dirty_input = carried
        else:
            work.dirty_slots = (
                plan.edited_slots if plan.edited_slots is not None else plan.affected.index_select(0, dirty)
            )
    # near-ties are looked for among rows not recomputed in full (exact sizes: the host drops those)
    if not plan.sizing.reads_each_layer:
        work.clean = plan.valid_rows.index_fill(0, dirty, False) if work.n_dirty else plan.valid_rows
    return work


def _dirty_qkv(state: WindowState, work: LayerWork) -> None:
    """Step 1: q|k|v of the dirty rows (r, 3d), LN1 then one fused matmul (written to the state in
    step 2); q carries hd^-0.5."""
    if not work.n_dirty:
        return
    cfg, consts, l = state.cfg, state.consts, work.l
    if work.dirty_input is None:
        work.dirty_input = state.layer_input(l, work.dirty_slots)
    bias, weight = consts.qkv_bias[l], consts.qkv_weight[l]
    normed = state.net.layers[l].self_attn_layer_norm(work.dirty_input)
    qkv = torch.addmm(bias, normed, weight) if bias is not None else normed @ weight
    if not consts.q_scaled:
        qkv[:, : cfg.hidden_size] *= cfg.head_dim**-0.5
    work.new_qkv = qkv


def _move_affected_rows(state: WindowState, plan: EditPlan, work: LayerWork) -> None:
    """Step 2: every affected row moved by the changed keys. Exact sizes: when moving every
    affected row, then recomputing the dirty ones over all S slots, costs more than recomputing
    all of them (a large revision), they are all recomputed instead ("whole")."""
    view, affected = work.view, plan.affected
    length, slots, n_keys = affected.shape[0], view.keys_by_head.shape[-1], work.n_keys
    work.whole = bool(
        plan.sizing.reads_each_layer and n_keys and length * n_keys + work.n_dirty * slots >= length * slots
    )
    if work.whole:
        if work.n_dirty:
            view.write_qkv_rows(work.dirty_slots, work.new_qkv)
        work.sums = full_sums_of(state, view, work.l, view.queries_by_head[:, affected], plan.affected_pos_col)
    else:
        work.sums = view.sums.index_select(0, affected)
    if state.cfg.vq:
        work.proj, work.bounds = state.split_sums(work.sums)  # (a, h, K), u (a, h)
    if n_keys and not work.whole:
        _move_by_changed_keys(
            state,
            plan,
            view,
            work.l,
            (plan.resumed_keys() if work.resumed else plan.key_dirty).index_select(2, work.dirty),
            work.dirty_slots,
            work.new_qkv,
            work.n_deleted,
            work.sums,
            work.bounds,
        )


def _near_ties_in_place(state: WindowState, plan: EditPlan, work: LayerWork) -> None:
    """Step 3: near-ties among the moved rows, when this dtype reserves room to recompute them here."""
    cfg = state.cfg
    if not (cfg.vq and work.n_keys and work.room.ties):
        return
    distances = kernels.code_distances(state.consts, work.l, work.proj)
    work.tied = kernels.near_ties(
        cfg, state.tie_rel, state.tie_code_term[work.l], work.bounds, distances, distances.amin(-1), work.clean
    )
    top, where = torch.topk(work.tied.to(work.sums.dtype), work.room.ties)
    work.tie_rows = torch.where(top > 0, where, plan.pad_index_t)


def _recompute_in_full(state: WindowState, plan: EditPlan, work: LayerWork, extra_full: torch.Tensor | None) -> None:
    """Step 4: rows recomputed in full over every key (dirty rows, near-ties, a resumed pass's
    rows), then the affected rows' sums written back."""
    view, dirty = work.view, work.dirty
    parts = [p for p in (dirty if work.n_dirty else None, work.tie_rows, extra_full) if p is not None]
    if parts and not work.whole:
        full_rows = work.full_rows = torch.cat(parts) if len(parts) > 1 else parts[0]
        # (H, r, hd): the dirty rows' slots as they are, other rows' looked up in A
        rows = work.dirty_slots if full_rows is dirty else plan.affected.index_select(0, full_rows)
        pos = plan.affected_pos_col.index_select(0, full_rows)
        fresh = full_sums_of(
            state, view, work.l, view.queries_by_head[:, rows], pos, work.key_slots if full_rows is dirty else None
        )
        work.sums.index_put_((full_rows,), fresh)
    view.sums.index_put_((plan.affected,), work.sums)


def _next_rows(
    state: WindowState, plan: EditPlan, run: PassState, work: LayerWork, extra_next: torch.Tensor | None
) -> None:
    """Step 5: the next layer's rows, the dirty rows and those whose code flipped. Exact sizes: read
    on the host (after moves: code_check, which also finds the near-ties the moves left). Padded:
    compacted without a sync into the room reserved for them; a larger set overflows into a
    further pass."""
    cfg, exact, n_keys = state.cfg, plan.sizing.reads_each_layer, work.n_keys
    if exact and cfg.vq and n_keys and not work.whole:  # moved rows: their codes checked, not argmin'd
        checked = check_moved_rows(state, plan, run, work.l, work.proj, work.bounds)
        work.codes, work.next_rows, work.host_sets = checked.codes, checked.next_rows, checked.host_sets
        ties = checked.tie_rows
        if ties is not None:
            work.full_rows = ties if work.full_rows is None else torch.cat([work.full_rows, ties])
        return
    if cfg.vq:
        distances = kernels.code_distances(state.consts, work.l, work.proj)
        best, work.codes = distances.min(-1)  # (a, h): the first of equal minima, as argmin
        if work.tied is None and n_keys and not work.whole:
            tie_term = state.tie_code_term[work.l]
            work.tied = kernels.near_ties(cfg, state.tie_rel, tie_term, work.bounds, distances, best, work.clean)
        flipped = work.codes != work.view.codes.index_select(0, plan.affected)
        goes_next = flipped.any(-1)
    else:
        goes_next = plan.valid_rows if n_keys else plan.no_rows
    if work.n_dirty and not exact:  # (exact sizes: the host adds them)
        goes_next = goes_next.index_fill(0, work.dirty, True)
    if extra_next is not None:
        goes_next = goes_next | extra_next
    work.goes_next = goes_next
    if exact:  # no rows moved (or all recomputed in full): no near-ties
        work.next_rows, work.host_sets = read_sets(run, goes_next)
    else:
        score = goes_next * plan.priority  # 0 outside A's real rows, 1 + 2^-20 for edited rows (first), 1 otherwise
        top, where = torch.topk(score, work.room.next)
        work.next_rows = torch.where(top > 0, where, plan.pad_index_t)
        run.counts += [work.tied.sum(dtype=score.dtype) if work.tied is not None else plan.zero, score.sum()]


def _record(
    state: WindowState, plan: EditPlan, run: PassState, work: LayerWork, inputs: int | None, with_deleted: bool
) -> None:
    """What the layer did, for the host's accounting, and (padded) what a resumed pass needs."""
    exact = plan.sizing.reads_each_layer
    if work.whole:  # every row of A recomputed in full, none moved
        work.host_sets[1] = np.arange(plan.affected.shape[0])
    full_rows = work.full_rows if work.full_rows is not None else work.dirty
    run.records.append(
        LayerRecord(
            tie_cap=work.room.ties if work.tied is not None else 0,
            next_cap=work.room.next,
            keys=0 if work.whole else work.n_keys,
            block=work.n_keys < state.consts.block_keys,
            whole=work.whole,
            with_deleted=with_deleted,
            inputs=inputs,
            dirty_inputs=bool(work.n_dirty) and not work.carried and state.outputs is None,
            sets=work.host_sets if exact else [work.dirty, full_rows, work.next_rows],
        )
    )
    if not exact:
        run.saved[work.l] = SavedSets(
            tied=work.tied if work.tied is not None else plan.no_rows,
            tie_rows=work.tie_rows if work.tie_rows is not None else plan.empty,
            goes_next=work.goes_next,
            next_rows=work.next_rows,
        )


def _move_by_changed_keys(
    state: WindowState,
    plan: EditPlan,
    view,
    l: int,
    dirty_keys: torch.Tensor,
    dirty_slots: torch.Tensor | None,
    new_qkv: torch.Tensor | None,
    n_deleted: int,
    sums: torch.Tensor,
    bounds: torch.Tensor | None,
) -> None:
    """Step 2: write the dirty rows' new q|k|v, and move the affected rows' sums (in place) by the
    changed keys: every affected query against every changed key (new and old keys of the dirty
    rows, old keys of deleted rows), all heads in one product. The same weights move the code
    projections (linearity in v), and u by a bound of each move's norm. `dirty_keys`: the dirty
    rows' columns of the plan's key table (2, 2, r), the first pass's or a resumed pass's."""
    cfg, consts = state.cfg, state.consts
    d, H = cfg.hidden_size, cfg.num_attention_heads
    affected, length = plan.affected, plan.affected.shape[0]
    n_keys = 2 * dirty_keys.shape[2] + n_deleted
    old_kv = view.qkv_rows(
        (torch.cat([dirty_slots, plan.deleted]) if n_deleted else dirty_slots)
        if dirty_slots is not None
        else plan.deleted
    )
    if dirty_slots is not None:
        view.write_qkv_rows(dirty_slots, new_qkv)
        changed_kv = torch.cat([new_qkv, old_kv])
        key_table = dirty_keys.flatten(1)  # new keys then old keys of the dirty rows
        if n_deleted:
            key_table = torch.cat([key_table, plan.key_deleted], 1)
    else:
        changed_kv, key_table = old_kv, plan.key_deleted
    key_sign, key_pos = key_table  # +-scale per new / old key (0 for padding), and key positions
    queries = view.queries_by_head.index_select(1, affected)  # (H, a, hd)
    keys = changed_kv.as_strided(
        (H, d // H, n_keys), (d // H, 1, changed_kv.stride(0)), changed_kv.storage_offset() + d
    )  # (H, hd, m)
    weights = torch.bmm(queries, keys)  # (H, a, m), then weighted in place: a fresh temporary per op
    kernels.gelu_(weights).mul_((key_pos <= plan.affected_pos_col) * key_sign)  # page faults on a CPU
    values = changed_kv.narrow(1, 2 * d, d)  # (m, d)
    if n_keys < consts.block_keys:  # few keys: each key's v per head, mapped to sums layout
        values_per_head = (values * consts.head_mask).view(H * n_keys, d)  # zeros outside the head
        flat_weights = weights.transpose(0, 1).reshape(length, H * n_keys)
        sums.addmm_(flat_weights, torch.mm(values_per_head, consts.sum_map[l]))  # (H m, C) in sums layout
        if cfg.vq:
            kernels.widen_bounds(cfg, bounds, flat_weights, values_per_head, state.tie_growth)
    else:  # many keys: move s per head, then map the moves to sums layout (K d per row)
        moves = torch.bmm(weights, values.view(n_keys, H, -1).transpose(0, 1)).transpose(0, 1).reshape(length, d)
        sums.addmm_(moves, consts.sum_map[l])
        if cfg.vq:
            bounds.mul_(1.0 + state.tie_growth).add_(kernels.head_norms(cfg, moves))


def _finish_next_rows(state: WindowState, plan: EditPlan, run: PassState, work: LayerWork) -> int | None:
    """Step 6: codes, output projection and FFN of the next layer's rows (and of the riders, in the
    same batched finish); returns how many rows' inputs were recomputed from codes (None: all).
    Their input: kept (full layout), or the dirty rows' from step 1 and the others' (their code
    flipped) recomputed from their codes. Exact sizes list the dirty rows first; padded sets are
    in no known order, so every input is recomputed."""
    cfg, consts, view, l = state.cfg, state.consts, work.view, work.l
    next_rows, n_dirty, dirty_input = work.next_rows, work.n_dirty, work.dirty_input
    next_slots = plan.affected.index_select(0, next_rows)
    exact, codes, sums = plan.sizing.reads_each_layer, work.codes, work.sums
    riders = run.riders.slots if run.riders is not None else None
    if cfg.vq:
        codes = codes.index_select(0, next_rows)
        view.codes.index_put_((next_slots,), codes)
        z = state.code_vectors(l, codes if riders is None else torch.cat([codes, view.codes.index_select(0, riders)]))
    else:
        z = sums.index_select(0, next_rows)
    kept = state.outputs is not None
    if exact and not kept:
        inputs = len(next_rows) - n_dirty  # rows whose input is recomputed
        x_in = dirty_input if n_dirty and not inputs else state.layer_input(l, next_slots[n_dirty:])
        x_in = torch.cat([dirty_input, x_in]) if n_dirty and inputs else x_in
    else:
        inputs = 0 if kept or not l else None  # None: every next row
        x_in = state.layer_input(l, next_slots)
    if riders is not None:  # the riders' layer outputs, from their codes, in the same batched finish
        x_in = torch.cat([x_in, run.riders.outputs if l else state.layer_input(0, riders)])
    out = kernels.finish_rows(consts, l, state.net.layers[l].final_layer_norm, x_in, z)
    if riders is not None:
        out, run.riders.outputs = out[: len(next_rows)], out[len(next_rows) :]
    if kept:
        view.outputs.index_put_((next_slots,), out)
    run.carry = (next_slots, out)
    return inputs


def read_sets(run: PassState, goes_next: torch.Tensor) -> tuple[torch.Tensor, list[np.ndarray]]:
    """Exact sizes, when no row was moved (the layer saw no changed key, or recomputed every row in
    full): the host reads which rows go on (the dirty rows first, then the others in order).
    Returns them and the layer's row sets on the host: dirty, recomputed in full, next."""
    flags = to_host(goes_next)
    dirty = run.host_dirty
    flags[dirty] = 0  # the dirty rows (distinct) are listed first
    next_rows = np.concatenate([dirty, np.flatnonzero(flags)])
    run.host_dirty = next_rows
    return to_device(next_rows, goes_next), [dirty, dirty, next_rows]
