"""The typed plan of one update, built on the host before any layer runs.

`reorder` applies the splices to the window's document order (slots reused, allocated, freed);
`plan_edit` assigns positions, finds the affected rows A (every alive row at or after the first
changed key, old or new) and uploads, in one copy per dtype, every index and table the layer
passes read. The records here are what the passes share and what they leave for the host's
accounting and for a resumed pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..costs import Cost
from ..edits import Splice
from ..positions import NEW, Assignment, assign_positions
from .policy import FAR, Sizing

if TYPE_CHECKING:
    from .state import WindowState


@dataclass
class Reordering:
    """The document order after the splices, and which slots they touched (host slots)."""

    old_order: list[int]
    new_order: list[int]
    inserted: list[int]  # fresh slots of new tokens
    changed: list[int]  # kept slots whose token id changed
    deleted: list[int]  # slots of deleted tokens (freed once the update is done)


@dataclass(frozen=True)
class HostPlan:
    """Host copies of the plan, for the accounting and the near-tie fixes that read them."""

    affected: np.ndarray  # A: slots of the affected rows, padded with the trash slot
    edited_rows: np.ndarray  # local indices of the edited rows (layer 0's dirty rows), padded
    n_affected: int  # real rows of A
    n_edited: int  # rows whose input changed at layer 0 (inserted, new id or relabelled)
    is_new: np.ndarray  # per slot: inserted by this update
    pos_before: np.ndarray  # per slot: its position before the update
    deleted: np.ndarray  # deleted slots
    order: np.ndarray  # the document order after the update


@dataclass(frozen=True)
class EditPlan:
    """What the passes of one update share: the affected rows A and per-row tables. It does not
    change once built; what a pass works out as it goes is in its PassState.

    Exact sizes: A is just the affected rows, and the row sets inside it (dirty rows, near-ties,
    next rows; local indices into A) are read by the host. Bucketed: A is padded with the trash
    slot to a bucketed length plus one trailing trash entry, and the row sets are of bucketed
    length, padded with `pad_index`, that trailing entry."""

    sizing: Sizing  # the consts' sizing when the plan was made
    affected: torch.Tensor  # A (slots)
    last_affected: int  # index of A's last entry
    pad_index: int  # local index the padded entries of row sets hold
    pad_index_t: torch.Tensor  # the same, on the device (1,)
    edited_rows: torch.Tensor  # local indices of the edited rows: layer 0's dirty rows
    valid: torch.Tensor  # 1.0 for A's real rows, 0.0 for padding
    priority: torch.Tensor  # valid, and a hair more for edited rows: a capped next set never drops them
    deleted: torch.Tensor  # slots of deleted rows
    # per changed key, by local index: new keys [0, n) and old keys [n, 2n) of the rows of A, then
    # the deleted rows' keys: (sign times the attention scale (0 for padding), position)
    key_dirty: torch.Tensor  # (2, 2, n)
    key_deleted: torch.Tensor  # (2, deleted)
    affected_pos_col: torch.Tensor  # positions of A (n, 1)
    edited_slots: torch.Tensor | None  # exact sizes: A[dirty] at layer 0 is the edited rows, in order
    host: HostPlan
    # tables of the padded path (and of models without VQ); None with exact sizes
    no_rows: torch.Tensor | None  # all False (n,)
    valid_rows: torch.Tensor | None  # valid as bool
    zero: torch.Tensor | None  # a scalar 0 of the state's dtype
    empty: torch.Tensor | None  # an empty index


@dataclass
class LayerRecord:
    """What one layer of a pass did, for the host's accounting and a resumed pass."""

    tie_cap: int  # near-tie rows reserved (0: none looked for in the layer)
    next_cap: int  # rows reserved for the next layer (exact sizes: 0, the host reads the set)
    keys: int  # changed keys the affected rows moved by (0: the layer recomputed them in full)
    block: bool  # moves through the block-diagonal codebook map (few keys)
    whole: bool  # every affected row recomputed in full
    with_deleted: bool  # the deleted rows' keys were among the changed keys
    inputs: int | None  # rows whose input was recomputed from codes (None: every next row)
    dirty_inputs: bool  # the dirty rows' inputs were recomputed from codes too
    sets: list  # (dirty, recomputed in full, next) rows, local: host arrays or device tensors
    n_tied: int = 0  # padded path: near-ties found (read after the pass)
    n_next: int = 0  # padded path: next rows found


