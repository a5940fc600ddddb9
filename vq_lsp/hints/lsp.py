"""What the editor shows: the selected hints as LSP diagnostics, hover text, quick fixes and the code lens.

Hints follow the markup (markup.py): only prose is hinted, never tables, code, URLs or front
matter, while the model still reads the whole text. Tone (sentiment diagnostics, Information)
goes to prose paragraphs of a minimum length, from the mean of their tokens' class
log-probabilities (`doc.span_scores`). Typo diagnostics (Hint) come from the detector in
the typos package; optional surprise diagnostics mark the least likely whole words. Which hints are
shown is decided by selection.py alone; this module only words and places them. Ranges are
LSP ranges (UTF-16 columns) computed from the token start offsets that text sync keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

import inference

from ..settings import DiagnosticSettings
from . import selection, typos, wording
from .material import HintMaterial, TokenizedText, explain_words, layout_for, tone_blocks, word_at

if TYPE_CHECKING:
    from .caches import HintCaches

SOURCE = "vq-lsp"
VERIFY_COMMAND = "vqLsp.verify"
QUICK_FIX_CODES = ("typo", "surprise")  # diagnostic codes that get quick fixes

# A hint's severity is one of settings.SEVERITIES, the hints' own; LSP's number only at this edge.
LSP_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}

Position = Callable[[int], tuple[int, int]]  # char offset -> LSP (line, UTF-16 character)
Range = tuple[int, int, int, int]  # LSP (line, character, line, character)


@dataclass(frozen=True)
class QuickFix:
    """A word a quick fix may replace: the detector's finding of it (its fixes, best first) and
    where it lies, as LSP (line, UTF-16 character) positions of the document's text."""

    finding: typos.WordFinding
    start: tuple[int, int]
    end: tuple[int, int]


def lsp_range(tt: TokenizedText, a: int, b: int) -> dict:
    (l0, c0), (l1, c1) = tt.position(a), tt.position(b)
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


@dataclass(frozen=True)
class Hint:
    """One diagnostic in char offsets of the text it was chosen for (ranges move with edits)."""

    start: int
    end: int
    message: str
    severity: str  # settings.SEVERITIES: "error", "warning", "information" or "hint"
    code: str
    label: str | None = None  # a tone hint's label ("positive"): what `vq-lsp score` lists it by

    def lsp(self, position: Position, computed_for: int | None) -> types.Diagnostic:
        """As an LSP diagnostic; `data.version` names the version whose state chose it."""
        (l0, c0), (l1, c1) = position(self.start), position(self.end)
        return types.Diagnostic(
            range=types.Range(types.Position(l0, c0), types.Position(l1, c1)),
            message=self.message,
            severity=LSP_SEVERITY[self.severity],
            source=SOURCE,
            code=self.code,
            data={"version": computed_for},
        )


def choose(tt: TokenizedText, material: HintMaterial, cfg: DiagnosticSettings) -> list[Hint]:
    """The hints `selection.select` picks, worded as diagnostics: tones, then typos, then unlikely words."""
    picked = selection.select(material, cfg)
    out = [
        Hint(t.start, t.end, wording.tone(t.label, t.probability), "information", "sentiment", t.label)
        for t in picked.tones
    ]
    out += [
        Hint(f.start, f.end, wording.typo(f), "hint", "typo")
        for f in sorted(picked.typos, key=lambda f: (f.start, f.end))  # text order, however the findings were gathered
    ]
    out += [
        Hint(
            s.start,
            s.end,
            wording.surprise(tt.text[s.start : s.end], s.surprise),
            "hint",
            "surprise",
        )
        for s in picked.surprises
    ]
    return out


def diagnostics(tt: TokenizedText, material: HintMaterial, cfg: DiagnosticSettings) -> list[types.Diagnostic]:
    return [h.lsp(tt.position, material.version) for h in choose(tt, material, cfg)]


