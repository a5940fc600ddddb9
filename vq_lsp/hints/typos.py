"""Typo detection: a dictionary says which words are suspect, the language model says which
close spelling the context wants.

A word's surprise is the sum over its subword pieces (-log p of the whole word, exact). Its
candidate fixes are dictionary words one edit away (swap, drop, insert, replace: what
pyspellchecker generates), and for a dictionary word, the other members of its confusion set
(their/there, lose/loose, form/from ...). Each candidate is scored with the LM head at the
word's position (the stored final hidden state of the previous token, no forward pass):
exactly for a candidate that is one token, and by its first piece less a fixed cost per further
piece otherwise.
The evidence is the gain, log p(best fix) - log p(word), in nats:

- a word missing from the dictionary is a "non-word" typo when the gain reaches the non-word
  threshold (the model rejects typos whose fix it does not believe in); without a close
  dictionary word it is never one, nor when cheap evidence says it is deliberate (`deliberate`:
  a spelling used twice, dropped-g dialect);
- a dictionary word is a "real-word" error when a confusable, single-token word gains at least
  the real-word threshold: a dictionary cannot see these at all.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np
from spellchecker import SpellChecker

MIN_FIX_FREQUENCY = 100  # a fix must be at least this common in pyspellchecker's list (it holds much junk)
MAX_FIXES = 3
# A candidate of several pieces is scored by its first piece (an upper bound) less this per further piece,
# so that "thea" (" the" + "a") does not tie with "the" itself.
EXTRA_PIECE_NATS = 2.0

CONFUSION_SETS: tuple[tuple[str, ...], ...] = (
    ("their", "there", "they're"), ("your", "you're"), ("its", "it's"), ("then", "than"), ("lose", "loose"),
    ("form", "from"), ("affect", "effect"), ("were", "where", "we're"), ("whether", "weather"), ("quite", "quiet"),
    ("accept", "except"), ("advice", "advise"), ("breath", "breathe"), ("principal", "principle"),
    ("passed", "past"), ("whose", "who's"), ("chose", "choose"), ("later", "latter"), ("of", "off"),
    ("peace", "piece"), ("hear", "here"), ("brake", "break"), ("weak", "week"), ("whole", "hole"),
    ("though", "through", "thought"), ("lead", "led"), ("desert", "dessert"), ("sight", "site"), ("now", "know"),
    ("new", "knew"), ("right", "write"), ("which", "witch"), ("dose", "does"), ("wander", "wonder"),
    ("cloth", "clothe"), ("tale", "tail"), ("plain", "plane"), ("role", "roll"), ("bare", "bear"),
)
CONFUSABLE: dict[str, tuple[str, ...]] = {w: tuple(o for o in group if o != w) for group in CONFUSION_SETS
                                          for w in group}


@dataclass(frozen=True)
class WordFinding:
    """One word the detector looked at closely, in character offsets of the text."""

    start: int
    end: int
    word: str
    surprise: float  # -log p(word | context), summed over its pieces (nats)
    kind: str  # "non-word" (not in the dictionary) or "real-word" (a confusable dictionary word)
    gain: float  # log p(best fix) - log p(word): how much likelier the best fix is (nats); -inf: no fix
    fixes: tuple[tuple[str, float], ...]  # (replacement, its log p here), likeliest first

    def explain(self) -> str:
        likely = ", ".join(repr(w) for w, _ in self.fixes) or "no close dictionary word"
        return f"{self.word!r} is unlikely here: {self.surprise:.1f} nats; likely: {likely}"


@lru_cache(maxsize=1)
def dictionary() -> SpellChecker:
    """pyspellchecker's bundled English word list (loaded once, about 0.3 s)."""
    return SpellChecker(language="en", distance=1)


_BRITISH = ((re.compile(r"our"), "or"), (re.compile(r"is(e|ed|es|ing|ation|ations)$"), r"iz\1"),
            (re.compile(r"ence$"), "ense"), (re.compile(r"tre(s?)$"), r"ter\1"),
            (re.compile(r"ll(ed|ing|er|ers)$"), r"l\1"), (re.compile(r"ogue(s?)$"), r"og\1"))


@lru_cache(maxsize=65536)
def is_word(word: str) -> bool:
    """In the dictionary, or not an ordinary lower/Title-case word (acronyms, CamelCase: not ours).
    The word list is American: a British spelling (colour, realise, offence, centre, travelled)
    of a listed word counts as a word too."""
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
    return False


def deliberate(word: str, uses: int) -> bool:
    """A non-word written on purpose, by cheap evidence: the same spelling used twice or more in
    the document (names, coinages; a typo rarely repeats letter for letter), or dropped-g
    dialect ("mornin", "goin'"). The model alone reads these as typos: it does not learn a name
    from the document."""
    lower = word.lower().rstrip("'’")
    return uses >= 2 or (lower.endswith("in") and is_word(lower + "g"))