@dataclass
class SavedSets:
    """Device row sets of a padded layer, kept for a resumed pass."""

    tied: torch.Tensor  # near-tie flags (local)
    tie_rows: torch.Tensor  # near-ties recomputed in the layer
    goes_next: torch.Tensor  # flags of rows that go on to the next layer
    next_rows: torch.Tensor  # those that did (capped)


@dataclass
class Riders:
    """Lean layout: rows whose last-layer output the heads need although their input did not change
    (the predecessors of edited tokens), riding the first pass's batched finish of every layer."""

    slots: torch.Tensor
    outputs: torch.Tensor | None = None  # their output at the layer the pass reached


@dataclass
class PassState:
    """One pass over layers first..L-1: what it works out as it goes (the plan stays as built)."""

    first: int
    host_dirty: np.ndarray | None = None  # exact sizes: the current layer's dirty rows (local), read by the host
    riders: Riders | None = None  # the first pass only
    counts: list = field(default_factory=list)  # padded: (near-ties, next rows) per layer, on the device
    records: list[LayerRecord] = field(default_factory=list)
    saved: dict[int, SavedSets] = field(default_factory=dict)
    carry: tuple[torch.Tensor, torch.Tensor] | None = None  # the last layer's next slots and their outputs


def reorder(state: WindowState, splices: Sequence[Splice]) -> Reordering:
    """Apply the splices to the document order: kept slots get their new ids, new tokens fresh slots."""
    old_order = state.order
    new_order = [old_order[0]]
    inserted, changed, deleted = [], [], []
    cursor = 0
    for sp in splices:
        new_order += old_order[1 + cursor : 1 + sp.start]
        span = old_order[1 + sp.start : 1 + sp.end]
        kept = min(len(span), len(sp.new_ids))
        for slot, tok in zip(span[:kept], sp.new_ids[:kept]):
            if state.ids_host[slot] != tok:
                state.ids_host[slot] = tok
                changed.append(slot)
            new_order.append(slot)
        deleted += span[kept:]
        fresh = state.alloc(len(sp.new_ids) - kept)
        state.ids_host[fresh] = sp.new_ids[kept:]
        inserted += fresh
        new_order += fresh
        cursor = sp.end
    new_order += old_order[1 + cursor :]
    return Reordering(old_order, new_order, inserted, changed, deleted)