def hover_text(
    tt: TokenizedText,
    doc: inference.IncrementalDocument,
    offset: int,
    language_id: str = "plaintext",
    cfg: DiagnosticSettings | None = None,
    *,
    caches: HintCaches,
) -> str:
    if not has_text(tt.text):
        return f"**vq-lsp** document: {NO_TEXT}"
    label, p = selection.top_label(doc.scores)
    lines = [f"**vq-lsp** document: {label} {p:.2f} ({doc.n_tokens} tokens)"]
    lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings(), caches)
    for block in tone_blocks(tt.token_starts, doc, lay):
        if block.start <= offset <= block.end:
            pl, pp = selection.top_label(block.scores)
            lines.append(f"paragraph: {pl} {pp:.2f}")
            break
    span = word_at(tt.text, lay, offset)
    cfg = cfg or DiagnosticSettings()
    for f in explain_words(tt, doc, [span], language_id, cfg, caches=caches) if span else []:
        shown = cfg.typo and typos.flagged(f, cfg.typo_threshold, cfg.real_word_threshold)
        lines.append(wording.typo(f) if shown else f.describe())
    detail = ", ".join(f"{k} {v:.2f}" for k, v in doc.scores.items())
    lines.append(f"({detail})")
    return "\n\n".join(lines)


def has_text(text: str) -> bool:
    """Whether a document has anything to score: an empty one, or one whose text was all deleted
    (blanks and punctuation only), has no tone, and the model's score of nothing is no verdict."""
    return any(ch.isalnum() for ch in text)


NO_TEXT = "no text"


def code_lens(uri: str, text: str, doc: inference.IncrementalDocument) -> types.CodeLens:
    if has_text(text):
        label, p = selection.top_label(doc.scores)
        title = f"vq-lsp: {label} {p:.2f} (document) · verify"
    else:
        title = f"vq-lsp: {NO_TEXT} · verify"
    return types.CodeLens(
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        command=types.Command(title=title, command=VERIFY_COMMAND, arguments=[uri]),
    )


def _pos(p: types.Position) -> tuple[int, int]:
    return p.line, p.character


def meeting(diagnostics: list[types.Diagnostic], at: types.Range) -> list[types.Diagnostic]:
    """The diagnostics whose range meets `at` (a cursor touching a word's either end counts),
    nearest to its start first: what a code-action request at a cursor or selection is about."""
    a, b = _pos(at.start), _pos(at.end)
    met = [d for d in diagnostics if _pos(d.range.start) <= b and a <= _pos(d.range.end)]
    return sorted(
        met,
        key=lambda d: (_pos(d.range.start) > a, abs(d.range.start.line - a[0]), abs(d.range.start.character - a[1])),
    )


def fixable(diagnostics: list[types.Diagnostic], at: types.Range | None = None) -> list[types.Diagnostic]:
    """Our diagnostics that quick fixes answer (typos and unlikely words); with `at`, only those
    that meet it, nearest first (see `meeting`)."""
    ours = [d for d in diagnostics if d.source == SOURCE and d.code in QUICK_FIX_CODES]
    return ours if at is None else meeting(ours, at)


def diagnostic_range(d: types.Diagnostic) -> Range:
    return d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character


def quick_fix_actions(
    uri: str,
    diagnostics: list[types.Diagnostic],
    found: list[tuple[Range, list[QuickFix]]],
) -> list[types.CodeAction]:
    """Code actions replacing each diagnostic's words with their likeliest fixes, best first (the
    first fix of each diagnostic is the preferred one; a word's fixes are those its hint
    names, see material.quick_fixes). `found` pairs with `diagnostics`, as the
    document store's quick_fixes request returns it: (range, its words)."""
    actions = []
    for d, (_, findings) in zip(diagnostics, found):
        first = len(actions)
        for fix in findings:
            f, (l0, c0), (l1, c1) = fix.finding, fix.start, fix.end
            for word, logp in f.fixes:
                edit = types.TextEdit(range=types.Range(types.Position(l0, c0), types.Position(l1, c1)), new_text=word)
                actions.append(
                    types.CodeAction(
                        title=f"Replace {f.word!r} with {word!r} (p = {math.exp(logp):.2g} here)",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[d],
                        is_preferred=len(actions) == first,
                        edit=types.WorkspaceEdit(changes={uri: [edit]}),
                    )
                )
    return actions
