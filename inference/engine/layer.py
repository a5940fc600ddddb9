"""The update of one layer of one window: the engine's algorithm, as one function over pure kernels.

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
A fixed handful of batched ops. Exact sizes (policy.ExactSizing): the host reads the next rows at the
end. Otherwise no host decision: padded entries point at the trash row and carry zero weight, and
every shape is a bucketed size known before the pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from . import rows as kernels
from .plan import EditPlan, LayerRecord, PassState, SavedSets
from .policy import Room

if TYPE_CHECKING:
    from .state import WindowState


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
    send on (local)."""
    cfg, consts = state.cfg, state.consts
    affected = plan.affected
    length = affected.shape[0]
    view = state.layer_views[l]
    n_dirty = dirty.shape[0]
    n_deleted = plan.deleted.shape[0] if with_deleted else 0
    n_keys = 2 * n_dirty + n_deleted  # new and old keys of the dirty rows, old keys of deleted rows
    exact = plan.sizing.reads_each_layer
    tie_cap, next_cap = room.ties, room.next
    carried = run.carry if n_dirty else None  # the previous layer's next rows and their outputs
    run.carry = None
    if n_dirty:
        dirty_slots = (
            carried[0]
            if carried is not None
            else plan.edited_slots
            if plan.edited_slots is not None
            else affected.index_select(0, dirty)
        )
    # near-ties are looked for among rows not recomputed in full (exact sizes: the host drops those)
    clean = None if exact else plan.valid_rows.index_fill(0, dirty, False) if n_dirty else plan.valid_rows

    # 1. q|k|v of the dirty rows: one fused matmul (written to the state in step 2, or here for a whole layer)
    if n_dirty:
        dirty_input = carried[1] if carried is not None else state.layer_input(l, dirty_slots)
        new_qkv = _qkv_rows(state, l, dirty_input)
    # exact sizes: moving every affected row by the changed keys, then recomputing the dirty ones
    # over all S slots, costs more than recomputing all of them (a large revision): do that
    slots = view.keys_by_head.shape[-1]
    whole = bool(exact and n_keys and length * n_keys + n_dirty * slots >= length * slots)
    if whole:
        if n_dirty:
            view.qkv.index_put_((dirty_slots,), new_qkv)
        sums = _full_sums(state, view, l, view.queries_by_head[:, affected], plan.affected_pos_col)
    else:
        sums = view.sums.index_select(0, affected)
    proj, bounds = state.split_sums(sums) if cfg.vq else (None, None)  # (a, h, K), u (a, h)
    if n_keys and not whole:  # 2. every affected row moved by the changed keys
        _move_by_changed_keys(
            state,
            plan,
            view,
            l,
            dirty,
            dirty_slots if n_dirty else None,
            new_qkv if n_dirty else None,
            n_deleted,
            sums,
            bounds,
        )

    # 3. near-ties among the moved rows, when this dtype reserves room to recompute them here
    tied, tie_rows = None, None
    if cfg.vq and n_keys and tie_cap:
        distances = kernels.code_distances(consts, l, proj)
        tied = kernels.near_ties(
            cfg, state.tie_rel, state.tie_code_term[l], bounds, distances, distances.amin(-1), clean
        )
        top, where = torch.topk(tied.to(sums.dtype), tie_cap)
        tie_rows = torch.where(top > 0, where, plan.pad_index_t)

    # 4. rows recomputed in full over every key: dirty rows, near-ties, a resumed pass's rows
    parts = [p for p in (dirty if n_dirty else None, tie_rows, extra_full) if p is not None]
    full_rows = (torch.cat(parts) if len(parts) > 1 else parts[0]) if parts and not whole else None
    if full_rows is not None:
        # (H, r, hd) (index_select along dim 1 would copy all of q)
        queries = view.queries_by_head[:, dirty_slots if full_rows is dirty else affected.index_select(0, full_rows)]
        sums.index_put_(
            (full_rows,), _full_sums(state, view, l, queries, plan.affected_pos_col.index_select(0, full_rows))
        )
    view.sums.index_put_((affected,), sums)

    # 5. next layer's rows: dirty rows and rows whose code flipped
    codes = None
    host_sets = None
    if cfg.vq:
        distances = kernels.code_distances(consts, l, proj)
        best, codes = distances.min(-1)  # (a, h): the first of equal minima, as argmin
        if tied is None and n_keys and not whole:  # (exact sizes: counts, compared on the host)
            tied = kernels.near_ties(
                cfg, state.tie_rel, state.tie_code_term[l], bounds, distances, best, clean, counts=exact
            )
        flipped = codes != view.codes.index_select(0, affected)
        goes_next = flipped.sum(-1) if exact else flipped.any(-1)  # exact sizes: how many, read with the ties
    else:
        goes_next = plan.valid_rows if n_keys else plan.no_rows
    if n_dirty and not exact:  # (exact sizes: the host adds them)
        goes_next = goes_next.index_fill(0, dirty, True)
    if extra_next is not None:
        goes_next = goes_next | extra_next
    if exact:  # exact sizes: read the set (and the near-ties the moves left) on the host
        next_rows, tie_rows, host_sets = read_sets(state, plan, run, l, goes_next, tied, codes)
        if tie_rows is not None:
            full_rows = tie_rows if full_rows is None else torch.cat([full_rows, tie_rows])
    else:  # padded: compacted without a sync; a set larger than next_cap overflows into a further pass
        score = goes_next * plan.priority  # 0 outside A's real rows, 1 + 2^-20 for edited rows (first), 1 otherwise
        top, where = torch.topk(score, next_cap)
        next_rows = torch.where(top > 0, where, plan.pad_index_t)
        run.counts += [tied.sum(dtype=score.dtype) if tied is not None else plan.zero, score.sum()]

    # 6. codes, output projection and FFN of the next layer's rows. Their input: kept (full layout),
    #    or the dirty rows' from step 1 and the others' (their code flipped) recomputed from their
    #    codes. Exact sizes list the dirty rows first; padded sets are in no known order, so every
    #    input is recomputed.
    next_slots = affected.index_select(0, next_rows)
    inputs = _finish_next_rows(
        state, plan, run, l, next_rows, next_slots, codes, sums, dirty_input if n_dirty else None, n_dirty, exact
    )

    kept = state.outputs is not None
    if whole:  # every row of A recomputed in full, none moved
        host_sets[1] = np.arange(length)
    run.records.append(
        LayerRecord(
            tie_cap=tie_cap if tied is not None else 0,
            next_cap=next_cap,
            keys=0 if whole else n_keys,
            block=n_keys < consts.block_keys,
            whole=whole,
            with_deleted=with_deleted,
            inputs=inputs,
            dirty_inputs=bool(n_dirty) and carried is None and not kept,
            sets=host_sets if exact else [dirty, full_rows if full_rows is not None else dirty, next_rows],
        )
    )
    if not exact:  # what a resumed pass needs (padded sizes)
        run.saved[l] = SavedSets(
            tied=tied if tied is not None else plan.no_rows,
            tie_rows=tie_rows if tie_rows is not None else plan.empty,
            goes_next=goes_next,
            next_rows=next_rows,
        )
    return next_rows


