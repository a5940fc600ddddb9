"""Which hints of a revision are new, and which of the previous revision's are gone.

A history's text output lists only what changed: a hint that stays from one revision to the
next is not repeated. The same hint in two revisions is the same kind of hint about the same
thing: a paragraph tone with the same label at the paragraph's line (followed through the
edit: the line map below), a typo or an unexpected word with the same word. A word's hint is
kept while the word stays in the text, wherever it moves; a tone is kept while its paragraph's
line maps onto it. Lines come from the rows of `scorer.py` (0-based); the texts from the source.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class ListedHint:
    """One hint as the text output shows it: what identifies it across revisions, where, and its words."""

    key: tuple[str, str]  # ("tone", label) or (kind, word): equal keys may be the same hint
    line: int  # 0-based
    follows_word: bool  # True: kept while its word is anywhere in the text; False: only on its mapped line
    text: str  # "line 3: positive tone (0.91)"


@dataclass(frozen=True)
class HintChanges:
    new: list[ListedHint]
    gone: list[ListedHint]  # lines as they were in the previous revision
    kept: int


def line_map(old: str, new: str) -> dict[int, int]:
    """Old line -> new line: unchanged lines map exactly, a rewritten block's lines map in order
    onto the lines that replaced it (clamped to its last line), deleted lines not at all."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    mapping: dict[int, int] = {}
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("equal", "replace"):
            for i in range(i1, i2):
                mapping[i] = j1 + min(i - i1, j2 - j1 - 1)
    return mapping


def changes(old_hints: list[ListedHint], new_hints: list[ListedHint], old_text: str, new_text: str) -> HintChanges:
    """Pair each new hint with a previous one of the same key: first on the line the previous one's
    line maps to, then (word hints only) anywhere, in order. Unpaired new ones are new, unpaired
    previous ones are gone."""
    mapping = line_map(old_text, new_text)
    by_place: dict[tuple[tuple[str, str], int], list[int]] = defaultdict(list)
    for i, h in enumerate(old_hints):
        if h.line in mapping:
            by_place[h.key, mapping[h.line]].append(i)
    taken: set[int] = set()
    rest: list[ListedHint] = []
    for h in new_hints:
        place = by_place.get((h.key, h.line))
        if place:
            taken.add(place.pop(0))
        else:
            rest.append(h)
    by_word: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in range(len(old_hints)):
        if i not in taken and old_hints[i].follows_word:
            by_word[old_hints[i].key].append(i)
    new = []
    for h in rest:
        same_word = by_word.get(h.key) if h.follows_word else None
        if same_word:
            taken.add(same_word.pop(0))
        else:
            new.append(h)
    gone = [h for i, h in enumerate(old_hints) if i not in taken]
    return HintChanges(new=new, gone=gone, kept=len(new_hints) - len(new))
