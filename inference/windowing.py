"""Where a document is cut into windows, and what its windows hold before they are built.

A document longer than one window is split at paragraph boundaries (a token holding a blank
line, else a line break, else a hard cut); with the model's context "paragraph" every paragraph
is its own window, tiled further only if it outgrows one. Pure functions of token counts and
break flags: the document (document.py) decides when to cut, this module where.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .engine import SLACK, WindowState, dense
from .tokenizer import paragraph_breaks

if TYPE_CHECKING:
    from .loading import LoadedModel


def split_windows(
    n: int,
    capacity: int,
    paragraph_ends: np.ndarray | None = None,
    line_ends: np.ndarray | None = None,
    fill: float = 0.9,
) -> list[tuple[int, int]]:
    """Token ranges of at most `capacity` tokens, cut after paragraph breaks where possible.

    `paragraph_ends` / `line_ends` flag the tokens a cut may follow (blank line, line break).
    Windows are balanced and filled to about `fill` of capacity, so that a window that has just
    been split has room to grow instead of overflowing again on the next keystroke.
    """
    k = max(1, math.ceil(n / (fill * capacity)))
    bounds, start = [], 0
    for w in range(k - 1):
        left = k - w  # windows still to cut, this one included
        ideal = start + (n - start) // left
        lo = max(start + 1, n - (left - 1) * capacity, ideal - capacity // 4)
        hi = min(start + capacity, ideal + capacity // 4)
        cut = min(max(ideal, lo), hi)
        for flags in (paragraph_ends, line_ends):
            if flags is not None and lo <= hi:
                hits = np.nonzero(flags[lo - 1 : hi])[0] + lo  # cut after a flagged token
                if len(hits):
                    cut = int(hits[np.argmin(np.abs(hits - ideal))])
                    break
        bounds.append((start, cut))
        start = cut
    bounds.append((start, n))
    return bounds


def split_paragraphs(
    n: int, capacity: int, paragraph_ends: np.ndarray, line_ends: np.ndarray | None = None
) -> list[tuple[int, int]]:
    """Token ranges, one per paragraph (cut after every flagged token); a paragraph longer than
    `capacity` is tiled as `split_windows` cuts a document."""
    out, start = [], 0
    for end in (np.flatnonzero(paragraph_ends[: n - 1]) + 1).tolist() + [n]:
        lines = line_ends[start:end] if line_ends is not None else None
        out += [(start + a, start + b) for a, b in tiles(end - start, capacity, lines)]
        start = end
    return out


def tiles(n: int, capacity: int, line_ends: np.ndarray | None = None) -> list[tuple[int, int]]:
    """One paragraph's windows: the whole paragraph when it fits, else balanced tiles cut at line breaks."""
    return [(0, n)] if n <= capacity else split_windows(n, capacity, None, line_ends)


def line_end_flags(m: LoadedModel, ids: Sequence[int]) -> np.ndarray | None:
    """Which tokens end a line (a window may be cut after them), or None for a model without a tokenizer."""
    return np.isin(np.asarray(ids, dtype=np.int64), list(m.line_ids)) if m.line_ids else None


def cut_document(m: LoadedModel, ids: Sequence[int]) -> list[tuple[int, int]]:
    """The token ranges of a document's windows under the model's context (see CONTEXTS)."""
    breaks = paragraph_breaks(ids, m.paragraph_ids, m.newline_end_ids)
    split = split_paragraphs if m.context == "paragraph" else split_windows
    return split(len(ids), m.config.window_tokens - 1, breaks, line_end_flags(m, ids))


def new_window(model: LoadedModel, ids: Sequence[int]) -> WindowState:
    """A window of these tokens, built by a dense pass with the model's tie guard."""
    return dense.new_state(model.net, model.consts, ids, tie_rel=model.tie_rel, tie_growth=model.tie_growth)


def estimate_state_bytes(model: LoadedModel, tokens: int | Sequence[int], lean: bool = False) -> int:
    """What the state of a document (its token ids, or only their count) would hold, without
    building it (memory budgets).

    Measured, not modelled: the bytes per slot of a tiny window of this model, times the slots
    its windows allocate (each reserves room to grow). Given the ids, the windows are the ones the
    document would be cut into (with context "paragraph", one per paragraph); given a count, they
    are full windows. lean: without layer outputs, whatever the model's layout (what the state
    takes once they are dropped).
    """
    return _state_bytes(model, _window_sizes(model, tokens), lean)


def estimate_build_bytes(model: LoadedModel, ids: Sequence[int], lean: bool = False) -> int:
    """The room building a document takes at its peak: its whole state and the temporaries of its
    largest window's dense pass (memory budgets reserve both, so that a build stays within the
    budget; the document is cut into windows once for both).

    The temporaries are modelled from the pass: one layer's attention weights (H x n x n; the
    weights are worked out in the scores' memory, kernels.gelu_weights), the per-layer traces a
    build keeps (x, q, k, v, s and the output: about 6 x n x d per layer) and two n x n masks. For
    the bundled model in float32 a 2,048-token window comes to about 120 MiB, which is what the
    resident memory of a build rises by above its state when freed memory is returned after each
    window."""
    sizes = _window_sizes(model, ids)
    n = 1 + int(max(sizes))  # the largest window's rows: BOS and its tokens
    cfg = model.config
    temporaries = (
        model.dtype.itemsize * (cfg.num_attention_heads * n * n + 6 * cfg.num_hidden_layers * n * cfg.hidden_size)
        + 2 * n * n
    )
    return _state_bytes(model, sizes, lean) + (int(temporaries) if len(ids) else 0)


def _window_sizes(model: LoadedModel, tokens: int | Sequence[int]) -> list[float]:
    """Tokens per window: those `cut_document` gives the ids, or balanced full windows for a count
    (filled to 0.9 of capacity, as split_windows cuts them)."""
    if isinstance(tokens, int):
        windows = max(1, math.ceil(tokens / (0.9 * (model.config.window_tokens - 1))))
        return [tokens / windows] * windows
    return [b - a for a, b in cut_document(model, tokens)] if len(tokens) else [0]


def _state_bytes(model: LoadedModel, sizes: list[float], lean: bool = False) -> int:
    per_slot = _bytes_per_slot(model, lean)
    return int(per_slot * sum(max(16, SLACK * (n + 1)) + 1 for n in sizes))  # a BOS row and a spare slot each


def _bytes_per_slot(model: LoadedModel, lean: bool) -> float:
    """State bytes per slot, measured on a tiny window of this model once (lean: its layer outputs
    dropped, as the memory budget drops a document's; a window without them loses nothing)."""

    def measure() -> float:
        tiny = new_window(model, [model.config.bos_token_id] * 8)
        if lean:
            tiny.drop_outputs()
        return tiny.state_bytes() / tiny.alive.numel()

    return model.cached(f"state_bytes_per_slot:{model.consts.keep_outputs}:{lean}", measure)
