"""WindowRecord: what a window's state is made of, as a closed, typed, versioned record.

A WindowState holds these fields and, besides them, only what is the model's (re-attached on
restore: network, config, constants, tie guard) or remade from them (the per-layer views, the
host reads kept per revision). A snapshot (inference/snapshot.py) stores exactly this record:
renaming, adding or changing a field, or the layout of a tensor it names, means changing this
class and raising STATE_FORMAT, never a silent change of what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

# The version of WindowRecord's fields and of the layout of the tensors they hold. Raise it with any
# change of either: snapshots of another version are refused, and the caller rebuilds from the text.
STATE_FORMAT = 2


@dataclass
class WindowRecord:
    """One window's state (S = cap + 1 slots, the last the trash slot; L layers)."""

    cap: int  # slots (the trash slot excluded)
    ids_host: np.ndarray  # token id per slot (S,) int64
    pos_host: np.ndarray  # position per slot (S,) int64
    order: list[int]  # slots in document order (BOS first)
    free: list[int]  # free slots (popped from the end)
    key_pos: torch.Tensor  # position per slot, FAR where no row (S,) (for masks)
    embed_idx: torch.Tensor  # rows of the stacked embedding table per slot (S, 3)
    qkv: torch.Tensor  # q, k and v per layer, head-major: (L, 3, H, S, hd), a head's keys one block
    sums: torch.Tensor  # the attention sum's code projections and bounds per layer and slot (L, S, C)
    codes: torch.Tensor  # codes per layer and slot (L, S, h)
    outputs: torch.Tensor | None  # the layers' outputs (L, S, d) ("full" layout), else None
    cls_logp: torch.Tensor  # class log-probabilities per slot (S, labels)
    nll: torch.Tensor  # -log p(token | its predecessor) per slot (S,)
    cls_total: torch.Tensor  # the sum of the tokens' class log-probabilities (labels,)


RECORD_FIELDS = tuple(f.name for f in fields(WindowRecord))
