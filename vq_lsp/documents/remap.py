"""Move hints chosen for one version of a text through the edits made since.

While typing outpaces the engine, the newest finished result is published with its ranges
moved through the changes still waiting, and stated as the version they lead to; so hints keep
up during a burst and never point at the wrong characters. A hint whose characters an edit
touched is dropped, except a paragraph's tone, which stretches over an edit inside one line of
the paragraph (its paragraph is still the same paragraph). Pure code: text and offsets only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..hints.lsp import Hint
from .textsync import Change, apply_changes

STRETCHES = ("sentiment",)  # codes whose range may grow or shrink with an edit inside it


def move(text: str, starts: list[int], hints: Sequence[Hint], changes: Sequence[Change]):
    """(new text, its line starts, the hints that survive in its offsets), or None when a change
    replaces the whole text (nothing can be moved through it). Raises TextSyncError for a bad
    range, as applying the change would."""
    if any(c.range is None for c in changes):
        return None
    alive, prev = list(hints), text
    for text, starts, a, b, e in apply_changes(text, changes, starts):  # noqa: B007, B020 (a running fold)
        delta = e - b
        # a line break inserted or removed may split or join paragraphs: no stretching then
        breaks = any(ch in "\r\n" for ch in text[a:e]) or any(ch in "\r\n" for ch in prev[a:b])
        moved = []
        for h in alive:
            stretch = h.code in STRETCHES and not breaks
            if stretch and h.start < a and b <= h.end:
                kept = text[h.start : h.end + delta].rstrip()  # typing inside or at the end of the paragraph
                if all(line.strip() for line in kept.split("\n")):  # not emptied, and no line of it blanked
                    moved.append(replace(h, end=h.start + len(kept)))
            elif h.end <= a:
                moved.append(h)  # before the edit
            elif h.start >= b:
                moved.append(replace(h, start=h.start + delta, end=h.end + delta))  # after it
            # else: the edit touched the hint's characters, so it no longer says what it said: dropped
        alive, prev = moved, text
    return text, starts, alive
