"""Edits of a token sequence: the Splice record, the diff that finds them, and their reference application.

Small and pure on purpose: the server (old vs new tokens of an edited span) and the batch scorer
(consecutive revisions) use it without loading the engine. `diff` trims the common prefix and
suffix first, then `difflib` aligns the middle without its junk heuristic; adjacent operations
are merged into one splice.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Splice:
    """Replace tokens [start, end) of the current document with `new_ids`.

    Insert is start == end, delete is empty new_ids. Offsets refer to the document as it is
    before the call that receives the splice.
    """

    start: int
    end: int
    new_ids: tuple[int, ...] = ()

    def __init__(self, start: int, end: int, new_ids: Sequence[int] = ()) -> None:
        object.__setattr__(self, "start", int(start))
        object.__setattr__(self, "end", int(end))
        object.__setattr__(self, "new_ids", tuple(int(t) for t in new_ids))


def diff(old: Sequence[int], new: Sequence[int]) -> list[Splice]:
    """Splices (offsets into `old`, sorted, non-overlapping) such that applying them gives `new`."""
    old, new = list(old), list(new)
    lo = 0
    limit = min(len(old), len(new))
    while lo < limit and old[lo] == new[lo]:
        lo += 1
    hi = 0
    while hi < limit - lo and old[-1 - hi] == new[-1 - hi]:
        hi += 1
    a, b = old[lo : len(old) - hi], new[lo : len(new) - hi]
    splices: list[Splice] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end, ids = lo + i1, lo + i2, b[j1:j2]
        if splices and splices[-1].end == start:
            prev = splices.pop()
            start, ids = prev.start, list(prev.new_ids) + ids
        splices.append(Splice(start, end, ids))
    return splices


def apply_splices(ids: Sequence[int], splices: Sequence[Splice]) -> list[int]:
    """The token list after sorted, non-overlapping splices (a pure reference for tests and callers)."""
    out, cursor = [], 0
    for s in sorted(splices, key=lambda s: s.start):
        out += list(ids[cursor : s.start]) + list(s.new_ids)
        cursor = s.end
    return out + list(ids[cursor:])
