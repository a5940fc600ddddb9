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
    affected_pos: np.ndarray  # positions of A
    order_pos: np.ndarray  # positions along the document order (increasing)
    slots_upto: np.ndarray  # per row of the order: 1 + the largest slot among the rows up to it

    def key_slots(self, rows: np.ndarray) -> int:
        """How many slots, from the first, hold every key that rows of A (local indices) see: the
        keys at or before the last of them. A fresh document keeps its rows in slot order, so an
        edit early in it reads only the keys before it."""
        last = np.searchsorted(self.order_pos, self.affected_pos[rows].max(), side="right") - 1
        return int(self.slots_upto[last])


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

    def resumed_keys(self) -> torch.Tensor:
        """The key table of a resumed pass (2, 2, n), as key_dirty. Its first pass wrote every touched
        row's new key at every layer (edited rows are never cut from a next set), so the old key a
        dirty row now replaces is that one, at its new position, and new rows have one too. The
        first pass's table would leave a new row's first key in every later sum, or take a moved
        row's away at its old position."""
        new = self.key_dirty[:, 0]  # (2, n): +scale (0 for padding), position
        return torch.stack([new, new * new.new_tensor([[-1.0], [1.0]])], 1)


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


@dataclass(frozen=True)
class _Placement:
    """The host side of an update's positions: which slots it touched and where rows sit now."""

    order: np.ndarray  # the document order after the update
    pos_before: np.ndarray  # per slot: its position before the update
    is_new: np.ndarray  # per slot: inserted by this update
    touched: np.ndarray  # inserted, changed or relabelled slots (sorted): layer 0's dirty rows
    deleted: np.ndarray  # deleted slots
    positions: np.ndarray  # the positions of `order`


def _place(state: WindowState, edit: Reordering, layout: np.ndarray | None, cost: Cost) -> _Placement:
    """Assign the rows' positions after the update (or take `layout`), written into the state's
    host arrays and order; the relabels and re-spreads are counted in `cost`."""
    pos_before = state.pos_host.copy()
    proposal = state.pos_host[edit.new_order].copy()
    is_new = np.zeros(len(state.ids_host), dtype=bool)
    is_new[edit.inserted] = True
    proposal[is_new[edit.new_order]] = NEW
    if layout is None:
        assignment = assign_positions(proposal, state.cfg.position_pool)
    else:
        moved = np.nonzero((proposal != NEW) & (proposal != layout))[0]
        assignment = Assignment(positions=np.asarray(layout, dtype=np.int64), relabelled=moved, full_respreads=0)
    order = np.asarray(edit.new_order, dtype=np.int64)
    relabelled = order[assignment.relabelled].tolist()
    state.pos_host[order] = assignment.positions
    state.order = edit.new_order
    cost.relabelled, cost.full_respreads = len(relabelled), assignment.full_respreads
    touched = np.asarray(sorted(set(edit.inserted) | set(edit.changed) | set(relabelled)), dtype=np.int64)
    deleted = np.asarray(edit.deleted, dtype=np.int64)
    return _Placement(order, pos_before, is_new, touched, deleted, assignment.positions)


def _affected_slots(state: WindowState, placed: _Placement) -> np.ndarray:
    """A: every alive row at or after the first changed key, old (touched or deleted) or new."""
    touched, deleted, pos_before = placed.touched, placed.deleted, placed.pos_before
    existing = touched[~placed.is_new[touched]]
    firsts = [state.pos_host[touched].min()] if len(touched) else []
    if len(existing):
        firsts.append(pos_before[existing].min())
    if len(deleted):
        firsts.append(pos_before[deleted].min())
    return placed.order[placed.positions >= int(min(firsts))]


@dataclass(frozen=True)
class _HostTables:
    """The plan's index and float tables on the host, before their upload (one copy per dtype)."""

    affected: np.ndarray  # A, padded with the trash slot
    affected_pos: np.ndarray  # their positions
    dirty: np.ndarray  # local indices of the touched rows, padded
    pad_index: int
    valid: np.ndarray
    priority: np.ndarray
    key_dirty: np.ndarray  # (2, 2, length) flattened: signs and positions of the new and old keys of A's rows
    key_deleted: np.ndarray  # (2, deleted) flattened


def _host_tables(state: WindowState, placed: _Placement, affected_slots: np.ndarray) -> _HostTables:
    sizing, n_affected, n_touched = state.consts.sizing, len(affected_slots), len(placed.touched)
    length = sizing.affected_length(n_affected)  # padded: A's last entry is the trash slot
    pad_index = sizing.pad_index(length)
    affected = np.full(length, state.trash, dtype=np.int64)
    affected[:n_affected] = affected_slots
    local = np.full(state.cap + 1, pad_index, dtype=np.int64)
    local[affected_slots] = np.arange(n_affected)
    dirty = np.full(sizing.set_length(n_touched), pad_index, dtype=np.int64)
    dirty[:n_touched] = local[placed.touched]
    scale = state.cfg.attention_scale
    valid = np.zeros(length)
    valid[:n_affected] = 1.0
    priority = valid * 1.0
    priority[dirty[:n_touched]] = 1.0 + 2.0**-20  # edited rows first: a capped next set never drops them
    signs = [valid * scale, -(valid * ~placed.is_new[affected]) * scale]
    affected_pos = state.pos_host[affected]
    key_dirty = np.concatenate([*signs, affected_pos, placed.pos_before[affected]])
    key_deleted = np.concatenate([np.full(len(placed.deleted), -scale), placed.pos_before[placed.deleted]])
    return _HostTables(affected, affected_pos, dirty, pad_index, valid, priority, key_dirty, key_deleted)


