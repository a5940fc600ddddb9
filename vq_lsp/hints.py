"""What the user sees: diagnostics, hover text and the code lens, from a document's state.

Paragraphs are runs of non-blank lines (paragraphs.py, shared with the batch scorer); a
paragraph's score comes from the mean of its tokens' class log-probabilities
(`doc.span_scores`). Sentiment diagnostics (Information) mark paragraphs whose top label
reaches the threshold; surprise diagnostics (Hint) mark the tokens the LM head found least likely, as possible typos or awkward wording. Ranges are LSP ranges
(UTF-16 columns) computed from the token start offsets that textsync keeps.
"""

from __future__ import annotations

from lsprotocol import types

import inference

from .paragraphs import paragraphs
from .settings import DiagnosticSettings
from .textsync import TrackedText

SOURCE = "vq-lsp"


def lsp_range(tt: TrackedText, a: int, b: int) -> dict:
    (l0, c0), (l1, c1) = tt.position(a), tt.position(b)
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def _range(tt: TrackedText, a: int, b: int) -> types.Range:
    (l0, c0), (l1, c1) = tt.position(a), tt.position(b)
    return types.Range(types.Position(l0, c0), types.Position(l1, c1))


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


def diagnostics(tt: TrackedText, doc: inference.IncrementalDocument, cfg: DiagnosticSettings) -> list[types.Diagnostic]:
    out = []
    if cfg.sentiment:
        for a, b, _, _, scores in paragraph_scores(tt, doc):
            label, p = _top(scores)
            if p >= cfg.sentiment_threshold:
                out.append(types.Diagnostic(
                    range=_range(tt, a, b), message=f"{label} tone ({p:.2f})",
                    severity=types.DiagnosticSeverity.Information, source=SOURCE, code="sentiment"))
    if cfg.surprise and cfg.max_surprise_hints and doc.n_tokens:
        surprise = doc.surprise(0, doc.n_tokens)
        flagged = sorted((s, i) for i, s in enumerate(surprise) if s >= cfg.surprise_threshold)
        for s, i in sorted(flagged, reverse=True)[: cfg.max_surprise_hints]:
            a, b = int(tt.token_starts[i]), tt.token_char_end(i)
            word = tt.text[a:b]
            a += len(word) - len(word.lstrip())
            if b <= a:  # a token that is only part of a character (byte-level pieces)
                b = min(len(tt.text), a + 1)
            out.append(types.Diagnostic(
                range=_range(tt, a, b), message=f"unexpected {tt.text[a:b]!r} (surprise {s:.1f}): possible typo or "
                "awkward wording", severity=types.DiagnosticSeverity.Hint, source=SOURCE, code="surprise"))
    return out


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
