"""The detector: scores each suspect word and its candidate replacements with the LM head at the
word's position, a candidate of several pieces by the whole word (`continuation`), and reads a
confusable on over the words after it (`Detector._read_on`). What the document excuses is decided
later, from the whole document (evidence.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from .candidates import candidates_for, unique
from .finding import WordFinding
from .tokens import word_tokens, words_after
from .words import CONFUSABLE, close_words, is_word, reads_on

MAX_FIXES = 3
# A candidate of several pieces is scored by its first piece (an upper bound) less this per further piece,
# so that "thea" (" the" + "a") does not tie with "the" itself.
EXTRA_PIECE_NATS = 2.0
# A confusable and its partners are read on over the words after them (tokens.WORDS_AFTER_TOKENS) only
# when the words before leave the pair open: a gain of at least this (nats; -2: the partner at most
# 2 nats less likely). "of" is in every sentence, and each reading of the words after is a forward pass.
WORDS_AFTER_MIN_GAIN = -2.0


@dataclass(frozen=True)
class Piece:
    """A candidate replacement as the tokenizer writes it after the word's lead."""

    text: str  # the candidate, in the word's case
    first: int  # its first token's id
    count: int  # how many tokens it takes


@dataclass(frozen=True)
class Suspect:
    """A word the detector scores: where it is, what it costs, what could replace it."""

    start: int  # character offsets of the word in the text
    end: int
    word: str
    token: int  # its first token's index
    end_token: int  # the index after its last token
    surprise: float  # -log p(word | context), summed over its pieces (nats)
    kind: str  # WordFinding.kind
    pieces: tuple[Piece, ...]  # its candidates, in the order they are scored
    lead: str  # the whitespace its first token holds before it


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
        return candidates_for(word, known)

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
        todo = self._suspects(text, starts, surprise, spans, force, continuation is not None)
        if not todo:
            return []
        scores = logprobs([t.token for t in todo], [[p.first for p in t.pieces] for t in todo])
        firsts = [np.asarray(lp, dtype=np.float64) for lp in scores]
        rest = self._further_pieces(todo, firsts, continuation)
        out = []
        for n, (t, lp) in enumerate(zip(todo, firsts)):
            scored = sorted(
                (
                    (p.text, float(lp[k]) + rest.get((n, k), -EXTRA_PIECE_NATS * (p.count - 1)))
                    for k, p in enumerate(t.pieces)
                ),
                key=lambda s: -s[1],
            )
            gain = (scored[0][1] + t.surprise) if scored else float("-inf")
            out.append(WordFinding(t.start, t.end, t.word, t.surprise, t.kind, gain, tuple(scored[:MAX_FIXES])))
        return self._read_on(text, starts, surprise, out, todo, firsts, continuation)

    def _suspects(self, text, starts, surprise, spans, force: bool, whole_words: bool) -> list[Suspect]:
        """The words of `spans` worth scoring, with their candidates: a non-word, a lower-case
        confusable, and with `force` every word. Without `whole_words` (no `continuation`) a
        confusable's partner of several pieces is left out: its first piece alone would overstate it."""
        cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
        todo = []
        for a, b, i, j in spans:
            word = text[a:b]
            known = is_word(word)
            suspect = not known or reads_on(word)
            if not suspect and not force:
                continue
            cands = (
                self.candidates(word, known) if suspect else unique(self.candidates(word, known) + close_words(word))
            )
            lead = text[int(starts[i]) : a]
            pieces = [Piece(c, *self._first(lead, c)) for c in cands]
            if known and not whole_words:
                confusable = CONFUSABLE.get(word.lower(), ())
                pieces = [p for p in pieces if p.count == 1 or p.text.lower() not in confusable]
            if not pieces and not force:
                continue
            kind = "real-word" if known and suspect else "non-word" if not known else "word"
            todo.append(Suspect(a, b, word, i, j, float(cumulative[j] - cumulative[i]), kind, tuple(pieces), lead))
        return todo

    def _read_on(self, text, starts, surprise, out, todo, firsts, continuation) -> list[WordFinding]:
        """The real-word findings rescored on the words after them too (at most WORDS_AFTER_TOKENS
        tokens, `words_after`). The word and each partner x is scored as log p(x's first piece)
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
        for n, (f, t) in enumerate(zip(out, todo)):
            if f.kind != "real-word" or not f.fixes or f.gain < WORDS_AFTER_MIN_GAIN:
                continue
            after = words_after(text, starts, len(surprise), t.end_token)
            if not after:
                continue
            tail = list(self._pieces("", after))
            first_lp = {p.text: float(firsts[n][k]) for k, p in enumerate(t.pieces)}
            readings = [(f.word, -float(surprise[t.token]))] + [(c, first_lp[c]) for c, _ in f.fixes]
            for word, _ in readings:
                jobs.append((t.token, [*self._pieces(t.lead, word), *tail]))
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

    def _further_pieces(self, todo: list[Suspect], firsts, continuation) -> dict[tuple[int, int], float]:
        """log p of the further pieces of the several-piece candidates that could still win
        (their first piece alone beats the best one-piece candidate), by (word, candidate)."""
        if continuation is None:
            return {}
        jobs, keys = [], []
        for n, (t, lp) in enumerate(zip(todo, firsts)):
            best_single = max((float(lp[k]) for k, p in enumerate(t.pieces) if p.count == 1), default=-np.inf)
            for k, p in enumerate(t.pieces):
                if p.count > 1 and float(lp[k]) > best_single:
                    jobs.append((t.token, list(self._pieces(t.lead, p.text))))
                    keys.append((n, k))
        return dict(zip(keys, continuation(jobs))) if jobs else {}