def plan_edit(state: WindowState, edit: Reordering, layout: np.ndarray | None = None) -> tuple[Cost, EditPlan | None]:
    """Positions, the affected rows and the device tables of an update; (cost, None) when no row
    changed. Writes the new positions and embedding rows of the edited slots into the state.
    `layout`: every row's position after the update (a re-spread), instead of assign_positions."""
    cfg = state.cfg
    dev = state.key_pos.device
    pos_before = state.pos_host.copy()
    proposal = state.pos_host[edit.new_order].copy()
    is_new = np.zeros(len(state.ids_host), dtype=bool)
    is_new[edit.inserted] = True
    proposal[is_new[edit.new_order]] = NEW
    if layout is None:
        assignment = assign_positions(proposal, cfg.position_pool)
    else:
        moved = np.nonzero((proposal != NEW) & (proposal != layout))[0]
        assignment = Assignment(positions=np.asarray(layout, dtype=np.int64), relabelled=moved, full_respreads=0)
    order = np.asarray(edit.new_order, dtype=np.int64)
    relabelled = order[assignment.relabelled].tolist()
    state.pos_host[order] = assignment.positions
    touched = np.asarray(sorted(set(edit.inserted) | set(edit.changed) | set(relabelled)), dtype=np.int64)
    deleted = np.asarray(edit.deleted, dtype=np.int64)

    cost = Cost(
        dirty_per_layer=[0] * cfg.num_hidden_layers,
        relabelled=len(relabelled),
        full_respreads=assignment.full_respreads,
    )
    state.order = edit.new_order
    cost.dense_macs = state.dense_macs()
    if len(touched) == 0 and len(deleted) == 0:
        return cost, None

    # the first changed key, old or new: every row before it keeps its whole state
    existing = touched[~is_new[touched]]
    firsts = [state.pos_host[touched].min()] if len(touched) else []
    if len(existing):
        firsts.append(pos_before[existing].min())
    if len(deleted):
        firsts.append(pos_before[deleted].min())
    first_pos = int(min(firsts))
    affected_slots = order[assignment.positions >= first_pos]
    sizing = state.consts.sizing
    exact = sizing.reads_each_layer
    n_affected = len(affected_slots)
    length = sizing.affected_length(n_affected)  # padded: A's last entry is the trash slot
    pad_index = sizing.pad_index(length)
    affected = np.full(length, state.trash, dtype=np.int64)
    affected[:n_affected] = affected_slots
    local = np.full(state.cap + 1, pad_index, dtype=np.int64)
    local[affected_slots] = np.arange(n_affected)
    n_touched, n_deleted = len(touched), len(deleted)
    dirty = np.full(sizing.set_length(n_touched), pad_index, dtype=np.int64)
    dirty[:n_touched] = local[touched]
    scale = cfg.attention_scale
    valid = np.zeros(length)
    valid[:n_affected] = 1.0
    priority = valid * 1.0
    priority[dirty[:n_touched]] = 1.0 + 2.0**-20  # edited rows first: a capped next set never drops them
    key_dirty = np.concatenate(
        [valid * scale, -(valid * ~is_new[affected]) * scale, state.pos_host[affected], pos_before[affected]]
    )
    key_deleted = np.concatenate([np.full(n_deleted, -scale), pos_before[deleted]])

    # one host-to-device copy for every index and one for every float table of the update, split
    n_dirty = len(dirty)
    embed_rows = state.consts.embed_rows(state.ids_host[touched], state.pos_host[touched]).ravel()
    ints = torch.from_numpy(np.concatenate([affected, dirty, touched, deleted, [pad_index], embed_rows])).to(dev)
    affected_t, dirty_t, moved, pad_index_t, touched_embed = ints.split(
        [length, n_dirty, n_touched + n_deleted, 1, 3 * n_touched]
    )
    floats = torch.from_numpy(
        np.concatenate(
            [
                key_dirty,
                key_deleted,
                state.pos_host[affected],
                valid,
                priority,
                state.pos_host[touched],
                np.full(n_deleted, FAR),
            ]
        )
    ).to(dev, state.key_pos.dtype)
    key_dirty_t, key_deleted_t, affected_pos, valid_t, priority_t, moved_pos = floats.split(
        [4 * length, 2 * n_deleted, length, length, length, n_touched + n_deleted]
    )
    touched_t, deleted_t = moved.split([n_touched, n_deleted])
    state.key_pos.index_put_((moved,), moved_pos)  # new positions of edited rows, FAR for deleted ones
    padded = dict(no_rows=None, valid_rows=None, zero=None, empty=None)
    if not exact or not cfg.vq:  # tables of the padded path (and of models without VQ)
        padded = dict(
            no_rows=torch.zeros(length, dtype=torch.bool, device=dev),
            valid_rows=valid_t > 0,
            zero=torch.zeros((), dtype=state.key_pos.dtype, device=dev),
            empty=affected_t[:0],
        )
    plan = EditPlan(
        sizing=sizing,
        affected=affected_t,
        last_affected=length - 1,
        pad_index=pad_index,
        pad_index_t=pad_index_t,
        edited_rows=dirty_t,
        valid=valid_t,
        priority=priority_t,
        deleted=deleted_t,
        key_dirty=key_dirty_t.view(2, 2, length),
        key_deleted=key_deleted_t.view(2, n_deleted),
        affected_pos_col=affected_pos.unsqueeze(1),
        edited_slots=touched_t if exact else None,
        host=HostPlan(
            affected=affected,
            edited_rows=dirty,
            n_affected=n_affected,
            n_edited=n_touched,
            is_new=is_new,
            pos_before=pos_before,
            deleted=deleted,
            order=order,
        ),
        **padded,
    )
    if n_touched:
        state.embed_idx.index_put_((touched_t,), touched_embed.view(n_touched, 3))
    return cost, plan


def stale_predecessors(state: WindowState, old_order: np.ndarray, edited: np.ndarray) -> np.ndarray:
    """Slots whose successor token is new, has a new id, or follows a new predecessor: the
    surprise of that successor must be recomputed from their output."""
    order = state.rows()
    prev_old = np.full(state.cap + 1, -1, dtype=np.int64)
    prev_old[old_order[1:]] = old_order[:-1]
    stale = (prev_old[order[1:]] != order[:-1]) | np.isin(order[1:], edited)
    return order[:-1][stale]
