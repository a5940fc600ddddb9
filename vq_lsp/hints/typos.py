"""Typo detection: a dictionary says which words are suspect, the language model says which
close spelling the context wants.

A word's surprise is the sum over its subword pieces (-log p of the whole word, exact). Its
candidate fixes are dictionary words one edit away (swap, drop, insert, replace: what
pyspellchecker generates), and for a dictionary word, the other members of its confusion set
(their/there, lose/loose, form/from ...). Each candidate is scored with the LM head at the
word's position (the stored final hidden state of the previous token, no forward pass), and
a candidate of several pieces by the probability of the whole word: its first piece so, its
further pieces by a short forward pass over the text just before it (`continuation`), when it
could beat the best one-piece candidate (so `useful` beats `usefully`, `bought` beats `bough`).
The evidence is the gain, log p(best fix) - log p(word), in nats:

- a word missing from the dictionary is a "non-word" typo when the gain reaches the non-word
  threshold (the model rejects typos whose fix it does not believe in); without a dictionary
  word one edit away (two when none is one away) it is never one, nor when cheap evidence about
  the document excuses it (`Evidence.excuse`: a capitalised word inside a sentence (a name), a
  name or coinage used twice, dropped-g dialect, the plural of a word in -ing ("stylings"), a
  stretched word ("sooo", "loooong"), a rhyming pair ("loosey goosey", "higgledy-piggledy"), a
  piece of a contraction written with an accent or backtick for its apostrophe ("you´ve"), a
  spelling used twice or a short word with no vowel in a text with no capital letters (a
  lower-cased export, where names and acronyms show no capital), a form of a dictionary word the
  word list lacks ("lints"), a dictionary word with a prefix or suffix ("deallocate", "parsable"),
  a term the document introduces in emphasis and uses again ("A _struct_ is"), a short word
  before an abbreviation's period ("2006 est.)") or beside a number (a unit, "5.66 nats", or a
  label, "opset 17"), an entry of a list of short lines,
  code-like words in a technical document, and there jargon with no common word one edit away
  unless it is an unmistakable slip: a key struck twice, two letters swapped, a slip of a rare
  long word, whose fixes pyspellchecker counts too low to suggest otherwise ("compielr");
- a lower-case dictionary word is a "real-word" error when a confusable word gains at least the
  real-word threshold: a dictionary cannot see these at all. A word the words before already
  doubt is read on: the word and its partners are scored on the few words after it as well
  (`Detector._read_on`), since "quiet, orderly" and "quite, orderly" read alike up to the word.
  A capitalised one is never checked: it starts a sentence or a list item, where the left
  context the model reads says little about which of the pair follows, or it is a name or a
  title.

Every finding is worded here (`WordFinding.explain`), so that a hint's message, its quick fixes
and its hover name the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
from spellchecker import SpellChecker

MIN_FIX_FREQUENCY = 100  # a fix must be at least this common in pyspellchecker's list (it holds much junk)
MAX_FIXES = 3
# A word this common (pyspellchecker's counts) is one a misspelling is likely to be of: a spelling one edit
# from it (two for longer words) is no name or coinage, however often the document repeats it.
COMMON_FREQUENCY = 5000
# In a technical document a word used in its code is a typo only when one edit from a word this common
# ("teh" beside "the"), not from a merely common one ("stdin" beside "stain").
VERY_COMMON_FREQUENCY = 1_000_000
# Prefixes written with a hyphen ("pre-commit", "non-zero") that the word list lacks as words.
HYPHENED_PREFIXES = frozenset({"pre", "non", "multi", "semi", "anti", "sub", "inter", "intra", "post", "mis", "bi"})
# In a technical document these confusables are flagged only when their partner gains at least this
# much (nats), by pair (word written, partner): technical prose uses "off" ("off the event loop", "hand
# off"), "tail" in senses fiction rarely does, so the real-word threshold chosen where prose and reviews
# dominate would flag them. Every other pair keeps the real-word threshold: it already finds the swaps
# planted in technical text with few false alarms, and one flat threshold high enough for "off" missed
# a third of them ("form the station"). Fitted on Rust book chapters outside the test part and this
# repository's docs, `python -m benchmarks.quiet_prose --fit-real-word` (results/quiet_prose_real_word_fit.md).
TECHNICAL_MIN_GAIN = 0.0  # every other pair's finding needs at least this in a technical document
TECHNICAL_REAL_WORD_GAIN: dict[tuple[str, str], float] = {
    ("off", "of"): 4.75,
    ("tail", "tale"): 3.75,
    ("write", "right"): 3.5,
    ("lead", "led"): 4.0,
    ("affect", "effect"): 5.0,
    ("they're", "there"): 5.5,
}
# A word this long one edit from a word worth suggesting is a typo of it, not jargon, in any document
# ("signatues", "connsists"): long jargon is a compound or a prefixed word ("wildcard", "deallocated",
# "subshells"), two or more edits from any word, or used in the document's code.
LONG_WORD_LETTERS = 7
# A spelling one slip of the hand from a dictionary word this long, or this common (pyspellchecker's
# counts), is a slip of it: long words have few neighbours ("signatues"), common ones are typed
# often ("laso"); a short, rarer word so near is as likely a coincidence ("nats": hats 8,500).
SLIP_LETTERS = 6
SLIP_FREQUENCY = 100_000
TWO_EDIT_MIN_LETTERS = 5  # shorter words have too many dictionary words two edits away to guess among
# A candidate of several pieces is scored by its first piece (an upper bound) less this per further piece,
# so that "thea" (" the" + "a") does not tie with "the" itself.
EXTRA_PIECE_NATS = 2.0
# A confusable and its partners are also scored on the words after them, up to this many tokens (never
# past a line break): "quiet, orderly" and "quite, orderly" read alike up to the word itself.
WORDS_AFTER_TOKENS = 4
# ... when the words before leave the pair open: a gain of at least this (nats; -2: the partner at most
# 2 nats less likely). "of" is in every sentence, and each reading of the words after is a forward pass.
WORDS_AFTER_MIN_GAIN = -2.0

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


@dataclass(frozen=True)
class WordFinding:
    """One word the detector looked at closely, in character offsets of the text."""

    start: int
    end: int
    word: str
    surprise: float  # -log p(word | context), summed over its pieces (nats)
    kind: str  # "non-word" (not in the dictionary), "real-word" (a confusable dictionary word), "word" (neither)
    gain: float  # log p(best fix) - log p(word): how much likelier the best fix is (nats); -inf: no fix
    # (replacement, its log p here), likeliest first; a confusable read on (`Detector._read_on`) adds what
    # the replacement changes in the log p of the words after, so that gain = best score + surprise
    fixes: tuple[tuple[str, float], ...]
    excused: str = ""  # why it is never shown whatever its gain ("" when nothing excuses it)

    def likely(self) -> str:
        return ", ".join(repr(w) for w, _ in self.fixes) or "no close dictionary word"

    def explain(self) -> str:
        """The hint's message: a non-word is unlikely here; a real-word error is a confusable of its partner."""
        if self.kind == "real-word" and self.fixes:
            return (
                f"{self.word!r} may be a confusable of {self.fixes[0][0]!r} here ({self.gain:.1f} nats likelier: "
                f"{self.surprise:.1f} nats for {self.word!r}); likely: {self.likely()}"
            )
        return f"{self.word!r} is unlikely here: {self.surprise:.1f} nats; likely: {self.likely()}"

    def describe(self) -> str:
        """The same scores for a word no hint is shown for (hover), without alarming wording."""
        closest = f"; closest words: {self.likely()}" if self.fixes else ""
        why = f" ({self.excused})" if self.excused else ""
        return f"{self.word!r}: {self.surprise:.1f} nats here, no hint{why}{closest}"


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
# Marks written for an apostrophe between letters ("you´ve", "don`t"): a word split at one of them is
# judged whole (see `apostrophe_word`).
APOSTROPHE_LIKE = "´`ʼ"


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
        if lower.endswith(ending) and len(stem) >= 3 and not doubled and _fix_worthy(stem) and not misspelling(lower):
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
    if any(freq[w] >= COMMON_FREQUENCY for w in _close_lower(lower, 1)):
        return False
    if doubled_slip(lower) or swapped_slip(lower):
        return False
    for pre in PREFIXES:
        rest = lower[len(pre) :]
        if lower.startswith(pre) and len(rest) >= PREFIXED_MIN_REST and _fix_worthy(rest):
            return True
    for suf in SUFFIXES:
        if lower.endswith(suf):
            stem = lower[: -len(suf)]
            for base in (stem, stem + "e", stem[:-1] if stem[-1:] == "i" else stem):
                if len(base) >= DERIVED_MIN_STEM and _fix_worthy(base):
                    return True
    return False


