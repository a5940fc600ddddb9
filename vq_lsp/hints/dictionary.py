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
