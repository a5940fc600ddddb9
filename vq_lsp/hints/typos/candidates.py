"""A suspect word's candidate replacements: close dictionary words for a non-word, the rest of its
confusion set for a dictionary word."""

from __future__ import annotations

from .slips import long_slips
from .words import CONFUSABLE, TWO_EDIT_MIN_LETTERS, close_words, match_case


def candidates_for(word: str, known: bool) -> list[str]:
    """Close dictionary words for a non-word (`fix_candidates`), the confusion set for a dictionary word."""
    if known:
        return [match_case(word, c) for c in CONFUSABLE.get(word.lower(), ())]
    return fix_candidates(word)


def fix_candidates(word: str) -> list[str]:
    """A non-word's candidate fixes: dictionary words one edit away, or two when none is one
    away and the word is long enough to guess from (begginers, mispeled), then the rare long
    words it is one slip of the hand from (`long_slips`: "compielr" of "compiler")."""
    near = close_words(word)
    if not near and len(word) >= TWO_EDIT_MIN_LETTERS:
        near = close_words(word, 2)
    rare = [match_case(word, w) for w in long_slips(word.lower())]
    return unique(near + rare) if rare else near


def unique(words: list[str]) -> list[str]:
    seen, out = set(), []
    for c in words:
        if c.lower() not in seen:
            seen.add(c.lower())
            out.append(c)
    return out
