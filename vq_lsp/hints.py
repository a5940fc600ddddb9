"""What the user sees: diagnostics, hover text, quick fixes and the code lens, from a document's state.

Hints follow the markup (markup.py): only prose is hinted, never tables, code, URLs or front
matter, while the model still reads the whole text. Tone (sentiment diagnostics, Information)
goes to prose paragraphs of a minimum length, from the mean of their tokens' class
log-probabilities (`doc.span_scores`). Typo diagnostics (Hint) come from the detector in
typos.py; optional surprise diagnostics mark the least likely whole words. Ranges are LSP
ranges (UTF-16 columns) computed from the token start offsets that textsync keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from lsprotocol import types

import inference

from . import markup, typos
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


def word_surprises(spans, surprise: np.ndarray):
    """(start, end, whole-word surprise) of words given as (start, end, first token, end token)."""
    cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
    return [(a, b, float(cumulative[j] - cumulative[i])) for a, b, i, j in spans]


def detector(doc: inference.IncrementalDocument) -> typos.Detector:
    """One detector per loaded model (it caches how candidate words tokenize)."""
    model = doc.model
    found = getattr(model, "_typo_detector", None)
    if found is None:
        found = model._typo_detector = typos.Detector(model.tokenizer)
    return found


def analyse(text: str, starts: np.ndarray, doc: inference.IncrementalDocument,
            lay: markup.Layout) -> tuple[np.ndarray, list, list[typos.WordFinding]]:
    """Token surprise, prose word surprises and typo findings of a text (shared with `vq-lsp score`)."""
    surprise = np.asarray(doc.surprise(0, doc.n_tokens), dtype=np.float64) if doc.n_tokens else np.zeros(0)
    spans = typos.word_tokens(text, starts, len(surprise), list(lay.words(text)))  # prose words with their own tokens
    findings = detector(doc).examine(text, starts, surprise, spans, doc.next_token_logprobs, resolved=True)
    return surprise, word_surprises(spans, surprise), findings


def tone_blocks(tt: TrackedText, doc: inference.IncrementalDocument, lay: markup.Layout):
    """(char start, char end, token start, token end, scores, words) per prose block that may have a tone."""
    out = []
    for a, b, n_words in lay.tone:
        ta, tb = tt.token_span(a, b)
        if ta < tb:
            out.append((a, b, ta, tb, doc.span_scores(ta, tb), n_words))
    return out


def layout_for(text: str, language_id: str, cfg: DiagnosticSettings) -> markup.Layout:
    """The prose of a document by its languageId (and the sourceComments setting)."""
    kind = markup.markup_of(language_id, source_hints="comments" if cfg.source_comments else "off")
    return markup.layout(text, kind, language_id)


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
    def of(cls, tt: TrackedText, doc: inference.IncrementalDocument, version: int | None,
           language_id: str = "plaintext", cfg: DiagnosticSettings | None = None) -> "HintMaterial":
        lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings())
        _, words, findings = analyse(tt.text, tt.token_starts, doc, lay)
        return cls(version, tone_blocks(tt, doc, lay), words, findings)


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
    """The hints the settings ask for: tone of long prose paragraphs, typos, and (if asked) unlikely words."""
    out = []
    if cfg.sentiment:
        for a, b, _, _, scores, n_words in material.paragraphs:
            label, p = _top(scores)
            if n_words >= cfg.tone_min_words and p >= cfg.sentiment_threshold:
                out.append(Hint(a, b, f"{label} tone ({p:.2f})", types.DiagnosticSeverity.Information, "sentiment"))
    typo_at = set()
    if cfg.typo and cfg.max_typo_hints:
        found = [f for f in material.findings if typos.flagged(f, cfg.typo_threshold, cfg.real_word_threshold)]
        for f in sorted(found, key=lambda f: -f.gain)[: cfg.max_typo_hints]:
            typo_at.add(f.start)
            out.append(Hint(f.start, f.end, f"possible typo: {f.explain()}", types.DiagnosticSeverity.Hint, "typo"))
    if cfg.surprise and cfg.max_surprise_hints:
        top = sorted((w for w in material.words if w[2] >= cfg.surprise_threshold and w[0] not in typo_at),
                     key=lambda w: -w[2])[: cfg.max_surprise_hints]
        for a, b, s in top:
            out.append(Hint(a, b, f"unexpected {tt.text[a:b]!r} (surprise {s:.1f}): possible typo or awkward wording",
                            types.DiagnosticSeverity.Hint, "surprise"))
    return out


def diagnostics(tt: TrackedText, material: HintMaterial, cfg: DiagnosticSettings) -> list[types.Diagnostic]:
    return [h.lsp(tt.position, material.version) for h in choose(tt, material, cfg)]


def word_at(text: str, lay: markup.Layout, offset: int) -> tuple[int, int] | None:
    """The prose word touching `offset`, if any."""
    for m in markup.WORD.finditer(text, max(0, offset - 64), min(len(text), offset + 64)):
        if m.start() <= offset <= m.end() and lay.allows(m.start(), m.end()):
            return m.start(), m.end()
    return None


def explain_words(tt: TrackedText, doc: inference.IncrementalDocument, spans) -> list[typos.WordFinding]:
    """The detector's view of words (char spans), flagged or not: each word's surprise and the
    likeliest dictionary words one edit away, two for a non-word with none closer (hover, quick fixes)."""
    surprise = np.asarray(doc.surprise(0, doc.n_tokens), dtype=np.float64)
    return detector(doc).examine(tt.text, tt.token_starts, surprise, spans, doc.next_token_logprobs, force=True)


def hover_text(tt: TrackedText, doc: inference.IncrementalDocument, offset: int, language_id: str = "plaintext",
               cfg: DiagnosticSettings | None = None) -> str:
    label, p = _top(doc.scores)
    lines = [f"**vq-lsp** document: {label} {p:.2f} ({doc.n_tokens} tokens)"]
    lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings())
    for a, b, _, _, scores, _ in tone_blocks(tt, doc, lay):
        if a <= offset <= b:
            pl, pp = _top(scores)
            lines.append(f"paragraph: {pl} {pp:.2f}")
            break
    span = word_at(tt.text, lay, offset)
    for finding in explain_words(tt, doc, [span]) if span else []:
        lines.append(finding.explain())
    detail = ", ".join(f"{k} {v:.2f}" for k, v in doc.scores.items())
    lines.append(f"({detail})")
    return "\n\n".join(lines)


def quick_fixes(tt: TrackedText, doc: inference.IncrementalDocument, a: int, b: int,
                language_id: str = "plaintext", cfg: DiagnosticSettings | None = None) -> list[typos.WordFinding]:
    """The detector's view of every prose word overlapping chars [a, b] (each with its fixes)."""
    lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings())
    spans = [(p, q) for p, q in lay.words(tt.text) if p <= b and a <= q]
    return [f for f in explain_words(tt, doc, spans[:20]) if f.fixes]


def code_lens(uri: str, doc: inference.IncrementalDocument) -> types.CodeLens:
    label, p = _top(doc.scores)
    return types.CodeLens(
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        command=types.Command(title=f"vq-lsp: {label} {p:.2f} (document) · verify", command="vqLsp.verify",
                              arguments=[uri]))
