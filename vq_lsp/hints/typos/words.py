"""The dictionary and what it says of a word: whether it is a word (American or British spelling,
with a contraction's ending), which dictionary words are one or two edits from it, and the
confusion sets a dictionary word can be mistaken within (their/there, form/from ...)."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
from spellchecker import SpellChecker

MIN_FIX_FREQUENCY = 100  # a fix must be at least this common in pyspellchecker's list (it holds much junk)
# A word this common (pyspellchecker's counts) is one a misspelling is likely to be of: a spelling one edit
# from it (two for longer words) is no name or coinage, however often the document repeats it.
COMMON_FREQUENCY = 5000
# In a technical document a word used in its code is a typo only when one edit from a word this common
# ("teh" beside "the"), not from a merely common one ("stdin" beside "stain").
VERY_COMMON_FREQUENCY = 1_000_000
TWO_EDIT_MIN_LETTERS = 5  # shorter words have too many dictionary words two edits away to guess among


CONFUSION_SETS: tuple[tuple[str, ...], ...] = (
    ("their", "there", "they're"),
    ("your", "you're"),
    ("its", "it's"),
    ("then", "than"),
    ("lose", "loose"),
    ("form", "from"),
    ("affect", "effect"),
    ("were", "where", "we're"),
    ("whether", "weather"),
    ("quite", "quiet"),
    ("accept", "except"),
    ("advice", "advise"),
    ("breath", "breathe"),
    ("principal", "principle"),
    ("passed", "past"),
    ("whose", "who's"),
    ("chose", "choose"),
    ("later", "latter"),
    ("of", "off"),
    ("peace", "piece"),
    ("hear", "here"),
    ("brake", "break"),
    ("weak", "week"),
    ("whole", "hole"),
    ("though", "through", "thought"),
    ("lead", "led"),
    ("desert", "dessert"),
    ("sight", "site"),
    ("now", "know"),
    ("new", "knew"),
    ("right", "write"),
    ("which", "witch"),
    ("dose", "does"),
    ("wander", "wonder"),
    ("cloth", "clothe"),
    ("tale", "tail"),
    ("plain", "plane"),
    ("role", "roll"),
    ("bare", "bear"),
)
CONFUSABLE: dict[str, tuple[str, ...]] = {
    w: tuple(o for o in group if o != w) for group in CONFUSION_SETS for w in group
}


@lru_cache(maxsize=1)
def dictionary() -> SpellChecker:
    """pyspellchecker's bundled English word list (loaded once, about 0.3 s)."""
    return SpellChecker(language="en", distance=1)


_BRITISH = (
    (re.compile(r"our"), "or"),
    (re.compile(r"is(e|ed|es|ing|ation|ations)$"), r"iz\1"),
    (re.compile(r"ence$"), "ense"),
    (re.compile(r"tre(s?)$"), r"ter\1"),
    (re.compile(r"ll(ed|ing|er|ers)$"), r"l\1"),
    (re.compile(r"ogue(s?)$"), r"og\1"),
)

# What follows an apostrophe in a contraction or possessive of any word: "could've", "that'll",
# "there'd", "what're", "film's" (the word list holds only some of them).
CONTRACTION_ENDINGS = frozenset({"ve", "ll", "d", "re", "s", "m"})


@lru_cache(maxsize=65536)
def is_word(word: str) -> bool:
    """In the dictionary, or not an ordinary lower/Title-case word (acronyms, CamelCase: not ours).
    The word list is American: a British spelling (colour, realise, offence, centre, travelled)
    of a listed word counts as a word too, and so does a dictionary word with a contraction's or
    possessive's ending ("could've", "that'll", "there'd")."""
    if not (word.islower() or word[:1].isupper() and word[1:].islower()):
        return True
    lower = word.lower().replace("’", "'")
    spell = dictionary()
    if lower in spell:
        return True
    for pattern, american in _BRITISH:
        variant = pattern.sub(american, lower)
        if variant != lower and variant in spell:
            return True
    stem, apostrophe, ending = lower.rpartition("'")
    return bool(apostrophe and stem and ending in CONTRACTION_ENDINGS and "'" not in stem and is_word(stem))


