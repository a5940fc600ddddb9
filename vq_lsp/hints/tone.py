"""The tone rule: which prose blocks of a document show their tone.

A block shows its top label when it has at least `toneMinWords` words (and one at the least) and the
label's probability reaches `sentimentThreshold`. With `toneGate` above 0, a document must also read as an opinion piece
as a whole: the score of all its tone blocks together (their tokens' class log-probabilities summed,
the same aggregate as a paragraph's score, see inference.document.span_probs) must reach the gate, or
no block shows a tone. Why: even scored alone, a few paragraphs of a well-edited technical or
encyclopedic document come out confident, while the document's prose as a whole reads near 0.5; a
review reads one way throughout (docs/server.md, Tone, has the measurements). A block of an opinion
piece shows only the label the document reads as (`agrees`). The gate never asks more of the document
than `sentimentThreshold` asks of a paragraph (a threshold of 0 shows every tone). A short text
(fewer than SHORT_TEXT_WORDS words in its tone blocks) asks `toneShortThreshold` of its blocks
instead: the gate cannot help a text of one paragraph, and alone a sentence's tone is wrong about
one time in four at 0.7 (docs/server.md, Tone, has the measurements). Kept in one
place so the server, `vq-lsp check` and `vq-lsp score` decide alike (hints/selection.py,
scoring/output.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..settings import DiagnosticSettings

PROBABILITY_FLOOR = 1e-6  # `vq-lsp score` rounds scores to 6 decimals
SHORT_TEXT_WORDS = 60  # below this many words in its tone blocks, a text asks toneShortThreshold of them


@dataclass(frozen=True)
class Block:
    """A prose block's tone scores, its words (as `toneMinWords` counts them) and its token count."""

    scores: dict[str, float]
    words: int
    tokens: int


@dataclass(frozen=True)
class ToneBlock:
    """A prose block that may show a tone, placed in its text: chars [start, end), tokens
    [token_start, token_end), its tone scores and its words (as `toneMinWords` counts them). What
    the material hands to the selection, the hover and `vq-lsp score`."""

    start: int
    end: int
    token_start: int
    token_end: int
    scores: dict[str, float]
    words: int

    def block(self) -> Block:
        """The block as the tone rule reads it."""
        return Block(self.scores, self.words, self.token_end - self.token_start)


def top_label(scores: dict[str, float]) -> tuple[str, float]:
    """The likeliest label and its probability."""
    label = max(scores, key=scores.get)
    return label, scores[label]


def document_scores(blocks: Sequence[Block]) -> dict[str, float] | None:
    """The tone blocks' joint score: softmax of the token-weighted mean of their log-probabilities
    (equal to the span score of all their tokens, since a block's log-softmax shift is label-free).
    Probabilities are floored at PROBABILITY_FLOOR, so a block read as certain weighs as a very sure one
    and `vq-lsp score`'s rounded scores give the server's answer."""
    total = sum(b.tokens for b in blocks)
    if not total:
        return None
    labels = list(blocks[0].scores)
    mean = {k: sum(b.tokens * math.log(max(b.scores[k], PROBABILITY_FLOOR)) for b in blocks) / total for k in labels}
    top = max(mean.values())
    z = sum(math.exp(v - top) for v in mean.values())
    return {k: math.exp(v - top) / z for k, v in mean.items()}


def block_tone(
    scores: dict[str, float], n_words: int, cfg: DiagnosticSettings, threshold: float | None = None
) -> tuple[str, float] | None:
    """(label, probability) a block would show on its own (no document gate), else None; `threshold`:
    the probability it needs (default `sentimentThreshold`, see `block_threshold`). A block without a
    word (a rule of dashes or stars) has no tone, even with `toneMinWords` 0: its scores read punctuation."""
    label, p = top_label(scores)
    if n_words >= min_words(cfg) and p >= (cfg.sentiment_threshold if threshold is None else threshold):
        return label, p
    return None


def min_words(cfg: DiagnosticSettings) -> int:
    """Words a block needs for a tone: `toneMinWords`, and one at the least."""
    return max(1, cfg.tone_min_words)


def block_threshold(blocks: Sequence[Block], cfg: DiagnosticSettings) -> float:
    """The probability each block of this text needs (`text_threshold` of all its tone blocks' words,
    the text the gate reads)."""
    return text_threshold(sum(b.words for b in blocks), cfg)


def text_threshold(words: int, cfg: DiagnosticSettings) -> float:
    """The probability a block of a text of `words` words needs: `sentimentThreshold`, or in a short
    text (fewer than SHORT_TEXT_WORDS words) `toneShortThreshold` when that is higher. A
    `sentimentThreshold` of 0 still shows every tone."""
    if cfg.sentiment_threshold > 0.0 and words < SHORT_TEXT_WORDS:
        return max(cfg.sentiment_threshold, cfg.tone_short_threshold)
    return cfg.sentiment_threshold


def opinion_document(blocks: Sequence[Block], cfg: DiagnosticSettings) -> bool:
    """Whether the document as a whole reads as an opinion piece (always, with the gate off)."""
    return document_tone(blocks, cfg) is not None


def document_tone(blocks: Sequence[Block], cfg: DiagnosticSettings) -> str | None:
    """The label an opinion piece reads as a whole ("" with the gate off: any label), or None
    when the document is no opinion piece."""
    gate = min(cfg.tone_gate, cfg.sentiment_threshold)  # never asks more of a document than of a paragraph
    if gate <= 0.0:
        return ""
    joint = document_scores(blocks)
    if joint is None:
        return None
    label, p = top_label(joint)
    return label if p >= gate else None


def shown(blocks: Sequence[Block], cfg: DiagnosticSettings) -> list[tuple[str, float] | None]:
    """Per block, the (label, probability) it shows, or None. With the gate on, a block shows only
    the label its document reads as (`agrees`); in a short text, only above `toneShortThreshold`."""
    label = document_tone(blocks, cfg)
    if label is None:
        return [None] * len(blocks)
    threshold = block_threshold(blocks, cfg)
    return [agrees(block_tone(b.scores, b.words, cfg, threshold), label) for b in blocks]


def agrees(pick: tuple[str, float] | None, label: str) -> tuple[str, float] | None:
    """A block's tone where it is its opinion piece's label (any, for label ""), else None. Why: a
    paragraph that reads against a document that reads one way is mostly the model misreading a
    plot summary, a concession or a narrated scene, not the writer's tone; on held-out reviews
    these were most of the shown tones that were wrong, and dropping them let the paragraph
    threshold come down so that more reviews show their tone (docs/server.md, Tone)."""
    if pick is None or (label and pick[0] != label):
        return None
    return pick
