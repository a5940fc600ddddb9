"""The one rule that picks hints from a text's material, for the server and `vq-lsp score` alike.

A prose block shows its tone when it has enough words, its top label is probable enough and the
document as a whole reads as an opinion piece (hints/tone.py);
typos are the findings whose gain reaches their kind's threshold, strongest evidence first, at
most `max_typo_hints`; unlikely words (when asked for) are the most surprising prose words at
or above the threshold, at most `max_surprise_hints`, never a word already shown as a typo (one
word, one hint). The server turns the picks into diagnostics (hints/lsp.py), the scorer into
rows (scoring/scorer.py); both call `select`, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import DiagnosticSettings
from . import tone, typos
from .material import HintMaterial


@dataclass(frozen=True)
class ToneHint:
    """A prose block whose tone is shown, in char offsets."""

    start: int
    end: int
    label: str
    probability: float


@dataclass(frozen=True)
class SurpriseHint:
    """An unlikely prose word, in char offsets, with its whole-word surprise (nats)."""

    start: int
    end: int
    surprise: float


@dataclass(frozen=True)
class Selection:
    """The hints picked for one version of a text."""

    tones: tuple[ToneHint, ...]  # in text order
    typos: tuple[typos.WordFinding, ...]  # strongest evidence (gain) first
    surprises: tuple[SurpriseHint, ...]  # most surprising first


top_label = tone.top_label


def shown_tone(scores: dict[str, float], n_words: int, cfg: DiagnosticSettings) -> tuple[str, float] | None:
    """(label, probability) of a prose block of `n_words` words whose tone is shown when it is the
    document's only block, else None (a document of several blocks: `tone.shown`)."""
    return tone.shown([tone.Block(scores, n_words, 1)], cfg)[0]


def select(material: HintMaterial, cfg: DiagnosticSettings) -> Selection:
    """The hints the settings ask for: tone of long prose paragraphs, typos, and (if asked) unlikely words."""
    tones = []
    if cfg.sentiment:
        blocks = [p.block() for p in material.paragraphs]
        for p, shown in zip(material.paragraphs, tone.shown(blocks, cfg)):
            if shown is not None:
                tones.append(ToneHint(p.start, p.end, *shown))
    chosen_typos: list[typos.WordFinding] = []
    if cfg.typo and cfg.max_typo_hints:
        found = [f for f in material.findings if typos.flagged(f, cfg.typo_threshold, cfg.real_word_threshold)]
        chosen_typos = sorted(found, key=lambda f: -f.gain)[: cfg.max_typo_hints]
    surprises: list[SurpriseHint] = []
    if cfg.surprise and cfg.max_surprise_hints:
        typo_at = {f.start for f in chosen_typos}
        words = (
            material.words.at_least(cfg.surprise_threshold)
            if hasattr(material.words, "at_least")
            else [w for w in material.words if w[2] >= cfg.surprise_threshold]
        )
        top = sorted((w for w in words if w[0] not in typo_at), key=lambda w: -w[2])[: cfg.max_surprise_hints]
        surprises = [SurpriseHint(a, b, s) for a, b, s in top]
    return Selection(tuple(tones), tuple(chosen_typos), tuple(surprises))
