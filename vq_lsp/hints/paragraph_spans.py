"""The paragraphs of one version of a text and the prose in each: what the hint material
(reuse.py) and the grammar lints (grammar.py) are keyed and placed by."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from . import markup
from .paragraphs import PARAGRAPH
from .recent import Recent


def _clipped(ranges: tuple, lo: int, a: int, b: int) -> tuple:
    """Sorted disjoint (start, end) `ranges` from index `lo` on, cut to [a, b), relative to a (a
    docstring's prose runs over several paragraphs; each paragraph keeps its own part)."""
    out = []
    for p, q in ranges[lo:]:
        if p >= b:
            break
        if q > a:
            out.append((max(p, a) - a, min(q, b) - a))
    return tuple(out)


@dataclass(frozen=True)
class ParagraphSpans:
    """The paragraphs of one version of a text and the prose in each, relative to its start:
    what the material (reuse.py) and the grammar lints (grammar.py) are keyed and placed by."""

    bounds: list[tuple[int, int]]  # (start, end) of each paragraph
    prose: list[tuple]  # per paragraph: its part of the layout's prose ranges, relative to its start


def paragraph_spans(text: str, lay: markup.Layout, kept: Recent[ParagraphSpans]) -> ParagraphSpans:
    """The paragraphs of `text` with their prose; the last few are `kept` (HintCaches.spans), a
    publish asks twice."""

    def make() -> ParagraphSpans:
        bounds = [(m.start(), m.end()) for m in PARAGRAPH.finditer(text)]
        prose_starts = [a for a, _ in lay.prose]
        prose = [_clipped(lay.prose, max(bisect.bisect_left(prose_starts, a) - 1, 0), a, b) for a, b in bounds]
        return ParagraphSpans(bounds, prose)

    return kept.get((text, lay.prose), make)
