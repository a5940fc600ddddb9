"""The cost of one pass of an update, counted on the host from the row sets it used.

costs.py says what is counted and how; this module applies it to what a pass of the engine
actually did (inference/engine/passes.py): the real rows and (query, key) pairs of each layer,
padding not counted. Kept apart from the engine so that the counting rules read in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .config import VQOPTConfig
from .costs import Cost, finish_row_macs

if TYPE_CHECKING:
    from .engine.plan import HostPlan, LayerRecord


def account_pass(
    cfg: VQOPTConfig,
    segments: int,
    pos: np.ndarray,
    host: HostPlan,
    pad_index: int,
    records: Sequence[LayerRecord],
    sets: list[list[np.ndarray]],
    first: int,
    cost: Cost,
) -> None:
    """Count the real rows and (query, key) pairs of a pass on the host; padding is not counted.

    `pos` holds every slot's position after the update, `sets` each layer's (dirty, recomputed in
    full, next) rows, local indices into the affected rows. Positions increase along the document,
    so the keys a row sees are counted by binary search. The bound u's few numbers per row are not
    counted (like LayerNorms)."""
    d, K = cfg.hidden_size, cfg.vq_codes
    affected, a = host.affected, host.n_affected
    alive_pos = pos[host.order]  # sorted: the order is the document order
    affected_pos = pos[affected[:a]]  # sorted too
    finish = finish_row_macs(cfg)
    for i, rec in enumerate(records):
        l = first + i
        dirty_rows, full_rows, next_rows = sets[i]  # dirty rows, rows recomputed in full (dirty first), next rows
        dirty_rows = dirty_rows[dirty_rows != pad_index]
        full_rows = full_rows[full_rows != pad_index]
        next_rows = next_rows[next_rows != pad_index]
        dirty = len(dirty_rows)
        cost.dirty_per_layer[l] += dirty
        if rec.whole:
            cost.whole_layers += 1
        else:  # near-ties (and a resumed pass's unchecked ones) recomputed in full
            cost.near_ties += len(full_rows) - dirty
        macs = dirty * 3 * d * d  # q, k, v
        if rec.keys:
            macs += _move_macs(cfg, segments, pos, host, affected_pos, rec, dirty_rows)
        if len(full_rows):
            macs += int(np.searchsorted(alive_pos, pos[affected[full_rows]], side="right").sum()) * 2 * d
        if cfg.vq:
            macs += len(full_rows) * K * d  # code distances of the rows recomputed in full
        macs += len(next_rows) * finish
        # inputs recomputed from codes: l finishes per row (exact sizes: the next rows that were
        # not dirty; padded: every next row; and a resumed pass's first dirty rows)
        inputs = (len(next_rows) if rec.inputs is None else rec.inputs) + (dirty if rec.dirty_inputs else 0)
        macs += inputs * l * finish
        cost.incremental_macs += macs


def _move_macs(
    cfg: VQOPTConfig,
    segments: int,
    pos: np.ndarray,
    host: HostPlan,
    affected_pos: np.ndarray,
    rec: LayerRecord,
    dirty_rows: np.ndarray,
) -> int:
    """What moving the affected rows by a layer's changed keys costs: the (query, key) pairs of
    rows that are not recomputed in full, and their code projections."""
    d, K, G, a = cfg.hidden_size, cfg.vq_codes, segments, host.n_affected
    dirty_slots = host.affected[dirty_rows]
    old = dirty_slots[~host.is_new[dirty_slots]]
    keys = [pos[dirty_slots], host.pos_before[old]]
    if rec.with_deleted and len(host.deleted):
        keys.append(host.pos_before[host.deleted])
    key_pos = np.concatenate(keys)
    seen = a - np.searchsorted(affected_pos, key_pos, side="left")  # affected rows at or after each key
    dirty_pos = np.sort(pos[dirty_slots])
    seen -= len(dirty_pos) - np.searchsorted(dirty_pos, key_pos, side="left")  # dirty rows: recomputed
    pairs = int(seen.sum())
    macs = pairs * 2 * d
    if cfg.vq and rec.block:
        macs += len(key_pos) * d * K  # each changed key's v projected on its VQ head's codes, per head
        macs += pairs * G * K + (a - len(dirty_rows)) * (G - cfg.vq_heads) * K  # moves, then summed per VQ head
    elif cfg.vq:
        macs += (a - len(dirty_rows)) * K * d  # every affected row's move of s projected on the codes
    return macs
