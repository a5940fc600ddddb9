"""The dense pass over a window: how a state is built (open, rebuild after a fault) and checked.

A build runs the model's forward pass with traces over the window's rows and writes every
layer's q, k, v, sums, bounds and codes, and the heads, into freshly allocated slots; `verify`
runs the same pass at the state's positions and compares. The update that keeps a state exact
between the two is passes.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..model import VQOPT, ForwardOutput
from ..positions import spread_positions
from . import heads
from .constants import LayerConstants
from .rows import head_norms
from .state import WindowState


@dataclass
class WindowCheck:
    codes_equal: bool
    mismatched_codes: int
    max_abs_diff: float


def new_state(
    net: VQOPT,
    consts: LayerConstants,
    ids: Sequence[int],
    positions: Sequence[int] | None = None,
    tie_rel: float = 1e-9,
    tie_growth: float = 0.0,
) -> WindowState:
    """A window of BOS and these tokens, built by a dense pass, at `positions` (BOS included) or
    spread over the position pool as an open puts them."""
    state = WindowState(net, consts, tie_rel, tie_growth)
    rows = [state.cfg.bos_token_id, *ids]
    pos = spread_positions(len(rows), state.cfg.position_pool) if positions is None else torch.as_tensor(positions)
    build(state, np.asarray(rows, dtype=np.int64), pos.numpy().astype(np.int64))
    return state


def dense_pass(state: WindowState, ids: torch.Tensor, pos: torch.Tensor):
    """The dense forward pass with traces over rows (ids, positions): builds and verify."""
    if state.consts.dense is not None:  # another backend (inference/onnx_dense.py) where it was measured faster
        return state.consts.dense(ids, pos)
    return state.net(ids.unsqueeze(0), pos.unsqueeze(0), collect=True)


def build(state: WindowState, rows: np.ndarray, pos: np.ndarray) -> None:
    """Allocate the slots and fill them with a dense pass over rows (ids, BOS first) at positions."""
    cfg, consts = state.cfg, state.consts
    n = len(rows)
    state.allocate(n)
    dev, dt = state.key_pos.device, state.key_pos.dtype
    state.ids_host[:n], state.pos_host[:n] = rows, pos
    state.embed_idx[:n] = torch.from_numpy(consts.embed_rows(rows, pos)).to(dev)
    pos_t = torch.from_numpy(pos).to(dev)
    state.key_pos[:n] = pos_t.to(dt)
    with torch.no_grad():
        out = dense_pass(state, torch.from_numpy(rows).to(dev), pos_t)
        for l, tr in enumerate(out.traces):
            qkv = torch.stack([tr.q[0], tr.k[0], tr.v[0]])  # (3, n, d) -> head-major (3, H, n, hd)
            state.qkv[l, :, :, :n] = qkv.view(3, n, cfg.num_attention_heads, -1).transpose(1, 2)
            torch.mm(tr.s[0], consts.sum_map[l], out=state.sums[l, :n])
            if cfg.vq:
                state.bounds_of(state.sums[l, :n]).copy_(head_norms(cfg, tr.s[0]))
                state.codes[l, :n] = tr.codes[0]
        heads.fill_heads(state, np.arange(n), out.hidden[0], out.cls_logits[0])
        if state.outputs is not None:
            for l, x in enumerate(out.layer_outputs):
                state.outputs[l, :n] = x[0]
    state.make_views()
    state.update_total()
    state.revision += 1


def dense_at_rest(state: WindowState) -> tuple[torch.Tensor, torch.Tensor, ForwardOutput]:
    """The dense pass over the state's rows in document order at the positions they hold, which the
    codes must equal: (order, ids, output), order the rows' slots and ids their tokens."""
    order = torch.tensor(state.order, dtype=torch.long, device=state.key_pos.device)
    ids = torch.from_numpy(state.ids_host[state.order]).to(order.device)
    with torch.no_grad():
        out = dense_pass(state, ids, torch.from_numpy(state.pos_host[state.order]).to(order.device))
    return order, ids, out


def verify(state: WindowState) -> WindowCheck:
    """Run the dense pass at the state's positions and compare codes and outputs."""
    order, ids, out = dense_at_rest(state)
    mismatched = 0
    if state.cfg.vq:
        for l, tr in enumerate(out.traces):
            mismatched += int((tr.codes[0] != state.codes[l, order]).any(-1).sum())
    diffs = [
        (out.hidden[0] - state.hidden(order)).abs().max(),
        (torch.log_softmax(out.cls_logits[0], -1) - state.cls_logp[order]).abs().max(),
        (heads.next_token_nll(state, out.hidden[0, :-1], ids[1:]) - state.nll[order[1:]]).abs().max()
        if len(order) > 1
        else out.hidden.new_zeros(()),
    ]
    return WindowCheck(mismatched == 0, mismatched, float(max(diffs)))