def stretched(lower: str) -> bool:
    """A word stretched for emphasis ("sooo", "loooong", "nooooo"): a letter written three or more
    times in a row (no English word has one) that spells a dictionary word when written once or
    twice, and no dictionary word with just one of the letters dropped (then it is a doubled-letter
    typo: "ballloon", "goood")."""
    for m in re.finditer(r"([a-z])\1\1+", lower):
        a, b = m.span()
        if _fix_worthy(lower[:a] + lower[a + 1 :]):
            return False
        if any(is_word(lower[:a] + lower[a] * k + lower[b:]) for k in (1, 2)):
            return True
    return False


def _fix_worthy(lower: str) -> bool:
    return is_word(lower) and dictionary().word_frequency[lower] >= MIN_FIX_FREQUENCY


_ONSET = re.compile(r"[^aeiouy]*")  # the consonants before a word's first vowel
# A rhyming pair's words share at least this much after their first consonants: "oosey" in "loosey
# goosey", "iggledy" in "higgledy-piggledy", "ocus" in "hocus pocus". Shorter endings are shared by
# too many neighbours for a typo beside one to be told from a rhyme ("tthis is").
RHYME_MIN_LETTERS = 3


def rhyming_pair(text: str, a: int, b: int) -> bool:
    """Whether the word text[a:b] and the word just before or after it (one space or hyphen
    between) form a rhyming pair: "loosey goosey", "higgledy-piggledy", "hocus pocus", "okey dokey".
    Set phrases of this kind are missing from word lists and read as typos to the model."""
    word = text[a:b].lower()
    rhyme = word[_ONSET.match(word).end() :]
    if len(rhyme) < RHYME_MIN_LETTERS or doubled_slip(word):  # "gorilla ggorilla": a key struck twice
        return False
    before = re.search(r"([A-Za-z]+)[ -]$", text[max(0, a - 40) : a])
    after = re.match(r"[ -]([A-Za-z]+)", text[b : b + 40])
    for m in (before, after):
        if m:
            other = m.group(1).lower()
            if other != word and other[_ONSET.match(other).end() :] == rhyme:
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


