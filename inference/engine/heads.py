"""The output heads of a window: the LM head (a token's surprise) and the classification head.

A row's heads read its last layer's output: the class log-probabilities of the row, and the
surprise -log p(next token) of its successor. An update refreshes them for the rows whose output
changed and for the predecessors of edited tokens (their successor changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from ..costs import Cost, finish_row_macs, head_row_macs
from .policy import LSE_CHUNK_ROWS

if TYPE_CHECKING:
    from .constants import LayerConstants
    from .state import WindowState


def next_token_nll(state: WindowState, hidden: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
    """-log p(next_ids[i] | hidden[i]). LM logits in chunks of rows: (rows x vocab) for a whole
    window would be the largest temporary of a build (2048 x 8192 float64 = 128 MiB, several times over)."""
    if len(next_ids) > LSE_CHUNK_ROWS:
        return torch.cat(
            [
                next_token_nll(state, hidden[a : a + LSE_CHUNK_ROWS], next_ids[a : a + LSE_CHUNK_ROWS])
                for a in range(0, len(next_ids), LSE_CHUNK_ROWS)
            ]
        )
    # log-sum-exp less the id's logit
    return F.cross_entropy(state.consts.lm_logits(hidden), next_ids, reduction="none")


def fill_heads(
    state: WindowState, slots: np.ndarray, hidden: torch.Tensor | None = None, cls_logits: torch.Tensor | None = None
) -> None:
    """The heads of rows (host slots) from their final hidden states: class log-probabilities,
    and the surprise of each row's successor token (the last row's goes to the trash slot).
    hidden None: from the rows' kept last-layer outputs (full layout), one gather."""
    successors = state.successors()[slots]
    rows, successors, next_ids = (
        torch.from_numpy(np.stack([slots, successors, state.ids_host[successors]])).to(state.key_pos.device).unbind()
    )
    if hidden is None:
        hidden, cls_logits = state.net.heads(state.layer_views[-1].outputs.index_select(0, rows))
    state.cls_logp.index_put_((rows,), torch.log_softmax(cls_logits, -1))
    state.nll.index_put_((successors,), next_token_nll(state, hidden, next_ids))


def update_heads(
    state: WindowState,
    finals: list[tuple[np.ndarray, torch.Tensor]],
    riders: np.ndarray,
    rider_outputs: torch.Tensor | None,
    cost: Cost,
) -> None:
    """Heads of the rows whose last-layer output changed (each pass's last layer gave it, a later
    pass's winning) and of the riders (their output from the first pass, or recomputed from their
    codes when none ran): class log-probabilities and the next token's surprise."""
    cfg, layers, trash = state.cfg, state.cfg.num_hidden_layers, state.trash
    slots = np.concatenate([f[0] for f in finals]) if finals else np.zeros(0, dtype=np.int64)
    if state.outputs is not None:  # kept outputs: every row's is in the last layer's, read once (padded with
        rows = np.union1d(slots, riders)  # the trash slot to the row count the LM head runs fastest at)
        rows = rows[rows != trash]
        if len(rows):
            cost.incremental_macs += len(rows) * head_row_macs(cfg)
            fill_heads(state, np.concatenate([rows, np.full(state.consts.lm_pad(len(rows), state.key_pos), trash)]))
        return
    outs = [torch.cat([f[1] for f in finals]) if len(finals) > 1 else finals[0][1]] if finals else []
    if len(finals) > 1 or (slots == trash).any():  # padded, or several passes: the last output per row
        last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]
        last = last[slots[last] != trash]
        slots, outs = slots[last], [outs[0].index_select(0, torch.from_numpy(last).to(outs[0].device))]
    new = ~np.isin(riders, slots)  # (a rider whose output changed anyway is among the pass's rows)
    need = riders[new]
    if len(need) and rider_outputs is None:  # no pass ran: recomputed from their codes
        outs.append(state.layer_input(layers, torch.from_numpy(need).to(state.key_pos.device)))
        cost.incremental_macs += len(need) * layers * finish_row_macs(cfg)
    elif len(need):
        outs.append(
            rider_outputs
            if new.all()
            else rider_outputs.index_select(0, torch.from_numpy(np.flatnonzero(new)).to(rider_outputs.device))
        )
    if outs:
        rows = np.concatenate([slots, need])
        hidden, logits = state.net.heads(torch.cat(outs) if len(outs) > 1 else outs[0])
        fill_heads(state, rows, hidden, logits)
        cost.incremental_macs += len(rows) * head_row_macs(cfg)


def predecessor_logprobs(
    consts: LayerConstants, rows: list[tuple[WindowState, int]], candidates: Sequence[Sequence[int]] | None
):
    """log p(v | prefix) after each (window, predecessor slot) row: the whole vocabulary, a (rows,
    vocab) tensor, or only each row's `candidates`, a list of 1-D tensors (see
    IncrementalDocument.next_token_logprobs)."""
    # the predecessor rows' final hidden states, per window (recomputed from their codes, or
    # kept: WindowState.hidden), then their LM logits; every candidate of every row in one gather
    by_window: dict[int, tuple[WindowState, list[int]]] = {}
    for n, (w, _) in enumerate(rows):
        by_window.setdefault(id(w), (w, []))[1].append(n)
    order, hidden = [], []
    for w, ns in by_window.values():
        slots = torch.as_tensor([int(rows[n][1]) for n in ns], device=w.key_pos.device)
        order += ns
        hidden.append(w.hidden(slots))
    back = torch.as_tensor(np.argsort(order), device=hidden[0].device)
    h = torch.cat(hidden).index_select(0, back)
    logits = consts.lm_logits(h)
    lse = torch.logsumexp(logits, -1)
    if candidates is None:
        return (logits - lse.unsqueeze(1)).float().cpu()
    sizes = [len(ids) for ids in candidates]
    owner = torch.as_tensor(np.repeat(np.arange(len(sizes)), sizes), device=h.device)
    flat = torch.as_tensor([int(t) for ids in candidates for t in ids], dtype=torch.long, device=h.device)
    scores = logits[owner, flat] - lse.index_select(0, owner)
    return list(scores.float().cpu().split(sizes))