def fix_worthy(lower: str) -> bool:
    return is_word(lower) and dictionary().word_frequency[lower] >= MIN_FIX_FREQUENCY


def reads_on(word: str) -> bool:
    """Whether the detector's finding on this dictionary word depends on the words after it
    (a lower-case confusable, `Detector._read_on` in detector.py)."""
    return word.islower() and word in CONFUSABLE


def match_case(like: str, word: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def close_words(word: str, distance: int = 1) -> list[str]:
    """Dictionary words `distance` edits away (1 or 2), commonest first, in the word's case."""
    return [match_case(word, w) for w in close_lower(word.lower(), distance)]


@lru_cache(maxsize=16384)
def close_lower(lower: str, distance: int) -> tuple[str, ...]:
    """Cached: the server re-examines the same words on every publish."""
    spell = dictionary()
    freq = spell.word_frequency
    if distance == 1:
        found = [w for w in spell.known(spell.edit_distance_1(lower)) if w != lower and freq[w] >= MIN_FIX_FREQUENCY]
    else:
        found = [w for w in two_edits(lower) if w != lower]
    found.sort(key=lambda w: (-freq[w], w))
    return tuple(found)


class DeleteIndex:
    """Fix-worthy dictionary words (MIN_FIX_FREQUENCY) by themselves and by each of their
    one-letter deletions: words two edits away are found from a word's one-edit variants
    through it, in milliseconds, where pyspellchecker's two-edit search takes seconds.

    Kept as two sorted arrays (the 64-bit hash of each key, the word it leads to) instead of a
    dict of strings to tuples: the dict took about 105 MB of the server's memory, the arrays
    take a few. Two keys with one hash only add candidates, and `two_edits` keeps only words
    within two edits, so a collision never changes what is found."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        hashes: list[int] = []
        ids: list[int] = []
        for i, w in enumerate(words):
            keys = {w} | {w[:j] + w[j + 1 :] for j in range(len(w))}
            hashes.extend(map(hash, keys))
            ids.extend([i] * len(keys))
        h = np.array(hashes, dtype=np.int64)
        order = np.argsort(h, kind="stable")
        self.hashes = h[order]
        self.word_ids = np.array(ids, dtype=np.int32)[order]

    def lookup(self, keys: list[str]) -> set[str]:
        """The words any of `keys` leads to (a superset when hashes collide)."""
        if not keys:
            return set()
        h = np.fromiter((hash(k) for k in keys), dtype=np.int64, count=len(keys))
        lo = np.searchsorted(self.hashes, h, "left")
        hi = np.searchsorted(self.hashes, h, "right")
        hit = hi > lo
        if not hit.any():
            return set()
        rows = np.concatenate([np.arange(a, b) for a, b in zip(lo[hit], hi[hit], strict=True)])
        return {self.words[i] for i in np.unique(self.word_ids[rows]).tolist()}


@lru_cache(maxsize=1)
def _one_delete_index() -> DeleteIndex:
    freq = dictionary().word_frequency
    return DeleteIndex(sorted(w for w, count in freq.items() if count >= MIN_FIX_FREQUENCY and w.isalpha()))


def two_edits(lower: str) -> set[str]:
    """Fix-worthy dictionary words at most two edits (insert, delete, replace, swap) from `lower`."""
    keys = []
    for e in dictionary().edit_distance_1(lower):
        keys.append(e)
        keys.extend(e[:i] + e[i + 1 :] for i in range(len(e)))
    found = _one_delete_index().lookup(keys)
    return {w for w in found if edit_distance(lower, w) <= 2}


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (an adjacent swap is one edit)."""
    if abs(len(a) - len(b)) > 2:
        return 3
    prev2, prev = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if prev2 is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]
