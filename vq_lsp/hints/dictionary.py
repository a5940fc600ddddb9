"""The writer's own words: a word in a dictionary is never flagged, whatever the model thinks of it.

Jargon (`dtype`, `stdio`), names and coinages are words to the writer but not to pyspellchecker's
list, and the model alone reads a rare word as a typo of a common one. A `Dictionary` is the union
of the word lists the writer keeps (the workspace's, the user's, the configuration file's and a
document's own `vq-lsp-words:` comment); it only answers whether a word is in it. Reading and
writing the lists' files is the workspace's job (vq_lsp/workspace/dictionaries.py).

A word listed in lower case matches in any case (`dtype` also accepts `Dtype` at the start of a
sentence); a word listed with capitals (`GitHub`) matches only as written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

COMMENT = "#"  # a word list's comment lines start with it


@dataclass(frozen=True)
class Dictionary:
    """Words never flagged."""

    words: frozenset[str] = frozenset()

    @classmethod
    def of(cls, *lists: Iterable[str]) -> Dictionary:
        return cls(frozenset(w.strip() for words in lists for w in words if w.strip()))

    def __contains__(self, word: str) -> bool:
        if word in self.words:
            return True
        return word.lower().replace("’", "'") in self.words

    def near(self, word: str) -> list[str]:
        """The dictionary's words one edit from `word` (a letter inserted, dropped, replaced or two
        swapped; case ignored), in `word`'s case when listed in lower case: fixes for a typo of jargon."""
        lower = word.lower()
        out = []
        for w in sorted(self.words):
            if w.lower() != lower and one_edit_apart(lower, w.lower()):
                out.append(w[:1].upper() + w[1:] if w.islower() and word[:1].isupper() else w)
        return out

    def union(self, other: Iterable[str]) -> Dictionary:
        return Dictionary(self.words | frozenset(w.strip() for w in other if w.strip()))


def parse_word_list(text: str) -> list[str]:
    """The words of a word list file: one a line; blank lines and `#` comments skipped."""
    out = []
    for line in text.splitlines():
        word = line.split(COMMENT, 1)[0].strip()
        if word:
            out.append(word)
    return out


def one_edit_apart(a: str, b: str) -> bool:
    """Whether b is a with one letter inserted, dropped or replaced, or two neighbours swapped."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[i:] == long[i + 1 :]
