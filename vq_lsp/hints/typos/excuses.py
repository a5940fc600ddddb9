"""The rules that excuse a non-word as the writer's, one function each, from the word and the text
around it: dialect and names used twice, forms and derivations of dictionary words, stretched
words, rhyming pairs, apostrophes written as accents, introduced terms, abbreviations, units and
labels beside numbers, list entries, consonant onsets no English word has, and whether a
sentence starts at a word. `Evidence.excuse` (evidence.py) asks them in order."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from .slips import LONG_WORD_LETTERS, doubled_slip, misspelling, near_common, swapped_slip, unmistakable_slip
from .words import (
    COMMON_FREQUENCY,
    MIN_FIX_FREQUENCY,
    VERY_COMMON_FREQUENCY,
    close_lower,
    dictionary,
    fix_worthy,
    is_word,
)

# Marks written for an apostrophe between letters ("you´ve", "don`t"): a word split at one of them is
# judged whole (see `apostrophe_word`).
APOSTROPHE_LIKE = "´`ʼ"


def deliberate(word: str, uses: int) -> bool:
    """A non-word written on purpose, by cheap evidence: dropped-g dialect ("mornin", "goin'"),
    or the same spelling used twice or more in the document when it is a name (capitalised) or
    a coinage (no common word close to it). A lower-case spelling one edit from a common word
    ("recieve", "teh"), or two from a longer one, or one slip of the hand from a long or common
    word (`misspelling`: "unsgined"), is a misspelling however often it is repeated. The model
    alone reads names as typos: it does not learn a name from the document."""
    lower = word.lower().rstrip("'’")
    if lower.endswith("in") and is_word(lower + "g"):
        return True
    return uses >= 2 and (word[:1].isupper() or not (near_common(lower) or misspelling(lower)))


def ing_plural(lower: str) -> bool:
    """The plural of a dictionary word in -ing ("stylings", "chantings"): the word list holds only
    some of them."""
    return lower.endswith("ings") and lower[:-1] in dictionary()


@lru_cache(maxsize=16384)
def inflected(lower: str) -> bool:
    """A dictionary word with -s, -ed or -ing ("lints", "linted", "linting" of "lint"): the word
    list holds only some forms, and the model, reading the form once, likes a commoner word one
    edit away ("lines"). A known slip (`misspelling`: "thes" of "these") is still one."""
    for ending in ("s", "ed", "ing"):
        stem = lower[: -len(ending)]
        doubled = ending == "s" and stem.endswith("s")  # "viewss": a doubled letter
        if lower.endswith(ending) and len(stem) >= 3 and not doubled and fix_worthy(stem) and not misspelling(lower):
            return True
    return False


# Prefixes and suffixes that make new words of any word; the word list holds only some of what they make.
PREFIXES = ("de", "re", "un", "non", "pre", "sub", "over", "under", "mis", "dis", "co", "inter", "multi", "semi")
SUFFIXES = ("able", "ible", "ness", "less", "ly", "er", "ers", "ism", "ist", "ment", "ful")
DERIVED_MIN_STEM = 4  # the dictionary word a derived word is made of: shorter ones make typos by chance
PREFIXED_MIN_REST = 6  # "deallocate" of "allocate"; "deaches" ("de" + "aches") is a typo of "reaches"


@lru_cache(maxsize=16384)
def derived(lower: str) -> bool:
    """A word made of a dictionary word worth suggesting by a prefix or a suffix the word list lacks:
    "deallocated", "unfretted" (de-, un-: PREFIXES, of a word of PREFIXED_MIN_REST letters or
    more), "parsable" (parse, its final e dropped), "loathness", "serenaders" (SUFFIXES, of a word
    of DERIVED_MIN_STEM or more). The model, reading the new word once, prefers a common word a
    letter away ("reallocated", "passable"); a typo seldom lands on a whole word and an affix. A
    spelling one edit from a common word is that word misspelt ("happyness" of "happiness"), and a
    word with a doubled or swapped letter is a slip ("charless": "charles", not "char" + "less")."""
    freq = dictionary().word_frequency
    if any(freq[w] >= COMMON_FREQUENCY for w in close_lower(lower, 1)):
        return False
    if doubled_slip(lower) or swapped_slip(lower):
        return False
    for pre in PREFIXES:
        rest = lower[len(pre) :]
        if lower.startswith(pre) and len(rest) >= PREFIXED_MIN_REST and fix_worthy(rest):
            return True
    for suf in SUFFIXES:
        if lower.endswith(suf):
            stem = lower[: -len(suf)]
            for base in (stem, stem + "e", stem[:-1] if stem[-1:] == "i" else stem):
                if len(base) >= DERIVED_MIN_STEM and fix_worthy(base):
                    return True
    return False


def stretched(lower: str) -> bool:
    """A word stretched for emphasis ("sooo", "loooong", "nooooo"): a letter written three or more
    times in a row (no English word has one) that spells a dictionary word when written once or
    twice, and no dictionary word with just one of the letters dropped (then it is a doubled-letter
    typo: "ballloon", "goood")."""
    for m in re.finditer(r"([a-z])\1\1+", lower):
        a, b = m.span()
        if fix_worthy(lower[:a] + lower[a + 1 :]):
            return False
        if any(is_word(lower[:a] + lower[a] * k + lower[b:]) for k in (1, 2)):
            return True
    return False


ONSET = re.compile(r"[^aeiouy]*")  # the consonants before a word's first vowel
# A rhyming pair's words share at least this much after their first consonants: "oosey" in "loosey
# goosey", "iggledy" in "higgledy-piggledy", "ocus" in "hocus pocus". Shorter endings are shared by
# too many neighbours for a typo beside one to be told from a rhyme ("tthis is").
RHYME_MIN_LETTERS = 3


def rhyming_pair(text: str, a: int, b: int) -> bool:
    """Whether the word text[a:b] and the word just before or after it (one space or hyphen
    between) form a rhyming pair: "loosey goosey", "higgledy-piggledy", "hocus pocus", "okey dokey".
    Set phrases of this kind are missing from word lists and read as typos to the model."""
    word = text[a:b].lower()
    rhyme = word[ONSET.match(word).end() :]
    if len(rhyme) < RHYME_MIN_LETTERS or doubled_slip(word):  # "gorilla ggorilla": a key struck twice
        return False
    before = re.search(r"([A-Za-z]+)[ -]$", text[max(0, a - 40) : a])
    after = re.match(r"[ -]([A-Za-z]+)", text[b : b + 40])
    for m in (before, after):
        if m:
            other = m.group(1).lower()
            if other != word and other[ONSET.match(other).end() :] == rhyme:
                return True
    return False


def apostrophe_word(text: str, a: int, b: int) -> bool:
    """Whether text[a:b] is a piece of a word written with an accent or backtick for its
    apostrophe ("you´ve", "isn´t", "film`s") that is a word with the apostrophe in its place."""
    lo, hi = a, b
    while lo >= 2 and text[lo - 1] in APOSTROPHE_LIKE and text[lo - 2].isalpha():
        lo -= 2
        while lo > 0 and text[lo - 1].isalpha():
            lo -= 1
    while hi + 1 < len(text) and text[hi] in APOSTROPHE_LIKE and text[hi + 1].isalpha():
        hi += 2
        while hi < len(text) and text[hi].isalpha():
            hi += 1
    if (lo, hi) == (a, b):
        return False
    whole = text[lo:hi]
    for mark in APOSTROPHE_LIKE:
        whole = whole.replace(mark, "'")
    return is_word(whole)


def introduced_term(text: str, lower: str) -> bool:
    """Whether the document writes `lower` alone in emphasis somewhere (`_struct_`, `*struct*`,
    `**struct**`), as a writer sets a term where they introduce it ("A _struct_, or _structure_,
    is ..."), and it is no slip of a very common word ("teh"). Nobody emphasises a typo: such a
    word used again is the document's term even when it is one slip from a common word
    ("struct" of "strict"), which `misspelling` keeps from the writer's words (hints/jargon.py).
    Asked only of a word used twice or more that nothing else excuses: a search of the text."""
    freq = dictionary().word_frequency
    if any(freq[w] >= VERY_COMMON_FREQUENCY for w in close_lower(lower, 1)):
        return False
    return re.search(rf"(?<![\w*])([_*]{{1,2}}){re.escape(lower)}\1(?![\w*])", text, re.IGNORECASE) is not None


# An abbreviation's period is followed by a digit or by punctuation inside a sentence ("2006 est.)",
# "approx. 5,000", "pp. 3-4"), or, in a text with capitals, by a lower-case word ("subsp. indica").
ABBREVIATION_LETTERS = 6
_AFTER_ABBREVIATION = re.compile(r"\.(?: ?[\d),;:]| +[a-z])")


def abbreviation(text: str, a: int, b: int, cased: bool) -> bool:
    """Whether the non-word text[a:b] is written as an abbreviation: a short word whose period
    does not end the sentence (see _AFTER_ABBREVIATION; a lower-case word after it only counts in
    a text with capitals). Even a known slip's spelling is one there ("est." beside "set")."""
    m = _AFTER_ABBREVIATION.match(text, b)
    return b - a <= ABBREVIATION_LETTERS and m is not None and (cased or not m.group()[-1].isalpha())


# A short non-word right after a number is its unit ("5.66 nats", "10 atm", "4000 bc"), right before
# one a label ("opset 17"); a known slip (`misspelling`) there is still a typo ("5 yeras").
NUMBER_WORD_LETTERS = 6
_NUMBER_BEFORE = re.compile(r"\d(?:[.,]\d+)?[- \u00a0]?$")
_NUMBER_AFTER = re.compile(r"[ \u00a0]\d")


def beside_number(text: str, a: int, b: int) -> bool:
    """Whether the word text[a:b] is short and written just after or just before a number."""
    if b - a > NUMBER_WORD_LETTERS:
        return False
    return bool(_NUMBER_BEFORE.search(text[max(0, a - 16) : a]) or _NUMBER_AFTER.match(text, b))


# A line of at most this many words with no sentence's end, beside another such line, is an entry of a
# list (of islands, of terms): mostly names, with no sentence around them for the model to read.
LIST_ENTRY_WORDS = 3
ACRONYM_LETTERS = 4  # a word with no vowel this short is an acronym written in lower case ("tv", "nl")


def _short_line(line: str) -> bool:
    words = line.split()
    return 0 < len(words) <= LIST_ENTRY_WORDS and line.rstrip()[-1] not in ".!?:;"


def list_entry(text: str, a: int, b: int) -> bool:
    """Whether the word text[a:b] is on a short line (LIST_ENTRY_WORDS) right after or before
    another short line: "panaitan" among " banten / panaitan / sangiang". A heading is one short
    line between paragraphs, and stays checked."""
    start = text.rfind("\n", 0, a) + 1
    end = text.find("\n", b)
    end = len(text) if end < 0 else end
    if not _short_line(text[start:end]):
        return False
    before = text[text.rfind("\n", 0, max(start - 1, 0)) + 1 : max(start - 1, 0)] if start > 0 else ""
    after_end = text.find("\n", end + 1)
    after = text[end + 1 : len(text) if after_end < 0 else after_end] if end < len(text) else ""
    return _short_line(before) or _short_line(after)


@lru_cache(maxsize=1)
def _onsets() -> frozenset[str]:
    freq = dictionary().word_frequency
    return frozenset(ONSET.match(w).group() for w, n in freq.items() if n >= MIN_FIX_FREQUENCY and w.isalpha())


def english_onset(lower: str) -> bool:
    """Whether some dictionary word starts with the consonants `lower` starts with: "dtype" and
    "stdio" start as no English word does (identifiers; a slip that does, "dtermine", "ccode", is
    caught by `slip_of_a_word` first)."""
    return ONSET.match(lower).group() in _onsets()


def jargon_blocked(lower: str, close: Sequence[str]) -> bool:
    """Whether a technical document's word with no common word one edit away is still no jargon:
    a long word one edit from any word worth suggesting ("signatues"), or an unmistakable slip
    (`unmistakable_slip`: "rowss" of "rows", "elt's" of "let's", "compielr" of "compiler").
    Typos of the many technical words pyspellchecker counts as uncommon ("rows", "module",
    "compiler") were all excused as jargon."""
    if len(lower) >= LONG_WORD_LETTERS and any(map(fix_worthy, close)):
        return True
    return unmistakable_slip(lower.replace("’", "'"))


def starts_sentence(text: str, at: int) -> bool:
    """Whether the word at `at` starts a sentence, a line or a list item."""
    k = at - 1
    while k >= 0 and text[k] in " \t\"'([*_“‘":
        k -= 1
    if k < 0 or text[k] in ".!?:\n\r":
        return True
    return text[k] in "-+>#" and (k == 0 or text[k - 1] in "\n\t ")
