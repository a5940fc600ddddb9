"""What the whole document says about its words (`Evidence`), and why a finding is never shown
under it (`Evidence.excuse`, asking the rules of excuses.py in order; `excused`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from .excuses import (
    ACRONYM_LETTERS,
    ONSET,
    abbreviation,
    apostrophe_word,
    beside_number,
    deliberate,
    derived,
    english_onset,
    inflected,
    ing_plural,
    introduced_term,
    jargon_blocked,
    list_entry,
    rhyming_pair,
    starts_sentence,
    stretched,
)
from .finding import WordFinding
from .slips import misspelling, slip_of_a_word
from .words import COMMON_FREQUENCY, VERY_COMMON_FREQUENCY, close_lower, dictionary

# Prefixes written with a hyphen ("pre-commit", "non-zero") that the word list lacks as words.
HYPHENED_PREFIXES = frozenset({"pre", "non", "multi", "semi", "anti", "sub", "inter", "intra", "post", "mis", "bi"})
# In a technical document these confusables are flagged only when their partner gains at least this
# much (nats), by pair (word written, partner): technical prose uses "off" ("off the event loop", "hand
# off"), "tail" in senses fiction rarely does, so the real-word threshold chosen where prose and reviews
# dominate would flag them. Every other pair keeps the real-word threshold: it already finds the swaps
# planted in technical text with few false alarms, and one flat threshold high enough for "off" missed
# a third of them ("form the station"). Fitted for the bundled model on Rust book chapters outside the
# test part and this repository's docs, `python -m benchmarks.quiet_prose --fit-real-word`
# (results/quiet_prose_real_word_fit.md).
TECHNICAL_MIN_GAIN = 0.0  # every other pair's finding needs at least this in a technical document
TECHNICAL_REAL_WORD_GAIN: dict[tuple[str, str], float] = {
    ("off", "of"): 5.0,
    ("of", "off"): 4.0,
    ("tail", "tale"): 4.75,
    ("write", "right"): 4.5,
    ("affect", "effect"): 5.0,
    ("they're", "there"): 5.5,
    ("later", "latter"): 3.75,
    ("than", "then"): 4.5,
    ("past", "passed"): 3.5,
}


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
        if ONSET.match(lower).end() >= 2 and not english_onset(lower) and not slip_of_a_word(lower):
            return "code-like: no English word starts so"
        close = close_lower(lower, 1)
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


def technical_pair(word: str, partner: str) -> bool:
    """Whether technical prose gives this confusable a sense of its own (TECHNICAL_REAL_WORD_GAIN)."""
    return (word.lower(), partner.lower()) in TECHNICAL_REAL_WORD_GAIN


def technical_gain(word: str, partner: str) -> float:
    """The gain (nats) a technical document's real-word finding needs before the real-word
    threshold is asked: TECHNICAL_REAL_WORD_GAIN for its pair, else none (-inf)."""
    return TECHNICAL_REAL_WORD_GAIN.get((word.lower(), partner.lower()), float("-inf"))


def excused(findings: Iterable[WordFinding], evidence: Evidence, text: str) -> list[WordFinding]:
    """The findings with their excuse (if any) under this document's evidence."""
    out = []
    for f in findings:
        why = evidence.excuse(f, text)
        out.append(f if why == f.excused else replace(f, excused=why))
    return out
