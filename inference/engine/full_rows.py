"""Rows recomputed in full over every key of a layer: the engine's one entry to rows.full_sums.

A row is recomputed in full when its input changed (a dirty row) or its code is a near-tie. Which
keys it reads is decided here, from the state: every slot, or (exact sizes) only the first slots
when they hold every key the rows see, or (many rows) blocks of positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from . import rows as kernels

if TYPE_CHECKING:
    from .state import LayerView, WindowState


def full_sums_of(
    state: WindowState,
    view: LayerView,
    l: int,
    queries: torch.Tensor,
    query_pos: torch.Tensor,
    key_slots: int | None = None,
) -> torch.Tensor:
    """Sums rows of queries (H, r, hd) at positions (r, 1) over every key of the layer (many rows, exact
    sizes: by blocks of positions, rows.full_sums; key_slots: only the first slots hold keys they see)."""
    blocks = kernels.blocks_for(queries.shape[1], state.consts.sizing.reads_each_layer)
    keys, values, key_pos = view.keys_by_head, view.values_by_head, view.key_pos
    if key_slots is not None and blocks == 1:
        keys, values, key_pos = keys.narrow(2, 0, key_slots), values.narrow(1, 0, key_slots), key_pos[:key_slots]
    args = (state.cfg, state.consts, l, keys, values, key_pos, queries, query_pos)
    return kernels.full_sums(*args, blocks=blocks)
