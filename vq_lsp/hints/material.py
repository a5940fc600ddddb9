"""What hints are chosen from: per-token surprise, prose word surprises, typo findings and the
tone blocks' scores of one version of a text, computed from its engine state.

Shared by the server (hints/lsp.py, through `HintMaterial`) and `vq-lsp score` (`analyse`).
A text is given as a `TokenizedText` (the server's `TrackedText` is one), so this package
needs nothing from the document store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

import inference

from ..settings import DiagnosticSettings
from . import markup, typos
from .paragraphs import paragraphs



class TokenizedText(Protocol):
    """A text with the char offset where each of its tokens starts (documents/textsync.py's TrackedText)."""

    text: str
    token_starts: np.ndarray

    def position(self, offset: int) -> tuple[int, int]: ...


def detector(doc: inference.IncrementalDocument) -> typos.Detector:
    """The typo detector of the document's model: one per loaded model (it caches how candidate
    words tokenize), kept with the model through the engine's `LoadedModel.cached`."""
    model = doc.model
    return model.cached("typo_detector", lambda: typos.Detector(model.tokenizer))


def word_surprises(spans, surprise: np.ndarray) -> list[tuple[int, int, float]]:
    """(start, end, whole-word surprise) of words given as (start, end, first token, end token)."""
    cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
    return [(a, b, float(cumulative[j] - cumulative[i])) for a, b, i, j in spans]


def analyse(text: str, starts: np.ndarray, doc: inference.IncrementalDocument,
            lay: markup.Layout) -> tuple[np.ndarray, list, list[typos.WordFinding]]:
    """Token surprise, prose word surprises and typo findings of a text (shared with `vq-lsp score`)."""
    surprise = np.asarray(doc.surprise(0, doc.n_tokens), dtype=np.float64) if doc.n_tokens else np.zeros(0)
    spans = typos.word_tokens(text, starts, len(surprise), list(lay.words(text)))  # prose words with their own tokens
    findings = detector(doc).examine(text, starts, surprise, spans, doc.next_token_logprobs, resolved=True)
    return surprise, word_surprises(spans, surprise), findings


def tone_blocks(starts: np.ndarray, doc: inference.IncrementalDocument, lay: markup.Layout):
    """(char start, char end, token start, token end, scores, words) per prose block that may have a tone;
    a block's tokens are those that start in it (`starts`: each token's first char)."""
    out = []
    for a, b, n_words in lay.tone:
        ta, tb = int(np.searchsorted(starts, a, "left")), int(np.searchsorted(starts, b, "left"))
        if ta < tb:
            out.append((a, b, ta, tb, doc.span_scores(ta, tb), n_words))
    return out


def layout_for(text: str, language_id: str, cfg: DiagnosticSettings) -> markup.Layout:
    """The prose of a document by its languageId (and the sourceComments setting)."""
    kind = markup.markup_of(language_id, source_hints="comments" if cfg.source_comments else "off")
    return markup.layout(text, kind, language_id)


def paragraph_scores(tt: TokenizedText, doc: inference.IncrementalDocument):
    """(char start, char end, token start, token end, scores) per paragraph with tokens."""
    offsets = [(a, a) for a in tt.token_starts.tolist()]  # only the starts are used
    out = []
    for p in paragraphs(tt.text, offsets):
        end = p.start + len(tt.text[p.start : p.end].rstrip())  # no trailing "\r" in the range
        out.append((p.start, end, p.token_start, p.token_end, doc.span_scores(p.token_start, p.token_end)))
    return out


@dataclass(frozen=True)
class HintMaterial:
    """What diagnostics are chosen from, for one version of the text: the tone blocks' scores,
    every prose word's surprise and the typo findings. Small next to the state, so it outlives a
    dropped engine state: a settings change that only changes which hints are shown
    (thresholds, kinds, tone length) republishes from it with no engine work, and an evicted
    document is not rebuilt just to re-filter its hints."""

    version: int | None
    paragraphs: list  # (char start, char end, token start, token end, scores, words), see tone_blocks
    words: list  # (char start, char end, whole-word surprise) of prose words
    findings: list  # typos.WordFinding, every suspect word (the thresholds choose among them)

    @classmethod
    def of(cls, tt: TokenizedText, doc: inference.IncrementalDocument, version: int | None,
           language_id: str = "plaintext", cfg: DiagnosticSettings | None = None) -> "HintMaterial":
        lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings())
        return cls.with_layout(tt.text, tt.token_starts, doc, version, lay)

    @classmethod
    def with_layout(cls, text: str, starts: np.ndarray, doc: inference.IncrementalDocument, version: int | None,
                    lay: markup.Layout) -> "HintMaterial":
        """The material of a text whose prose is `lay` (`vq-lsp score` finds it from a file name)."""
        _, words, findings = analyse(text, starts, doc, lay)
        return cls(version, tone_blocks(starts, doc, lay), words, findings)


def word_at(text: str, lay: markup.Layout, offset: int) -> tuple[int, int] | None:
    """The prose word touching `offset`, if any."""
    for m in markup.WORD.finditer(text, max(0, offset - 64), min(len(text), offset + 64)):
        if m.start() <= offset <= m.end() and lay.allows(m.start(), m.end()):
            return m.start(), m.end()
    return None


def explain_words(tt: TokenizedText, doc: inference.IncrementalDocument, spans) -> list[typos.WordFinding]:
    """The detector's view of words (char spans), flagged or not: each word's surprise and the
    likeliest dictionary words one edit away, two for a non-word with none closer (hover, quick fixes)."""
    surprise = np.asarray(doc.surprise(0, doc.n_tokens), dtype=np.float64)
    return detector(doc).examine(tt.text, tt.token_starts, surprise, spans, doc.next_token_logprobs, force=True)


def quick_fixes(tt: TokenizedText, doc: inference.IncrementalDocument, a: int, b: int,
                language_id: str = "plaintext", cfg: DiagnosticSettings | None = None) -> list[typos.WordFinding]:
    """The detector's view of every prose word overlapping chars [a, b] (each with its fixes)."""
    lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings())
    spans = [(p, q) for p, q in lay.words(tt.text) if p <= b and a <= q]
    return [f for f in explain_words(tt, doc, spans[:20]) if f.fixes]