@lru_cache(maxsize=16384)
def near_common(lower: str) -> bool:
    """Whether a common dictionary word (COMMON_FREQUENCY) is one edit away, or two for a word of
    TWO_EDIT_MIN_LETTERS or more."""
    freq = dictionary().word_frequency
    if any(freq[w] >= COMMON_FREQUENCY for w in _close_lower(lower, 1)):
        return True
    return len(lower) >= TWO_EDIT_MIN_LETTERS and any(freq[w] >= COMMON_FREQUENCY for w in _close_lower(lower, 2))


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
            if len(once) >= DOUBLED_MIN_LETTERS and _fix_worthy(once):
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


# What follows a key's name in a key chord: "alt-b", "ctrl+r", "alt-." (one key, then no letter).
_KEY_CHORD = re.compile(r"[-+](?:[A-Za-z](?![A-Za-z])|[^\sA-Za-z+-])")


@dataclass(frozen=True)
class Evidence:
    """What the whole document says about its words, beyond the dictionary: how often each
    spelling missing from the dictionary is used in its prose (lower-cased), those of them
    outside its prose (inline and fenced code, tables, link targets), and whether it is a
    technical document (one with such words). A capitalised non-word inside a sentence is a
    name in any document. In a technical document a code-like non-word is no typo: a file
    extension, a call, a key's name in a key chord (alt-b, ctrl+r), a word with no vowel or
    starting with consonants no English word starts with ("dtype"; "stdio" is "studio" less a letter),
    jargon with no common word one edit away (unless it is a long word one edit from any word
    worth suggesting), a word its code uses. A word one edit from a very common word is judged
    by the model's context even when the code uses it ("teh" in a table is as wrong as in
    prose). Cheap, so it is put together on every publish while the model's findings are
    reused."""

    uses: dict
    code_words: frozenset
    technical: bool
    writers: frozenset = frozenset()  # spellings the document makes the writer's words (hints/jargon.py)
    confusables: dict = field(default_factory=dict)  # lower-case confusable words of its prose -> uses
    # no capital letter anywhere in it (a lower-cased export): a name cannot be told by its capital, so a
    # spelling used twice or more is read as one unless it is a known slip (`misspelling`)
    uncased: bool = False

    def excuse(self, f: WordFinding, text: str) -> str:
        """Why a finding is never shown whatever its gain, or "" (non-words, and real-word
        findings in a technical document: `_real_word_excuse`)."""
        if f.kind == "real-word":
            return self._real_word_excuse(f)
        if f.kind != "non-word":
            return ""
        if deliberate(f.word, self.uses.get(f.word.lower(), 0)):
            return "used as a name or coinage"
        lower = f.word.lower()
        if self.uncased and self.uses.get(lower, 0) >= 2 and not misspelling(lower):
            return "used twice in a text without capitals: a name"
        if abbreviation(text, f.start, f.end, not self.uncased):
            return "an abbreviation"
        if beside_number(text, f.start, f.end) and not misspelling(lower):
            return "a unit or label beside a number"
        if list_entry(text, f.start, f.end) and not misspelling(lower):
            return "an entry of a list"
        if self.uncased and len(lower) <= ACRONYM_LETTERS and not any(c in "aeiouy" for c in lower):
            return "a lower-cased acronym"
        if f.word.islower() and f.word in self.writers:
            return "the writer's word: used consistently in this document"
        hyphened = text[f.end : f.end + 1] == "-" and text[f.end + 1 : f.end + 2].isalpha()
        if hyphened and f.word.lower() in HYPHENED_PREFIXES:
            return "a prefix joined by a hyphen"
        if ing_plural(f.word.lower()):
            return "the plural of a word in -ing"
        if inflected(lower):
            return "a form of a dictionary word"
        if derived(lower):
            return "a dictionary word with a prefix or suffix"
        if stretched(f.word.lower()):
            return "a word stretched for emphasis"
        if rhyming_pair(text, f.start, f.end):
            return "a rhyming pair"
        if apostrophe_word(text, f.start, f.end):
            return "part of a word with an apostrophe"
        if f.word[:1].isupper() and not starts_sentence(text, f.start):
            return "a name"
        if not self.technical:
            return self._term(f, text)
        if text[f.start - 1 : f.start] == "." or text[f.end : f.end + 1] in ("(", "_"):
            return "code-like"
        if _KEY_CHORD.match(text, f.end):
            return "code-like: a key chord"
        if not any(c in "aeiouy" for c in lower):
            return "code-like: no vowel"
        if _ONSET.match(lower).end() >= 2 and not english_onset(lower) and not slip_of_a_word(lower):
            return "code-like: no English word starts so"
        close = _close_lower(lower, 1)
        closest = max((dictionary().word_frequency[w] for w in close), default=0)
        if closest < COMMON_FREQUENCY and not jargon_blocked(lower, close):
            return "jargon: no common word one edit away"
        if lower in self.code_words and closest < VERY_COMMON_FREQUENCY:
            return "used as code in this document"
        return self._term(f, text)

    def _term(self, f: WordFinding, text: str) -> str:
        """The last excuse asked: a term the document introduces in emphasis (`introduced_term`).
        Last, because it searches the text: only a word nothing else excuses, used twice or more,
        gets that far, a few per publish."""
        if self.uses.get(f.word.lower(), 0) >= 2 and introduced_term(text, f.word.lower()):
            return "the writer's term: introduced in emphasis"
        return ""

    def _real_word_excuse(self, f: WordFinding) -> str:
        """A real-word hint in a technical document needs stronger evidence than in prose for the
        pairs whose word has a technical sense: a gain of `technical_gain` ("off the event loop"
        is not "of the event loop"), and such a word the document uses as its own vocabulary
        (more often than the partner suggested, and at least twice) is not confused with it
        ("write" among databases is not "right"). Only for those pairs: that a document says
        "then" more often than "than" says nothing about "rather then use"."""
        if not self.technical or not f.fixes:
            return ""
        if not technical_pair(f.word, f.fixes[0][0]):
            # a partner less likely than the word is no evidence at any sensible threshold; excused here,
            # a technical document's hundreds of such confusables never reach the hints' choice
            return "technical text: the partner is less likely" if f.gain < TECHNICAL_MIN_GAIN else ""
        if f.gain < technical_gain(f.word, f.fixes[0][0]):
            return "technical text: too little evidence for a confusable"
        own, partner = self.confusables.get(f.word, 0), self.confusables.get(f.fixes[0][0].lower(), 0)
        if own >= 2 and own > partner:
            return f"the document's own word: {f.word!r} used {own} times, {f.fixes[0][0]!r} {partner}"
        return ""


