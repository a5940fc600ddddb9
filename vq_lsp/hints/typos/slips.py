"""Slips of the hand: the spellings a word is one slip from (a swapped pair, a key struck twice, a
neighbouring key, a dropped letter), and the tests that call a spelling a known slip of a
dictionary word rather than a name or a coinage."""

from __future__ import annotations

from functools import lru_cache

from .words import (
    COMMON_FREQUENCY,
    MIN_FIX_FREQUENCY,
    TWO_EDIT_MIN_LETTERS,
    VERY_COMMON_FREQUENCY,
    close_lower,
    close_words,
    dictionary,
    fix_worthy,
)

# A word this long one edit from a word worth suggesting is a typo of it, not jargon, in any document
# ("signatues", "connsists"): long jargon is a compound or a prefixed word ("wildcard", "deallocated",
# "subshells"), two or more edits from any word, or used in the document's code.
LONG_WORD_LETTERS = 7
# A spelling one slip of the hand from a dictionary word this long, or this common (pyspellchecker's
# counts), is a slip of it: long words have few neighbours ("signatues"), common ones are typed
# often ("laso"); a short, rarer word so near is as likely a coincidence ("nats": hats 8,500).
SLIP_LETTERS = 6
SLIP_FREQUENCY = 100_000


@lru_cache(maxsize=16384)
def near_common(lower: str) -> bool:
    """Whether a common dictionary word (COMMON_FREQUENCY) is one edit away, or two for a word of
    TWO_EDIT_MIN_LETTERS or more."""
    freq = dictionary().word_frequency
    if any(freq[w] >= COMMON_FREQUENCY for w in close_lower(lower, 1)):
        return True
    return len(lower) >= TWO_EDIT_MIN_LETTERS and any(freq[w] >= COMMON_FREQUENCY for w in close_lower(lower, 2))


@lru_cache(maxsize=16384)
def misspelling(lower: str) -> bool:
    """A known slip: one edit from a very common word ("teh"), or one slip of the hand (two
    neighbouring letters swapped, a letter doubled, dropped, or struck on a neighbouring key)
    from a dictionary word that is long (SLIP_LETTERS: "signatues", "dtermine") or common
    (SLIP_FREQUENCY: "laso", "foth"). Short, rarer words are too many for a near one to say so:
    "nats" is a slip of "hats" as much as it is a unit."""
    freq = dictionary().word_frequency
    if any(freq[w] >= VERY_COMMON_FREQUENCY for w in close_words(lower)):
        return True
    for w in slipped_from(lower):
        if w in dictionary() and freq[w] >= MIN_FIX_FREQUENCY:
            if len(w) >= SLIP_LETTERS or freq[w] >= SLIP_FREQUENCY:
                return True
    if long_slips(lower) or doubled_slip(lower):
        return True
    # a first letter dropped is a rarer slip: only of a common word ("roblem", not "lints" of "flints")
    return any(freq[c + lower] >= SLIP_FREQUENCY for c in "abcdefghijklmnopqrstuvwxyz")


DOUBLED_MIN_LETTERS = 4  # "rowss" of "rows"; a shorter word doubled ("mmap", "webb") may be an identifier
SWAP_MIN_LETTERS = 5  # "elt's" of "let's"; a shorter word swapped is as likely another word ("nats", "ants")


def doubled_slip(lower: str) -> bool:
    """Whether `lower` is a dictionary word worth suggesting of DOUBLED_MIN_LETTERS or more with
    one of its letters written twice ("rowss", "mmodule"): a key struck twice, the commonest slip.
    Unlike a neighbouring key ("nats" beside "hats"), it seldom lands on another word by chance."""
    for i in range(1, len(lower)):
        if lower[i] == lower[i - 1]:
            once = lower[:i] + lower[i + 1 :]
            if len(once) >= DOUBLED_MIN_LETTERS and fix_worthy(once):
                return True
    return False


_KEYS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