def _qkv_rows(state: WindowState, l: int, x: torch.Tensor) -> torch.Tensor:
    """Step 1: LN1 then the fused q|k|v projection of rows (r, d) -> (r, 3d); q carries hd^-0.5."""
    cfg, consts = state.cfg, state.consts
    bias = consts.qkv_bias[l]
    normed = state.net.layers[l].self_attn_layer_norm(x)
    qkv = torch.addmm(bias, normed, consts.qkv_weight[l]) if bias is not None else normed @ consts.qkv_weight[l]
    if not consts.q_scaled:
        qkv[:, : cfg.hidden_size] *= cfg.head_dim**-0.5
    return qkv


def _move_by_changed_keys(
    state: WindowState,
    plan: EditPlan,
    view,
    l: int,
    dirty: torch.Tensor,
    dirty_slots: torch.Tensor | None,
    new_qkv: torch.Tensor | None,
    n_deleted: int,
    sums: torch.Tensor,
    bounds: torch.Tensor | None,
) -> None:
    """Step 2: write the dirty rows' new q|k|v, and move the affected rows' sums (in place) by the
    changed keys: every affected query against every changed key (new and old keys of the dirty
    rows, old keys of deleted rows), all heads in one product. The same weights move the code
    projections (linearity in v), and u by a bound of each move's norm."""
    cfg, consts = state.cfg, state.consts
    d, H = cfg.hidden_size, cfg.num_attention_heads
    affected, length = plan.affected, plan.affected.shape[0]
    n_keys = 2 * dirty.shape[0] + n_deleted
    old_kv = view.qkv.index_select(
        0,
        (torch.cat([dirty_slots, plan.deleted]) if n_deleted else dirty_slots)
        if dirty_slots is not None
        else plan.deleted,
    )
    if dirty_slots is not None:
        view.qkv.index_put_((dirty_slots,), new_qkv)
        changed_kv = torch.cat([new_qkv, old_kv])
        key_table = plan.key_dirty.index_select(2, dirty).flatten(1)  # new keys then old keys of the dirty rows
        if n_deleted:
            key_table = torch.cat([key_table, plan.key_deleted], 1)
    else:
        changed_kv, key_table = old_kv, plan.key_deleted
    key_sign, key_pos = key_table  # +-scale per new / old key (0 for padding), and key positions
    queries = view.queries.index_select(0, affected).transpose(0, 1)  # (H, a, hd) (whole rows: 3x faster)
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


