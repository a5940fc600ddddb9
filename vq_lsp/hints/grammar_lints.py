"""Grammar lints as the hints read them: the lint and replacement records, vq-lsp's own
demonstrative-agreement rule, the text Harper is given (`masked`), and the steps from Harper's
lints to those shown (`harper_lint`, `shown`, `inside`)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from .grammar_rules import DEMONSTRATIVE_RULE, Rules

_DEMONSTRATIVE = re.compile(r"\b(?:(this)[ \t]+(are)|(these|those)[ \t]+(is|was|has))\b", re.IGNORECASE)
_NOT_NEWLINE = re.compile(r"[^\n]")
PLACEHOLDER = "\ue000"  # a private-use character: what stands in for markup taken out of a sentence (`masked`)


@dataclass(frozen=True)
class Replacement:
    """Replace text[start:end] with `text` (Harper's replace, remove and insert-after suggestions)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class GrammarLint:
    """One Harper lint, in char offsets of the text."""

    start: int
    end: int
    kind: str  # Harper's lint kind: Agreement, Repetition, WordChoice, Capitalization, ...
    message: str
    fixes: tuple[Replacement, ...]  # best first
    rule: str = ""  # the rule that found it (Harper's name, e.g. AnA, or DEMONSTRATIVE_RULE): what grammar.rules names

    def shifted(self, by: int) -> GrammarLint:
        return GrammarLint(
            self.start + by,
            self.end + by,
            self.kind,
            self.message,
            tuple(Replacement(r.start + by, r.end + by, r.text) for r in self.fixes),
            self.rule,
        )


def demonstrative_lints(text: str) -> list[GrammarLint]:
    """ "this are", "these is", "those was": a demonstrative and a verb of the other number, next
    to each other (DEMONSTRATIVE_RULE). Not "that are" ("the files that are read") nor "this
    were" ("if this were so")."""
    out = []
    for m in _DEMONSTRATIVE.finditer(text):
        if m.group(1):
            a, b = m.start(1), m.end(2)
            word, verb = m.group(1), m.group(2)
            fixes = (word[0] + "hese " + verb, word + " is")
        else:
            a, b = m.start(3), m.end(4)
            word, verb = m.group(3), m.group(4)
            plural = {"is": "are", "was": "were", "has": "have"}[verb.lower()]
            singular = word[0] + ("his" if word.lower() == "these" else "hat")
            fixes = (word + " " + plural, singular + " " + verb)
        message = f"`{word}` and `{verb}` disagree in number: did you mean `{fixes[0]}`?"
        out.append(
            GrammarLint(a, b, "Agreement", message, tuple(Replacement(a, b, f) for f in fixes), DEMONSTRATIVE_RULE)
        )
    return out


def masked(text: str, prose: tuple[tuple[int, int], ...]) -> str:
    """`text` as Harper reads it: the prose as written; what the markup handling took out of a
    prose line (inline code, a role, a link's target, inline HTML, a URL) as a run of the same
    length of PLACEHOLDER, a character of no script that Harper reads as a word it can say
    nothing about (blanked to spaces, "an `Err` value" read as "an value" and drew "a"; a code
    span of the same length reads as well but costs Harper's Markdown parser a third more time
    per paragraph); everything else outside the prose (code blocks, tables, markup lines)
    blanked to spaces. Newlines are kept: offsets do not move."""
    out, at = [], 0
    for a, b in (*prose, (len(text), len(text))):
        if a > at:
            out.append(_hole(text, at, a, touches_before=at > 0, touches_after=a < len(text)))
        out.append(text[a:b])
        at = b
    return "".join(out)


def _hole(text: str, a: int, b: int, touches_before: bool, touches_after: bool) -> str:
    """The non-prose text[a:b] between prose ranges, as Harper reads it (see `masked`): each of
    its lines' pieces that sits on a line with prose (it meets the prose before it on the same
    line, or the prose after it) becomes PLACEHOLDER of its length, the rest spaces."""
    pieces = text[a:b].split("\n")
    out = []
    for k, piece in enumerate(pieces):
        inline = (k == 0 and touches_before and text[a - 1] != "\n") or (k == len(pieces) - 1 and touches_after)
        if inline and piece.strip():
            out.append(PLACEHOLDER * len(piece))
        else:
            out.append(_NOT_NEWLINE.sub(" ", piece))
    return "\n".join(out)


def harper_lint(lint, kind: str, rule: str) -> GrammarLint:
    """One of Harper's lints as a GrammarLint, its suggestions as replacements."""
    a, b = lint.span.start, lint.span.end
    fixes = []
    for s in lint.suggestions:
        name = getattr(s.kind, "name", str(s.kind))
        if name == "INSERT_AFTER":
            fixes.append(Replacement(b, b, s.replacement_text))
        else:  # REPLACE, or REMOVE (an empty replacement)
            fixes.append(Replacement(a, b, s.replacement_text))
    return GrammarLint(a, b, kind, lint.message, tuple(dict.fromkeys(fixes)), rule)


def shown(lints: tuple[GrammarLint, ...], rules: Rules) -> list[GrammarLint]:
    """The lints `rules` keep, none overlapping one before it (one hint per span; `lints` are
    sorted by start)."""
    out: list[GrammarLint] = []
    for lint in lints:
        if rules.keeps(lint.rule, lint.kind) and not (out and lint.start < out[-1].end):
            out.append(lint)
    return out


def inside(prose: tuple[tuple[int, int], ...], a: int, b: int) -> bool:
    """Whether [a, b) lies inside one of the sorted, disjoint `prose` ranges."""
    i = bisect.bisect_right(prose, (a, float("inf"))) - 1
    return i >= 0 and prose[i][0] <= a and b <= prose[i][1]
