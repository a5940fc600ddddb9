"""The writer's conventions applied to the hints: dictionaries, ignore comments, excludes, severities.

`choose` is what the server (documents/publisher.py) and `vq-lsp check` (scoring/check.py) both call
for a text's hints: it removes from the hint material what the writer's dictionaries and the
document's ignore comments rule out (before the selection caps the counts, so a dictionary word
never takes a typo hint's place), lets `selection.select` (through `lsp.choose`) pick as always,
and gives each hint its kind's severity from the settings.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from ..settings import DiagnosticSettings
from . import excludes, grammar, ignores, lsp, markup
from .dictionary import Dictionary
from .material import HintMaterial, TokenizedText, layout_for

if TYPE_CHECKING:
    from .caches import HintCaches


@dataclass(frozen=True)
class Conventions:
    """What the workspace and the writer decided beyond the settings: the words they keep (workspace,
    user and configuration-file dictionaries together) and the workspace root that exclude globs are
    relative to."""

    dictionary: Dictionary = Dictionary()
    root: str | None = None  # the workspace root folder, a path

    def excludes(self, uri: str, patterns: tuple[str, ...]) -> bool:
        return excludes.excluded(uri, self.root, patterns)


def markup_kind(language_id: str, cfg: DiagnosticSettings) -> str:
    return markup.markup_of(language_id, source_hints="comments" if cfg.source_comments else "off")


def allowed_material(
    text: str, material: HintMaterial, words: Dictionary, silenced: ignores.Ignores, surprise: bool = True
) -> HintMaterial:
    """The material without what the dictionary or the ignore comments rule out; with `surprise`
    False (no unlikely-word hints asked for) the prose words, which only those hints read, are
    left as they are."""
    if not words.words and not silenced.regions:
        return material
    findings = [f for f in material.findings if f.word not in words and not silenced.silences("typo", f.start, f.end)]
    unlikely = material.words
    if surprise:
        unlikely = [
            w
            for w in material.words
            if text[w[0] : w[1]] not in words and not silenced.silences("surprise", w[0], w[1])
        ]
    tones = [p for p in material.paragraphs if not silenced.silences("sentiment", p.start, p.end)]
    return dataclasses.replace(material, findings=findings, words=unlikely, paragraphs=tones)


def choose(
    tt: TokenizedText,
    material: HintMaterial,
    cfg: DiagnosticSettings,
    conventions: Conventions,
    language_id: str = "plaintext",
    *,
    caches: HintCaches,
) -> list[lsp.Hint]:
    """The hints of a text under the writer's conventions, each with its kind's severity."""
    silenced, words = _silenced_and_words(tt, cfg, conventions, language_id)
    picked = lsp.choose(tt, allowed_material(tt.text, material, words, silenced, cfg.surprise), cfg)
    if cfg.grammar:
        lay = layout_for(tt.text, language_id, cfg, caches)
        placed = caches.grammar.paragraph_lints(tt.text, lay, words.words)
        picked += _grammar_hints(placed, picked, silenced)
    severity = {code: severity_of(code, cfg) for code in {h.code for h in picked}}
    return [h if h.severity == severity[h.code] else _with_severity(h, severity[h.code]) for h in picked]


def _silenced_and_words(
    tt: TokenizedText, cfg: DiagnosticSettings, conventions: Conventions, language_id: str
) -> tuple[ignores.Ignores, Dictionary]:
    """The text's ignore comments, and the writer's words with the words those comments add."""
    silenced = ignores.find(tt.text, markup_kind(language_id, cfg), language_id)
    return silenced, conventions.dictionary.union(silenced.words)


def warm_grammar(
    tt: TokenizedText, cfg: DiagnosticSettings, conventions: Conventions, language_id: str, *, caches: HintCaches
) -> None:
    """Lint every paragraph with the words `choose` will import, so that its lints are cached
    (the server's build worker, before a freshly built state is handed over); chooses nothing."""
    if cfg.grammar:
        words = _silenced_and_words(tt, cfg, conventions, language_id)[1]
        caches.grammar.paragraph_lints(tt.text, layout_for(tt.text, language_id, cfg, caches), words.words)


def _with_severity(h: lsp.Hint, severity: str) -> lsp.Hint:
    return dataclasses.replace(h, severity=severity)


def grammar_lints(
    text: str, language_id: str, cfg: DiagnosticSettings, words: Dictionary, *, caches: HintCaches
) -> list[grammar.GrammarLint]:
    """Harper's lints of the document's prose, with the writer's words."""
    return caches.grammar.lints(text, layout_for(text, language_id, cfg, caches), words.words)


def grammar_hints(
    text: str, lints: list[grammar.GrammarLint], word_hints: list[lsp.Hint], silenced: ignores.Ignores
) -> list[lsp.Hint]:
    """Harper's lints as hints: none where the model already flags a word (one hint per span) or
    an ignore comment silences grammar."""
    return _grammar_hints([(0, tuple(lints))], word_hints, silenced)


def _grammar_hints(
    placed: list[tuple[int, tuple[grammar.GrammarLint, ...]]], word_hints: list[lsp.Hint], silenced: ignores.Ignores
) -> list[lsp.Hint]:
    """`grammar_hints` of lints given per paragraph, relative to its start (grammar.paragraph_lints):
    each kept lint is placed once, as its hint."""
    taken = sorted((h.start, h.end) for h in word_hints if h.code != "sentiment")
    taken_starts = [a for a, _ in taken]
    reach = list(accumulate((b for _, b in taken), max))  # the furthest end of the word hints so far
    out = []
    for at, lints in placed:
        for lint in lints:
            start, end = lint.start + at, lint.end + at
            i = bisect.bisect_left(taken_starts, end)  # the word hints starting before the lint ends
            if (i and reach[i - 1] > start) or silenced.silences("grammar", start, end):
                continue
            source = f"harper: {lint.kind}, {lint.rule}" if lint.rule else f"harper: {lint.kind}"  # grammar.rules names
            out.append(lsp.Hint(start, end, f"{lint.message} ({source})", "hint", "grammar"))
    return out


def severity_of(code: str, cfg: DiagnosticSettings) -> str:
    """A hint kind's severity from the settings (`diagnostics.typoSeverity` ...), one of SEVERITIES."""
    return getattr(cfg, f"{code}_severity", "hint")