def _finish_next_rows(
    state: WindowState,
    plan: EditPlan,
    run: PassState,
    l: int,
    next_rows: torch.Tensor,
    next_slots: torch.Tensor,
    codes: torch.Tensor | None,
    sums: torch.Tensor,
    dirty_input: torch.Tensor | None,
    n_dirty: int,
    exact: bool,
) -> int | None:
    """Step 6: codes, output projection and FFN of the next layer's rows (and of the riders, in the
    same batched finish); returns how many rows' inputs were recomputed from codes (None: all)."""
    cfg, consts, view = state.cfg, state.consts, state.layer_views[l]
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


def read_sets(
    state: WindowState,
    plan: EditPlan,
    run: PassState,
    l: int,
    goes_next: torch.Tensor,
    tied: torch.Tensor | None,
    codes: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None, list[np.ndarray]]:
    """Exact sizes (CPU): the host reads which rows go on, one read per layer. Near-ties among
    the moved rows (rare) are recomputed in full here, as a dense pass computes them, and join
    the next rows if their code changed. Returns (next rows, near-tie rows or None, the layer's
    row sets on the host: dirty, recomputed in full, next)."""
    flags = (torch.stack([goes_next, tied]) if tied is not None else goes_next.unsqueeze(0)).numpy().copy()  # one read
    dirty = run.host_dirty
    flags[:, dirty] = 0  # the dirty rows (distinct) are listed first, and recomputed in full already
    next_rows = np.concatenate([dirty, np.flatnonzero(flags[0])])  # the dirty rows, then flipped ones (in order)
    ties = np.flatnonzero(flags[1] > state.cfg.vq_heads) if tied is not None else dirty[:0]
    tie_rows = None
    if len(ties):
        view, affected = state.layer_views[l], plan.affected
        tie_rows = torch.from_numpy(ties)
        slots = affected.index_select(0, tie_rows)
        sums = _full_sums(
            state, view, l, view.queries_by_head[:, slots], plan.affected_pos_col.index_select(0, tie_rows)
        )
        view.sums.index_put_((slots,), sums)
        fresh = kernels.code_distances(state.consts, l, state.per_vq_head(sums)).argmin(-1)
        codes.index_put_((tie_rows,), fresh)
        goes_next = goes_next.index_put((tie_rows,), (fresh != view.codes.index_select(0, slots)).sum(-1))
        flipped = goes_next.numpy().copy()  # a second read, only after near-ties
        flipped[dirty] = 0
        next_rows = np.concatenate([dirty, np.flatnonzero(flipped)])
    run.host_dirty = next_rows
    return torch.from_numpy(next_rows), tie_rows, [dirty, np.concatenate([dirty, ties]), next_rows]


def _full_sums(state: WindowState, view, l: int, queries: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
    """Sums rows of queries (H, r, hd) at positions (r, 1) over every key of the layer."""
    return kernels.full_sums(
        state.cfg, state.consts, l, view.keys_by_head, view.values_by_head, view.key_pos, queries, query_pos
    )
