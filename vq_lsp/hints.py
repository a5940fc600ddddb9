"""What the user sees: diagnostics, hover text and the code lens, from a document's state.

Paragraphs are runs of non-blank lines (paragraphs.py, shared with the batch scorer); a
paragraph's score comes from the mean of its tokens' class log-probabilities
(`doc.span_scores`). Sentiment diagnostics (Information) mark paragraphs whose top label
reaches the threshold; surprise diagnostics (Hint) mark the tokens the LM head found least likely, as possible typos or awkward wording. Ranges are LSP ranges
(UTF-16 columns) computed from the token start offsets that textsync keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from lsprotocol import types

import inference

from .paragraphs import paragraphs
from .settings import DiagnosticSettings
from .textsync import TrackedText

SOURCE = "vq-lsp"


def lsp_range(tt: TrackedText, a: int, b: int) -> dict:
    (l0, c0), (l1, c1) = tt.position(a), tt.position(b)
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def paragraph_scores(tt: TrackedText, doc: inference.IncrementalDocument):
    """(char start, char end, token start, token end, scores) per paragraph with tokens."""
    offsets = [(a, a) for a in tt.token_starts.tolist()]  # only the starts are used
    out = []
    for p in paragraphs(tt.text, offsets):
        end = p.start + len(tt.text[p.start : p.end].rstrip())  # no trailing "\r" in the range
        out.append((p.start, end, p.token_start, p.token_end, doc.span_scores(p.token_start, p.token_end)))
    return out


def _top(scores: dict[str, float]) -> tuple[str, float]:
    label = max(scores, key=scores.get)
    return label, scores[label]


@dataclass(frozen=True)
class HintMaterial:
    """What diagnostics are chosen from: paragraph scores and every token's surprise, for one
    version of the text. A few floats per token, so it outlives a dropped engine state: a
    settings change that only changes which hints are shown (thresholds, kinds) republishes from
    it with no engine work, and an evicted document is not rebuilt just to re-filter its hints."""

    version: int | None
    paragraphs: list  # (char start, char end, token start, token end, scores), see paragraph_scores
    surprise: np.ndarray  # per token

    @classmethod
    def of(cls, tt: TrackedText, doc: inference.IncrementalDocument, version: int | None) -> "HintMaterial":
        surprise = np.asarray(doc.surprise(0, doc.n_tokens), dtype=np.float64) if doc.n_tokens else np.zeros(0)
        return cls(version, paragraph_scores(tt, doc), surprise)


@dataclass(frozen=True)
class Hint:
    """One diagnostic in char offsets of the text it was chosen for (ranges move with edits)."""

    start: int
    end: int
    message: str
    severity: types.DiagnosticSeverity
    code: str

    def lsp(self, position, computed_for: int | None) -> types.Diagnostic:
        """As an LSP diagnostic; `data.version` names the version whose state chose it."""
        (l0, c0), (l1, c1) = position(self.start), position(self.end)
        return types.Diagnostic(range=types.Range(types.Position(l0, c0), types.Position(l1, c1)),
                                message=self.message, severity=self.severity, source=SOURCE, code=self.code,
                                data={"version": computed_for})


def choose(tt: TrackedText, material: HintMaterial, cfg: DiagnosticSettings) -> list[Hint]:
    """The hints the settings ask for: paragraph tone over the threshold, the most surprising tokens."""
    out = []
    if cfg.sentiment:
        for a, b, _, _, scores in material.paragraphs:
            label, p = _top(scores)
            if p >= cfg.sentiment_threshold:
                out.append(Hint(a, b, f"{label} tone ({p:.2f})", types.DiagnosticSeverity.Information, "sentiment"))
    if cfg.surprise and cfg.max_surprise_hints and len(material.surprise):
        surprise = material.surprise
        flagged = np.flatnonzero(surprise >= cfg.surprise_threshold)
        top = sorted(((float(surprise[i]), int(i)) for i in flagged), reverse=True)[: cfg.max_surprise_hints]
        for s, i in top:
            a, b = int(tt.token_starts[i]), tt.token_char_end(i)
            word = tt.text[a:b]
            a += len(word) - len(word.lstrip())
            if b <= a:  # a token that is only part of a character (byte-level pieces)
                b = min(len(tt.text), a + 1)
            out.append(Hint(a, b, f"unexpected {tt.text[a:b]!r} (surprise {s:.1f}): possible typo or awkward wording",
                            types.DiagnosticSeverity.Hint, "surprise"))
    return out


def diagnostics(tt: TrackedText, material: HintMaterial, cfg: DiagnosticSettings) -> list[types.Diagnostic]:
    return [h.lsp(tt.position, material.version) for h in choose(tt, material, cfg)]


def hover_text(tt: TrackedText, doc: inference.IncrementalDocument, offset: int) -> str:
    label, p = _top(doc.scores)
    lines = [f"**vq-lsp** document: {label} {p:.2f} ({doc.n_tokens} tokens)"]
    for a, b, _, _, scores in paragraph_scores(tt, doc):
        if a <= offset <= b:
            pl, pp = _top(scores)
            lines.append(f"paragraph: {pl} {pp:.2f}")
            break
    detail = ", ".join(f"{k} {v:.2f}" for k, v in doc.scores.items())
    lines.append(f"({detail})")
    return "\n\n".join(lines)


def code_lens(uri: str, doc: inference.IncrementalDocument) -> types.CodeLens:
    label, p = _top(doc.scores)
    return types.CodeLens(
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        command=types.Command(title=f"vq-lsp: {label} {p:.2f} (document) · verify", command="vqLsp.verify",
                              arguments=[uri]))