def plan_edit(state: WindowState, edit: Reordering, layout: np.ndarray | None = None) -> tuple[Cost, EditPlan | None]:
    """Positions, the affected rows and the device tables of an update; (cost, None) when no row
    changed. Writes the new positions and embedding rows of the edited slots into the state.
    `layout`: every row's position after the update (a re-spread), instead of assign_positions."""
    cost = Cost(dirty_per_layer=[0] * state.cfg.num_hidden_layers)
    placed = _place(state, edit, layout, cost)
    cost.dense_macs = state.dense_macs()
    if len(placed.touched) == 0 and len(placed.deleted) == 0:
        return cost, None
    affected_slots = _affected_slots(state, placed)
    return cost, _upload(state, placed, len(affected_slots), _host_tables(state, placed, affected_slots))


def _upload(state: WindowState, placed: _Placement, n_affected: int, host: _HostTables) -> EditPlan:
    """One host-to-device copy for every index and one for every float table of the update, split
    into the plan's tensors; the edited slots' new positions (FAR for deleted ones) and embedding
    rows written into the state."""
    cfg, dev, sizing = state.cfg, state.key_pos.device, state.consts.sizing
    touched, deleted = placed.touched, placed.deleted
    length, n_dirty, n_touched, n_deleted = len(host.affected), len(host.dirty), len(touched), len(deleted)
    embed_rows = state.consts.embed_rows(state.ids_host[touched], state.pos_host[touched]).ravel()
    ints = np.concatenate([host.affected, host.dirty, touched, deleted, [host.pad_index], embed_rows])
    affected_t, dirty_t, moved, pad_index_t, touched_embed = (
        torch.from_numpy(ints).to(dev).split([length, n_dirty, n_touched + n_deleted, 1, 3 * n_touched])
    )
    floats = [host.key_dirty, host.key_deleted, host.affected_pos, host.valid, host.priority]
    floats += [state.pos_host[touched], np.full(n_deleted, FAR)]
    key_dirty_t, key_deleted_t, affected_pos, valid_t, priority_t, moved_pos = (
        torch.from_numpy(np.concatenate(floats))
        .to(dev, state.key_pos.dtype)
        .split([4 * length, 2 * n_deleted, length, length, length, n_touched + n_deleted])
    )
    touched_t, deleted_t = moved.split([n_touched, n_deleted])
    state.key_pos.index_put_((moved,), moved_pos)  # new positions of edited rows, FAR for deleted ones
    padded = dict(no_rows=None, valid_rows=None, zero=None, empty=None)
    if not sizing.reads_each_layer or not cfg.vq:  # tables of the padded path (and of models without VQ)
        padded = dict(
            no_rows=torch.zeros(length, dtype=torch.bool, device=dev),
            valid_rows=valid_t > 0,
            zero=torch.zeros((), dtype=state.key_pos.dtype, device=dev),
            empty=affected_t[:0],
        )
    if n_touched:
        state.embed_idx.index_put_((touched_t,), touched_embed.view(n_touched, 3))
    return EditPlan(
        sizing=sizing,
        affected=affected_t,
        last_affected=length - 1,
        pad_index=host.pad_index,
        pad_index_t=pad_index_t,
        edited_rows=dirty_t,
        valid=valid_t,
        priority=priority_t,
        deleted=deleted_t,
        key_dirty=key_dirty_t.view(2, 2, length),
        key_deleted=key_deleted_t.view(2, n_deleted),
        affected_pos_col=affected_pos.unsqueeze(1),
        edited_slots=touched_t if sizing.reads_each_layer else None,
        host=HostPlan(
            affected=host.affected,
            edited_rows=host.dirty,
            n_affected=n_affected,
            n_edited=n_touched,
            is_new=placed.is_new,
            pos_before=placed.pos_before,
            deleted=deleted,
            order=placed.order,
            affected_pos=host.affected_pos[:n_affected],
            order_pos=placed.positions,
            slots_upto=np.maximum.accumulate(placed.order) + 1,
        ),
        **padded,
    )


def stale_predecessors(state: WindowState, old_order: np.ndarray, edited: np.ndarray) -> np.ndarray:
    """Slots whose successor token is new, has a new id, or follows a new predecessor: the
    surprise of that successor must be recomputed from their output."""
    order = state.rows()
    prev_old = np.full(state.cap + 1, -1, dtype=np.int64)
    prev_old[old_order[1:]] = old_order[:-1]
    stale = (prev_old[order[1:]] != order[:-1]) | np.isin(order[1:], edited)
    return order[:-1][stale]


def to_host(t: torch.Tensor) -> np.ndarray:
    """A writable host copy of a device tensor (how exact sizing reads a layer's flags)."""
    return t.numpy().copy() if t.device.type == "cpu" else t.cpu().numpy()


def to_device(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """Host row indices as a tensor on `like`'s device."""
    return torch.from_numpy(a).to(like.device)
