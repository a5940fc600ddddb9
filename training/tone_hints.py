"""What a writer would see: tone hints shown, and how often they are right, per writing style.

Why: accuracy alone hides the two ways a tone hint fails a writer. A hint on a paragraph with no
opinion is noise however "accurate" the model is on reviews, and a confident wrong hint on a
lowercased note is worse than none. The server shows a paragraph's tone when its top class
reaches ``sentimentThreshold`` and the paragraph has at least ``toneMinWords`` words
(``vq_lsp.hints.choose``); these figures apply the same rule, with the server's defaults, to
each text scored alone, as a document of one paragraph. That is what the server shows for such a
document; in a longer one a paragraph is also judged with the rest of its document (the
``toneGate`` of hints/tone.py), which these figures leave out:

* ``accuracy``, ``positive_rate``: the top class against the label (balanced sets should sit near
  50% positive);
* ``shown_share``: texts that would get a hint; ``shown_precision``: hints whose label is right;
* ``ece``: expected calibration error of the top-class confidence (10 equal-width bins).

Neutral paragraphs have no right label: only their shown share, positive rate and mean
confidence mean something (the target is "no hint").
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

import torch

from vq_lsp.hints import tone  # the server's tone rule (tests/test_architecture.py allows it)
from vq_lsp.hints.markup import WORD  # the server's word count (allowed as above)
from vq_lsp.settings import DiagnosticSettings  # the server's defaults (allowed as above)

from .reviews import NEUTRAL

DEFAULTS = DiagnosticSettings()


@dataclass(frozen=True)
class HintFigures:
    """Tone-hint figures of one set of texts (``None`` where a figure has no meaning for it)."""

    n: int
    positive_rate: float
    shown_share: float
    mean_confidence: float
    accuracy: float | None = None
    shown_precision: float | None = None
    ece: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def scaled(probs: torch.Tensor, temperature: float) -> torch.Tensor:
    """Document probabilities (N, C) after dividing the document logits by ``temperature``: what a
    classification head divided by ``temperature`` gives (``calibrate``), exactly."""
    return torch.softmax(probs.clamp(min=1e-12).log() / temperature, -1)


def word_count(text: str) -> int:
    """Words as the server counts them for its tone gate (``vq_lsp.hints.markup.WORD``)."""
    return sum(1 for _ in WORD.finditer(text))


def expected_calibration_error(probs: torch.Tensor, labels: torch.Tensor, bins: int = 10) -> float:
    """Mean |accuracy - confidence| over equal-width confidence bins, weighted by their share of texts."""
    conf, pred = probs.max(-1)
    right = (pred == labels).float()
    edges = torch.linspace(0, 1, bins + 1)
    ece = 0.0
    for i in range(bins):
        lo, hi = edges[i], edges[i + 1]
        inside = (conf > lo) & (conf <= hi) if i else (conf >= lo) & (conf <= hi)
        if inside.any():
            ece += float(inside.float().mean()) * abs(float(right[inside].mean()) - float(conf[inside].mean()))
    return ece


def hint_figures(
    probs: torch.Tensor,
    labels: torch.Tensor,
    words: list[int],
    threshold: float = DEFAULTS.sentiment_threshold,
    min_words: int = DEFAULTS.tone_min_words,
) -> HintFigures:
    """Figures of texts with document probabilities ``probs`` (N, C), labels (N,) (``NEUTRAL``
    for text without an opinion) and word counts, under the server's rule for showing a hint (a
    short text needs ``toneShortThreshold``, ``tone.text_threshold``)."""
    conf, pred = probs.max(-1)
    cfg = dataclasses.replace(DEFAULTS, sentiment_threshold=threshold, tone_min_words=min_words)
    needed = torch.tensor([tone.text_threshold(w, cfg) for w in words], dtype=conf.dtype)
    shown = (conf >= needed) & (torch.tensor(words) >= min_words)
    opinion = labels != NEUTRAL
    figures = {
        "n": len(labels),
        "positive_rate": float((pred == 1).float().mean()),
        "shown_share": float(shown.float().mean()),
        "mean_confidence": float(conf.mean()),
    }
    if bool(opinion.all()):
        right = pred == labels
        figures.update(
            accuracy=float(right.float().mean()),
            shown_precision=float(right[shown].float().mean()) if shown.any() else None,
            ece=expected_calibration_error(probs, labels),
        )
    return HintFigures(**figures)


def hint_report(scores_of, sets: dict[str, list[tuple[str, int]]], temperature: float | None = None) -> dict[str, dict]:
    """``hint_figures`` of each named set of (text, label); ``scores_of(name, texts)`` gives their
    (N, C) probabilities. For a model whose head holds a folded ``temperature``, the calibration
    error the same texts had before it (``ece_before_calibration``) comes along, computed exactly
    by scaling the probabilities back."""
    report = {}
    for name, rows in sets.items():
        if not rows:
            continue
        probs = scores_of(name, [t for t, _ in rows])
        labels = torch.tensor([y for _, y in rows])
        report[name] = hint_figures(probs, labels, [word_count(t) for t, _ in rows]).as_dict()
        if temperature is not None and report[name]["ece"] is not None:
            report[name]["ece_before_calibration"] = expected_calibration_error(scaled(probs, 1 / temperature), labels)
    report["rule"] = (
        f"hint shown where the top class reaches {DEFAULTS.sentiment_threshold} and the text has at "
        f"least {DEFAULTS.tone_min_words} words, {DEFAULTS.tone_short_threshold} in a text of fewer than "
        f"{tone.SHORT_TEXT_WORDS} words (the server's defaults); each text scored alone, as a document "
        "of one paragraph (in a longer document the server's document gate, toneGate, also applies)"
    )
    return report