def introduced_term(text: str, lower: str) -> bool:
    """Whether the document writes `lower` alone in emphasis somewhere (`_struct_`, `*struct*`,
    `**struct**`), as a writer sets a term where they introduce it ("A _struct_, or _structure_,
    is ..."), and it is no slip of a very common word ("teh"). Nobody emphasises a typo: such a
    word used again is the document's term even when it is one slip from a common word
    ("struct" of "strict"), which `misspelling` keeps from the writer's words (hints/jargon.py).
    Asked only of a word used twice or more that nothing else excuses: a search of the text."""
    freq = dictionary().word_frequency
    if any(freq[w] >= VERY_COMMON_FREQUENCY for w in _close_lower(lower, 1)):
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


@lru_cache(maxsize=16384)
def slip_of_a_word(lower: str) -> bool:
    """A known slip (`misspelling`), or one slip of the hand from any word worth suggesting
    ("ccode", "ljnks"): a word's odd start is then the slip, not an identifier's."""
    return misspelling(lower) or any(map(_fix_worthy, slipped_from(lower)))


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
    return frozenset(_ONSET.match(w).group() for w, n in freq.items() if n >= MIN_FIX_FREQUENCY and w.isalpha())


def english_onset(lower: str) -> bool:
    """Whether some dictionary word starts with the consonants `lower` starts with: "dtype" and
    "stdio" start as no English word does (identifiers; a slip that does, "dtermine", "ccode", is
    caught by `slip_of_a_word` first)."""
    return _ONSET.match(lower).group() in _onsets()