@lru_cache(maxsize=32)
def neighbours(ch: str) -> frozenset[str]:
    """The keys next to `ch` on a QWERTY keyboard (its row, the rows above and below)."""
    for r, row in enumerate(_KEYS):
        c = row.find(ch)
        if c >= 0:
            near = {row[j] for j in (c - 1, c + 1) if 0 <= j < len(row)}
            for other in (r - 1, r + 1):
                if 0 <= other < len(_KEYS):
                    near |= {_KEYS[other][j] for j in (c - 1, c, c + 1) if 0 <= j < len(_KEYS[other])}
            return frozenset(near)
    return frozenset()


def slipped_from(w: str) -> set[str]:
    """The spellings `w` is one slip of the hand from: two neighbouring letters swapped back, a
    doubled or neighbouring-key letter taken out, a neighbouring key put back, a dropped letter
    (not the first) put back."""
    out = set()
    n = len(w)
    for i in range(n - 1):
        out.add(w[:i] + w[i + 1] + w[i] + w[i + 2 :])
    for i in range(n):
        around = ({w[i - 1]} if i > 0 else set()) | ({w[i + 1]} if i + 1 < n else set())
        if w[i] in around or any(w[i] in neighbours(c) for c in around):
            out.add(w[:i] + w[i + 1 :])
        out.update(w[:i] + c + w[i + 1 :] for c in neighbours(w[i]))
    for i in range(1, n + 1):  # not before the first letter: a word's first letter is seldom dropped
        out.update(w[:i] + c + w[i:] for c in "abcdefghijklmnopqrstuvwxyz")
    out.discard(w)
    return out


def swapped_slip(lower: str) -> bool:
    """Whether `lower` is a word worth suggesting of SWAP_MIN_LETTERS or more with two neighbouring
    letters swapped ("elt's" of "let's", "ersources")."""
    for i in range(len(lower) - 1):
        w = lower[:i] + lower[i + 1] + lower[i] + lower[i + 2 :]
        if w != lower and len(w) >= SWAP_MIN_LETTERS and fix_worthy(w):
            return True
    return False


def unmistakable_slip(lower: str) -> bool:
    """A slip no technical coinage makes by chance: a key struck twice (`doubled_slip`), two
    neighbouring letters swapped (`swapped_slip`), any slip of a rare long word (`long_slips`),
    one edit from a very common word ("teh"). A neighbouring key or a dropped letter is not
    enough: they make jargon out of words as often as typos ("nats" and "hats", "diffed" and
    "differ", "stdio" and "studio")."""
    if doubled_slip(lower) or swapped_slip(lower) or long_slips(lower):
        return True
    freq = dictionary().word_frequency
    return any(freq[w] >= VERY_COMMON_FREQUENCY for w in close_lower(lower, 1))


@lru_cache(maxsize=16384)
def long_slips(lower: str) -> tuple[str, ...]:
    """Dictionary words of at least LONG_WORD_LETTERS letters, rarer than MIN_FIX_FREQUENCY, that
    `lower` is one slip of the hand from (`slipped_from`). pyspellchecker counts many technical
    words low ("compiler" 59, "microseconds" 50, "entreaties" 87) and its words of that length
    below MIN_FIX_FREQUENCY are real words, not its junk, which is short; a long word has few
    neighbours, so a swap, doubling or neighbouring key away from one is a slip of it, not a
    coincidence. Without them such a typo had no fix at all and was never shown. A form of the
    word ("seguidillas" of "seguidilla") is no slip of it."""
    if len(lower) < LONG_WORD_LETTERS - 1:
        return ()
    spell, freq = dictionary(), dictionary().word_frequency
    found = [
        w
        for w in slipped_from(lower)
        if len(w) >= LONG_WORD_LETTERS and freq[w] < MIN_FIX_FREQUENCY and w.isalpha() and w in spell
    ]
    if any(lower in (w + "s", w + "es", w + "d", w + "ed") for w in found):
        return ()
    return tuple(sorted(found, key=lambda w: (-freq[w], w)))


@lru_cache(maxsize=16384)
def slip_of_a_word(lower: str) -> bool:
    """A known slip (`misspelling`), or one slip of the hand from any word worth suggesting
    ("ccode", "ljnks"): a word's odd start is then the slip, not an identifier's."""
    return misspelling(lower) or any(map(fix_worthy, slipped_from(lower)))