def match_case(like: str, word: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def close_words(word: str, distance: int = 1) -> list[str]:
    """Dictionary words `distance` edits away (1 or 2), commonest first, in the word's case."""
    return [match_case(word, w) for w in _close_lower(word.lower(), distance)]


@lru_cache(maxsize=16384)
def _close_lower(lower: str, distance: int) -> tuple[str, ...]:
    """Cached: the server re-examines the same words on every publish."""
    spell = dictionary()
    edits = spell.edit_distance_1(lower) if distance == 1 else spell.edit_distance_2(lower)
    freq = spell.word_frequency
    found = [w for w in spell.known(edits) if w != lower and freq[w] >= MIN_FIX_FREQUENCY]
    found.sort(key=lambda w: (-freq[w], w))
    return tuple(found)


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
        if not text[int(starts[ti]):a].strip():
            out.append((a, b, ti, int(j[k])))
    return out


class Detector:
    """Finds typos in a document's words from its per-token surprise and the LM head."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._first = lru_cache(maxsize=65536)(self._first_and_count)

    def _first_and_count(self, lead: str, word: str) -> tuple[int, int]:
        ids = self.tokenizer.encode(lead + word)
        return ids[0], len(ids)

    def candidates(self, word: str, known: bool) -> list[tuple[str, bool]]:
        """(candidate, exact) pairs: close dictionary words for a non-word, the confusion set
        for a dictionary word. `exact` is decided later from the candidate's tokens."""
        if known:
            return [(match_case(word, c), True) for c in CONFUSABLE.get(word.lower(), ())]
        return [(c, False) for c in close_words(word)]

    def examine(self, text: str, starts: Sequence[int], surprise: np.ndarray, words: Iterable[tuple[int, int]],
                logprobs: Callable, force: bool = False, resolved: bool = False) -> list[WordFinding]:
        """Findings for the suspect words among `words` ((start, end) character spans): every
        non-word with a close dictionary word and every confusable word.
        `logprobs(indices, candidate_ids)` gives the log-probabilities of candidate tokens at
        those token indices (IncrementalDocument.next_token_logprobs). With `force`, every word
        gets a finding (hover, quick fixes), its fixes from one edit away (two for a
        non-word with nothing closer). `resolved`: `words` are already word_tokens' (start, end,
        first token, end token) spans."""
        starts = np.asarray(starts)
        spans = list(words) if resolved else word_tokens(text, starts, len(surprise), list(words))
        words = [(a, b) for a, b, *_ in spans] if resolved else list(words)
        uses = Counter(text[a:b].lower() for a, b in words) if not force else Counter()
        cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
        todo = []
        for a, b, i, j in spans:
            word = text[a:b]
            known = is_word(word)
            if not force and known and word.lower() not in CONFUSABLE:
                continue
            if not force and not known and deliberate(word, uses[word.lower()]):
                continue
            cands = self.candidates(word, known)
            if force:
                near = close_words(word)
                if not near and not known and len(word) <= 8:  # two edits away: only when one finds nothing
                    near = close_words(word, 2)
                cands = _unique(cands + [(c, False) for c in near])
            lead = text[int(starts[i]):a]
            pieces = [(c, *self._first(lead, c)) for c, _ in cands]
            if known:  # a multi-piece confusable: its first piece alone would overstate it
                confusable = CONFUSABLE.get(word.lower(), ())
                pieces = [p for p in pieces if p[2] == 1 or p[0].lower() not in confusable]
            if not pieces and not force:
                continue
            todo.append((a, b, word, i, float(cumulative[j] - cumulative[i]), known, pieces))
        if not todo:
            return []
        scores = logprobs([t[3] for t in todo], [[first for _, first, _ in t[6]] for t in todo])
        out = []
        for (a, b, word, _, s, known, pieces), lp in zip(todo, scores):
            lp = np.asarray(lp, dtype=np.float64)
            scored = sorted(((c, float(lp[k]) - EXTRA_PIECE_NATS * (count - 1))
                             for k, (c, _, count) in enumerate(pieces)), key=lambda t: -t[1])
            gain = (scored[0][1] + s) if scored else float("-inf")
            out.append(WordFinding(a, b, word, s, "real-word" if known else "non-word", gain,
                                   tuple(scored[:MAX_FIXES])))
        return out


def _unique(pairs: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    seen, out = set(), []
    for c, exact in pairs:
        if c.lower() not in seen:
            seen.add(c.lower())
            out.append((c, exact))
    return out


def flagged(f: WordFinding, non_word_threshold: float, real_word_threshold: float) -> bool:
    """Whether a finding is shown as a typo under these thresholds (nats of gain)."""
    return f.gain >= (non_word_threshold if f.kind == "non-word" else real_word_threshold)