def jargon_blocked(lower: str, close: Sequence[str]) -> bool:
    """Whether a technical document's word with no common word one edit away is still no jargon:
    a long word one edit from any word worth suggesting ("signatues"), or an unmistakable slip
    (`unmistakable_slip`: "rowss" of "rows", "elt's" of "let's", "compielr" of "compiler").
    Typos of the many technical words pyspellchecker counts as uncommon ("rows", "module",
    "compiler") were all excused as jargon."""
    if len(lower) >= LONG_WORD_LETTERS and any(map(_fix_worthy, close)):
        return True
    return unmistakable_slip(lower.replace("’", "'"))


def swapped_slip(lower: str) -> bool:
    """Whether `lower` is a word worth suggesting of SWAP_MIN_LETTERS or more with two neighbouring
    letters swapped ("elt's" of "let's", "ersources")."""
    for i in range(len(lower) - 1):
        w = lower[:i] + lower[i + 1] + lower[i] + lower[i + 2 :]
        if w != lower and len(w) >= SWAP_MIN_LETTERS and _fix_worthy(w):
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
    return any(freq[w] >= VERY_COMMON_FREQUENCY for w in _close_lower(lower, 1))


def technical_pair(word: str, partner: str) -> bool:
    """Whether technical prose gives this confusable a sense of its own (TECHNICAL_REAL_WORD_GAIN)."""
    return (word.lower(), partner.lower()) in TECHNICAL_REAL_WORD_GAIN


def technical_gain(word: str, partner: str) -> float:
    """The gain (nats) a technical document's real-word finding needs before the real-word
    threshold is asked: TECHNICAL_REAL_WORD_GAIN for its pair, else none (-inf)."""
    return TECHNICAL_REAL_WORD_GAIN.get((word.lower(), partner.lower()), float("-inf"))


def starts_sentence(text: str, at: int) -> bool:
    """Whether the word at `at` starts a sentence, a line or a list item."""
    k = at - 1
    while k >= 0 and text[k] in " \t\"'([*_“‘":
        k -= 1
    if k < 0 or text[k] in ".!?:\n\r":
        return True
    return text[k] in "-+>#" and (k == 0 or text[k - 1] in "\n\t ")


