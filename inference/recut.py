"""How one revision of a document reaches its windows, and re-cuts them where it must.

The splices of a revision are routed to the windows they touch (`route`). A touched window that
still fits is updated incrementally; one that outgrows its capacity is re-split and rebuilt by a
dense pass, an emptied one dropped (`apply_windows`), and a window under a quarter full is merged
with a neighbour (`merge_small`). With the model's context "paragraph" every paragraph break ends
a window, and only the paragraphs around the edit are looked at (`apply_paragraphs`). The
document (document.py) decides when; windowing.py says where a fresh document is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .costs import Cost
from .edits import Splice, apply_splices
from .engine import WindowState, passes
from .positions import spread_array
from .tokenizer import paragraph_breaks
from .windowing import cut_document, line_end_flags, new_window, tiles

if TYPE_CHECKING:
    from .loading import LoadedModel

PerWindow = dict[int, list[Splice]]  # window index -> its splices, in window-local offsets


def capacity(model: LoadedModel) -> int:
    """Tokens one window holds (BOS takes a row)."""
    return model.config.window_tokens - 1


def window_bounds(windows: Sequence[WindowState]) -> list[tuple[int, int]]:
    """The token span [start, end) of each window in the document (a plain loop: several times
    faster than numpy for the few dozen windows a document has, and run on every edit)."""
    out, start = [], 0
    for w in windows:
        out.append((start, start + w.n_tokens))
        start += w.n_tokens
    return out


def route(splices: Sequence[Splice], bounds: list[tuple[int, int]], n: int) -> PerWindow:
    """Validated, sorted splices against a document of n tokens whose windows span `bounds`, as
    window-local splices: a splice's new tokens go to the window it starts in, and the windows
    after it that it covers lose their part of the span."""
    per_window: PerWindow = {}
    for sp in splices:
        home = next(i for i, (a, b) in enumerate(bounds) if a <= sp.start < b) if sp.start < n else len(bounds) - 1
        for i in range(home, len(bounds)):
            a, b = bounds[i]
            if i > home and a >= sp.end:
                break
            local = Splice(max(sp.start, a) - a, min(sp.end, b) - a, sp.new_ids if i == home else ())
            if i == home or local.start != local.end:
                per_window.setdefault(i, []).append(local)
    return per_window


def fresh(model: LoadedModel, ids: Sequence[int], cost: Cost) -> WindowState:
    """A window built by a dense pass, its cost counted as such."""
    window = new_window(model, ids)
    macs = window.dense_macs()
    cost.add(Cost(incremental_macs=macs, dense_macs=macs, dirty_per_layer=[len(ids) + 1] * len(window.net.layers)))
    return window


def fresh_split(model: LoadedModel, ids: Sequence[int], cost: Cost) -> list[WindowState]:
    """Fresh windows for (part of) one paragraph: one window, or balanced tiles cut at line breaks."""
    return [fresh(model, ids[a:b], cost) for a, b in tiles(len(ids), capacity(model), line_end_flags(model, ids))]


def update(model: LoadedModel, w: WindowState, local: list[Splice], size: int, at_rest: bool) -> Cost:
    """A window's incremental update, straight to an open's layout of its `size` tokens when at_rest
    (a model that reads only the order is at rest at any layout: the cheap one is kept)."""
    respread = at_rest and not model.order_only
    layout = spread_array(size + 1, model.config.position_pool) if respread else None
    return passes.apply(w, local, layout)


def apply_windows(
    model: LoadedModel, windows: list[WindowState], per_window: PerWindow, cost: Cost, at_rest: bool
) -> list[WindowState]:
    """Context "window": each touched window updated, or re-split when it outgrows its capacity
    (dropped when emptied); then small windows merged."""
    out: list[WindowState] = []
    for i, w in enumerate(windows):
        local = per_window.get(i)
        if not local:
            out.append(w)
            continue
        size = w.n_tokens + sum(len(s.new_ids) - (s.end - s.start) for s in local)
        if 0 < size <= capacity(model):
            cost.add(update(model, w, local, size, at_rest))
            out.append(w)
        elif size > capacity(model):
            ids = apply_splices(w.token_ids(), local)
            out += [fresh(model, ids[a:b], cost) for a, b in cut_document(model, ids)]
    return merge_small(model, out, cost)


def merge_small(model: LoadedModel, windows: list[WindowState], cost: Cost) -> list[WindowState]:
    """Rebuild a window under a quarter full together with its smaller neighbour, when they fit.

    Without this, windows cut off by overflows and shrunk by deletes would fragment a
    document into many tiny windows, each a context boundary for the model.
    """
    out, room = list(windows), capacity(model)
    i = 0
    while i < len(out):
        small = out[i].n_tokens < room // 4
        sizes = [(out[j].n_tokens, j) for j in (i - 1, i + 1) if 0 <= j < len(out)]
        if small and sizes:
            size, j = min(sizes)
            if size + out[i].n_tokens <= room:
                a, b = sorted((i, j))
                out[a : b + 1] = [fresh(model, out[a].token_ids() + out[b].token_ids(), cost)]
                i = max(0, a - 1)
                continue
        i += 1
    return out


def breaks(model: LoadedModel, ids: Sequence[int], before: int | None) -> np.ndarray:
    """Paragraph-break flags of `ids`, the token before them (None: none) deciding the first."""
    if before is None:
        return paragraph_breaks(ids, model.paragraph_ids, model.newline_end_ids)
    return paragraph_breaks([before, *ids], model.paragraph_ids, model.newline_end_ids)[1:]


class _Region:
    """The windows around an edit, widened to whole paragraphs, with their tokens after it."""

    def __init__(self, model: LoadedModel, windows: list[WindowState], new: dict[int, list[int]]) -> None:
        self.model, self.windows, self.new = model, windows, new
        self.ids_of: dict[int, list[int]] = {}
        self.lo, self.hi = min(new), min(max(new) + 1, len(windows) - 1)
        while self.lo > 0 and not self.ends_paragraph(self.lo - 1):
            self.lo -= 1
        while self.hi < len(windows) - 1 and not self.ends_paragraph(self.hi):
            self.hi += 1

    def ids(self, i: int) -> list[int]:
        if i not in self.ids_of:
            self.ids_of[i] = self.new[i] if i in self.new else self.windows[i].token_ids()
        return self.ids_of[i]

    def last_token(self, i: int) -> int | None:
        """The last token of window i or, if it is emptied, of the one before."""
        while i >= 0 and not self.ids(i):
            i -= 1
        return self.ids(i)[-1] if i >= 0 else None

    def ends_paragraph(self, i: int) -> bool:
        own = self.ids(i)
        return bool(own) and bool(breaks(self.model, own[-2:], self.last_token(i - 1) if len(own) < 2 else None)[-1])

    def text(self) -> tuple[list[int], list[int], list[tuple[int, int, int]]]:
        """(the region's tokens, the end of each paragraph in them, (start, end, window index) of
        its non-empty windows)."""
        text = [t for i in range(self.lo, self.hi + 1) for t in self.ids(i)]
        flags = breaks(self.model, text, self.last_token(self.lo - 1))
        ends = (np.flatnonzero(flags[:-1]) + 1).tolist() + [len(text)] if text else []
        extents, at = [], 0
        for i in range(self.lo, self.hi + 1):
            if self.ids(i):
                extents.append((at, at + len(self.ids(i)), i))
                at += len(self.ids(i))
        return text, ends, extents


def apply_paragraphs(
    model: LoadedModel, windows: list[WindowState], per_window: PerWindow, cost: Cost, at_rest: bool = False
) -> list[WindowState]:
    """Context "paragraph": every paragraph break ends a window, and a paragraph that fits one
    window is exactly one window (a longer one is tiled by windows of at most capacity).

    Only the paragraphs around the edit are looked at: the touched windows and the next one
    (its first token may now end a paragraph), widened to whole paragraphs. A window that still
    covers a whole paragraph, or a valid tile of a long one, keeps its state (updated
    incrementally if touched: its context is its own tokens, wherever it lies); the rest of
    the region is rebuilt, paragraph by paragraph."""
    new = {i: apply_splices(windows[i].token_ids(), sp) for i, sp in per_window.items()}
    if not new:
        return windows
    region = _Region(model, windows, new)
    text, ends, extents = region.text()
    out, k, start = [], 0, 0
    for end in ends:  # each paragraph of the region
        while k < len(extents) and extents[k][1] <= start:
            k += 1
        covering = []
        while k < len(extents) and extents[k][1] <= end and extents[k][0] >= start:
            covering.append(extents[k])
            k += 1
        tiled = (
            bool(covering)
            and covering[0][0] == start
            and covering[-1][1] == end
            and all(covering[j][1] == covering[j + 1][0] for j in range(len(covering) - 1))
        )
        if tiled and (len(covering) == 1 or end - start > capacity(model)):
            for a, b, i in covering:  # a whole paragraph, or the tiles of a long one
                if b - a > capacity(model):  # a tile that outgrew its window: only it is cut again
                    out += fresh_split(model, text[a:b], cost)
                else:
                    if i in new:
                        cost.add(update(model, windows[i], per_window[i], b - a, at_rest))
                    out.append(windows[i])
        else:
            out += fresh_split(model, text[start:end], cost)
        start = end
    return windows[: region.lo] + out + windows[region.hi + 1 :]
