"""Paragraphs of a text and the token spans that cover them (for paragraph scores and hints).

A paragraph is a run of non-blank lines. A token belongs to the paragraph its first character
falls in; tokens that start in the blank lines between paragraphs belong to none.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# A paragraph: a run of lines that are not blank. The one definition: hint material, grammar lints,
# plain-text layout and paragraph scores all cut a text with it.
PARAGRAPH = re.compile(r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")


@dataclass(frozen=True)
class Paragraph:
    start: int  # character offsets into the text
    end: int
    token_start: int  # token span [token_start, token_end)
    token_end: int
    line: int  # 0-based line of the first character


def paragraphs(text: str, offsets: list[tuple[int, int]]) -> list[Paragraph]:
    """Paragraphs with at least one token, given each token's (start, end) character offsets."""
    starts = [a for a, _ in offsets]
    out = []
    for m in PARAGRAPH.finditer(text):
        lo, hi = bisect.bisect_left(starts, m.start()), bisect.bisect_left(starts, m.end())
        if lo < hi:
            out.append(Paragraph(m.start(), m.end(), lo, hi, text.count("\n", 0, m.start())))
    return out