def excused(findings: Iterable[WordFinding], evidence: Evidence, text: str) -> list[WordFinding]:
    """The findings with their excuse (if any) under this document's evidence."""
    out = []
    for f in findings:
        why = evidence.excuse(f, text)
        out.append(f if why == f.excused else replace(f, excused=why))
    return out


def match_case(like: str, word: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def close_words(word: str, distance: int = 1) -> list[str]:
    """Dictionary words `distance` edits away (1 or 2), commonest first, in the word's case."""
    return [match_case(word, w) for w in _close_lower(word.lower(), distance)]


def fix_candidates(word: str) -> list[str]:
    """A non-word's candidate fixes: dictionary words one edit away, or two when none is one
    away and the word is long enough to guess from (begginers, mispeled), then the rare long
    words it is one slip of the hand from (`long_slips`: "compielr" of "compiler")."""
    near = close_words(word)
    if not near and len(word) >= TWO_EDIT_MIN_LETTERS:
        near = close_words(word, 2)
    rare = [match_case(word, w) for w in long_slips(word.lower())]
    return _unique(near + rare) if rare else near


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
def _close_lower(lower: str, distance: int) -> tuple[str, ...]:
    """Cached: the server re-examines the same words on every publish."""
    spell = dictionary()
    freq = spell.word_frequency
    if distance == 1:
        found = [w for w in spell.known(spell.edit_distance_1(lower)) if w != lower and freq[w] >= MIN_FIX_FREQUENCY]
    else:
        found = [w for w in _two_edits(lower) if w != lower]
    found.sort(key=lambda w: (-freq[w], w))
    return tuple(found)


class DeleteIndex:
    """Fix-worthy dictionary words (MIN_FIX_FREQUENCY) by themselves and by each of their
    one-letter deletions: words two edits away are found from a word's one-edit variants
    through it, in milliseconds, where pyspellchecker's two-edit search takes seconds.

    Kept as two sorted arrays (the 64-bit hash of each key, the word it leads to) instead of a
    dict of strings to tuples: the dict took about 105 MB of the server's memory, the arrays
    take a few. Two keys with one hash only add candidates, and `_two_edits` keeps only words
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


def _two_edits(lower: str) -> set[str]:
    """Fix-worthy dictionary words at most two edits (insert, delete, replace, swap) from `lower`."""
    keys = []
    for e in dictionary().edit_distance_1(lower):
        keys.append(e)
        keys.extend(e[:i] + e[i + 1 :] for i in range(len(e)))
    found = _one_delete_index().lookup(keys)
    return {w for w in found if _edit_distance(lower, w) <= 2}


def _edit_distance(a: str, b: str) -> int:
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


def token_span(text: str, starts: np.ndarray, n_tokens: int, a: int, b: int) -> tuple[int, int] | None:
    """Tokens [i, j) that are exactly the word text[a:b] (plus leading whitespace on the first);
    None when a token straddles the word's edge (glued to punctuation or digits)."""
    spans = word_tokens(text, starts, n_tokens, [(a, b)])
    return spans[0][2:4] if spans else None


def word_tokens(text: str, starts: np.ndarray, n_tokens: int, words: Sequence[tuple[int, int]]):
    """(a, b, i, j) for each word text[a:b] whose tokens [i, j) are its own (see token_span),
    in one vectorised search: the server does this for every prose word on every publish."""
    if not len(words) or not n_tokens:
        return []
    starts = np.asarray(starts[:n_tokens])
    ab = np.asarray(words, dtype=np.int64).reshape(-1, 2)
    i = np.searchsorted(starts, ab[:, 0], "right") - 1
    j = np.searchsorted(starts, ab[:, 1], "left")
    ok = (i >= 0) & (j > i)
    ok &= (j >= n_tokens) | (starts[np.minimum(j, n_tokens - 1)] == ab[:, 1])
    out = []
    for k in np.flatnonzero(ok).tolist():
        a, b, ti = int(ab[k, 0]), int(ab[k, 1]), int(i[k])
        if not text[int(starts[ti]) : a].strip():
            out.append((a, b, ti, int(j[k])))
    return out


class Detector:
    """Finds typos in a document's words from its per-token surprise and the LM head."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._first = lru_cache(maxsize=65536)(self._first_and_count)
        self._pieces = lru_cache(maxsize=65536)(self._piece_ids)

    def _first_and_count(self, lead: str, word: str) -> tuple[int, int]:
        ids = self.tokenizer.encode(lead + word)
        return ids[0], len(ids)

    def _piece_ids(self, lead: str, word: str) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(lead + word))

    def candidates(self, word: str, known: bool) -> list[str]:
        """Close dictionary words for a non-word (`fix_candidates`), the confusion set for a dictionary word."""
        if known:
            return [match_case(word, c) for c in CONFUSABLE.get(word.lower(), ())]
        return fix_candidates(word)

    def examine(
        self,
        text: str,
        starts: Sequence[int],
        surprise: np.ndarray,
        words: Iterable[tuple[int, int]],
        logprobs: Callable,
        force: bool = False,
        resolved: bool = False,
        continuation: Callable | None = None,
    ) -> list[WordFinding]:
        """Findings for the suspect words among `words` ((start, end) character spans): every
        non-word with a close dictionary word and every lower-case confusable word; what the
        document excuses is decided later (`Evidence`), from the whole document.
        `logprobs(indices, candidate_ids)` gives the log-probabilities of candidate tokens at
        those token indices (IncrementalDocument.next_token_logprobs). With `force`, every word
        gets a finding (hover, quick fixes): a suspect word the same one as without `force`, any
        other word its closest dictionary words, for the scores only. `resolved`: `words` are
        already word_tokens' (start, end, first token, end token) spans. `continuation(jobs)`
        gives, for each (token index, piece ids), the log-probability of the pieces after the
        first given the first (without it: a fixed EXTRA_PIECE_NATS per further piece, only
        one-piece partners of a confusable, and no reading on over the words after it)."""
        starts = np.asarray(starts)
        spans = list(words) if resolved else word_tokens(text, starts, len(surprise), list(words))
        cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
        todo, ends = [], []
        for a, b, i, j in spans:
            word = text[a:b]
            known = is_word(word)
            suspect = not known or reads_on(word)
            if not suspect and not force:
                continue
            cands = (
                self.candidates(word, known) if suspect else _unique(self.candidates(word, known) + close_words(word))
            )
            lead = text[int(starts[i]) : a]
            pieces = [(c, *self._first(lead, c)) for c in cands]
            if known and continuation is None:  # a multi-piece confusable's first piece alone would overstate it
                confusable = CONFUSABLE.get(word.lower(), ())
                pieces = [p for p in pieces if p[2] == 1 or p[0].lower() not in confusable]
            if not pieces and not force:
                continue
            kind = "real-word" if known and suspect else "non-word" if not known else "word"
            todo.append((a, b, word, i, float(cumulative[j] - cumulative[i]), kind, pieces, lead))
            ends.append(j)
        if not todo:
            return []
        scores = logprobs([t[3] for t in todo], [[first for _, first, _ in t[6]] for t in todo])
        firsts = [np.asarray(lp, dtype=np.float64) for lp in scores]
        rest = self._further_pieces(todo, firsts, continuation)
        out = []
        for n, ((a, b, word, _, s, kind, pieces, _), lp) in enumerate(zip(todo, firsts)):
            scored = sorted(
                (
                    (c, float(lp[k]) + rest.get((n, k), -EXTRA_PIECE_NATS * (count - 1)))
                    for k, (c, _, count) in enumerate(pieces)
                ),
                key=lambda t: -t[1],
            )
            gain = (scored[0][1] + s) if scored else float("-inf")
            out.append(WordFinding(a, b, word, s, kind, gain, tuple(scored[:MAX_FIXES])))
        return self._read_on(text, starts, surprise, out, todo, firsts, ends, continuation)

    def _read_on(self, text, starts, surprise, out, todo, firsts, ends, continuation) -> list[WordFinding]:
        """The real-word findings rescored on the words after them too (at most WORDS_AFTER_TOKENS
        tokens, `_words_after`). The word and each partner x is scored as log p(x's first piece)
        at the word's position (the state's LM head) plus log p(x's further pieces, the words
        after | x's first piece) from one short forward pass each (`continuation`), so the word
        and its partners are read the same way, several pieces or one; a fix's score is then
        kept such that gain = score of the best fix + surprise, as everywhere. The words before
        alone cannot tell "quiet, orderly" from "quite, orderly"; the words after also clear a
        confusable the words before only seemed to doubt. Only a word whose gain from the words
        before reaches WORDS_AFTER_MIN_GAIN is read on."""
        if continuation is None:
            return out
        jobs, chosen = [], []
        for n, (f, t, j) in enumerate(zip(out, todo, ends)):
            i, lead, pieces = t[3], t[7], t[6]
            if f.kind != "real-word" or not f.fixes or f.gain < WORDS_AFTER_MIN_GAIN:
                continue
            after = _words_after(text, starts, len(surprise), j)
            if not after:
                continue
            tail = list(self._pieces("", after))
            first_lp = {c: float(firsts[n][k]) for k, (c, _, _) in enumerate(pieces)}
            readings = [(f.word, -float(surprise[i]))] + [(c, first_lp[c]) for c, _ in f.fixes]
            for word, _ in readings:
                jobs.append((i, [*self._pieces(lead, word), *tail]))
            chosen.append((n, readings))
        if not jobs:
            return out
        got = iter(continuation(jobs))
        for n, readings in chosen:
            f = out[n]
            totals = [(word, lp + next(got)) for word, lp in readings]
            on_word = totals[0][1]
            fixes = sorted(((c, total - on_word - f.surprise) for c, total in totals[1:]), key=lambda t: -t[1])
            out[n] = replace(f, fixes=tuple(fixes), gain=fixes[0][1] + f.surprise)
        return out

    def _further_pieces(self, todo, firsts, continuation) -> dict[tuple[int, int], float]:
        """log p of the further pieces of the several-piece candidates that could still win
        (their first piece alone beats the best one-piece candidate), by (word, candidate)."""
        if continuation is None:
            return {}
        jobs, keys = [], []
        for n, ((*_, i, _, _, pieces, lead), lp) in enumerate(zip(todo, firsts)):
            best_single = max((float(lp[k]) for k, (_, _, count) in enumerate(pieces) if count == 1), default=-np.inf)
            for k, (c, _, count) in enumerate(pieces):
                if count > 1 and float(lp[k]) > best_single:
                    jobs.append((i, list(self._pieces(lead, c))))
                    keys.append((n, k))
        return dict(zip(keys, continuation(jobs))) if jobs else {}


def reads_on(word: str) -> bool:
    """Whether the detector's finding on this dictionary word depends on the words after it
    (a lower-case confusable, `Detector._read_on`)."""
    return word.islower() and word in CONFUSABLE


def _words_after(text: str, starts: Sequence[int], n_tokens: int, j: int) -> str:
    """The text of at most WORDS_AFTER_TOKENS tokens from token j on, stopping before the first
    that holds a line break (a paragraph's findings depend on its own text only), and never
    ending inside a word: a word the token limit cuts is left out, and so is a last word that
    ends the paragraph without punctuation. That is the word being typed, and reading on over
    each of its letters would cost a forward pass per keystroke for a word not written yet (a
    finished paragraph ends in punctuation)."""
    k, last = j, min(j + WORDS_AFTER_TOKENS, n_tokens)
    while k < last:
        end = int(starts[k + 1]) if k + 1 < n_tokens else len(text)
        if "\n" in text[int(starts[k]) : end]:
            break
        k += 1
    stop = int(starts[k]) if k < n_tokens else len(text)
    at_end = k == n_tokens or "\n" in text[stop : int(starts[k + 1]) if k + 1 < n_tokens else len(text)]
    if k > j and text[stop - 1].isalnum() and (at_end or text[stop : stop + 1].isalnum()):
        while k > j and not text[int(starts[k - 1])].isspace():
            k -= 1
        k = max(k - 1, j)  # the last word's first token (it starts with its space) goes too
    return text[int(starts[j]) : int(starts[k]) if k < n_tokens else len(text)] if k > j else ""


def _unique(words: list[str]) -> list[str]:
    seen, out = set(), []
    for c in words:
        if c.lower() not in seen:
            seen.add(c.lower())
            out.append(c)
    return out


def flagged(f: WordFinding, non_word_threshold: float, real_word_threshold: float) -> bool:
    """Whether a finding is shown as a typo under these thresholds (nats of gain): a non-word or
    real-word finding that nothing excuses (a "word" finding only describes a word, for hover)."""
    if f.excused or f.kind == "word":
        return False
    return f.gain >= (non_word_threshold if f.kind == "non-word" else real_word_threshold)
