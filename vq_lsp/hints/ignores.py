"""Ignore comments: the writer silences hints where a rule does not fit, in the document itself.

In a comment of the document's own markup (an HTML comment in Markdown, a `..` comment line in
reStructuredText, a comment in a source file, a line of its own in plain text):

- `vq-lsp-disable` ... `vq-lsp-enable`: no hints between the two lines (to the end without an enable);
- `vq-lsp-disable-next-line`: no hints on the next non-blank line;
- `vq-lsp: ignore` (source comments, as harper's `harper:ignore`): no hints on its own line;
- `vq-lsp-words: dtype stdio`: words of this document's own dictionary (the "Ignore 'X' in this
  document" quick fix writes one).

The first three take an optional list of kinds (`vq-lsp-disable typo grammar`; `tone` is another
name for `sentiment`); without one they silence every kind. A directive's own line never gets hints.
Hints are silenced when they overlap a silenced region: a tone paragraph with a disabled line in it
shows no tone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import markup

KINDS = ("sentiment", "typo", "surprise", "grammar")  # the diagnostic codes
ALIASES = {"tone": "sentiment", "spelling": "typo"}
WORDS_DIRECTIVE = "vq-lsp-words:"

_DIRECTIVE = re.compile(
    r"vq-lsp-(?P<what>disable-next-line|disable|enable)(?P<kinds>(?:[ \t]+(?:[a-z]+))*)(?![\w-])"
    r"|vq-lsp-words:(?P<words>[^\n]*)"
    r"|(?P<ignore>vq-lsp:[ \t]*ignore)\b"
)
_WORD = re.compile(r"[A-Za-z][\w'’-]*[\w]|[A-Za-z]")
_MD_COMMENT = re.compile(r"<!--([\s\S]*?)-->")
_RST_COMMENT = re.compile(r"^[ \t]*\.\.[ \t]+(?=vq-lsp)([^\n]*)$", re.MULTILINE)
_OWN_LINE = re.compile(r"^[ \t]*(?=vq-lsp)([^\n]*)$", re.MULTILINE)


@dataclass(frozen=True)
class Region:
    """Characters [start, end) where hints of `kinds` are silenced."""

    start: int
    end: int
    kinds: frozenset[str]


@dataclass(frozen=True)
class Ignores:
    """The silenced regions of one text and the words of its own dictionary."""

    regions: tuple[Region, ...] = ()
    words: frozenset[str] = frozenset()

    def silences(self, kind: str, start: int, end: int) -> bool:
        """Whether a hint of `kind` over [start, end) falls in a region silencing it."""
        return any(r.start < max(end, start + 1) and start < r.end and kind in r.kinds for r in self.regions)


def _kinds(text: str) -> frozenset[str]:
    names = [ALIASES.get(k, k) for k in text.split()]
    chosen = frozenset(k for k in names if k in KINDS)
    return chosen or frozenset(KINDS)


def _line_bounds(text: str, offset: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, len(text) if end < 0 else end


def _next_line(text: str, offset: int) -> tuple[int, int] | None:
    """The next non-blank line after the line holding `offset`."""
    _, end = _line_bounds(text, offset)
    for m in re.finditer(r"[^\n]*", text[end + 1 :] if end < len(text) else ""):
        if m.group().strip():
            return end + 1 + m.start(), end + 1 + m.end()
    return None


def _comments(text: str, kind: str, language_id: str) -> list[tuple[int, int]]:
    """(start, end) of the places where directives count: the markup's comments."""
    if kind == markup.MARKDOWN:
        return [(m.start(1), m.end(1)) for m in _MD_COMMENT.finditer(text)]
    if kind == markup.RST:
        return [(m.start(1), m.end(1)) for m in _RST_COMMENT.finditer(text)]
    if kind == markup.SOURCE:
        return list(markup.layout(text, markup.SOURCE, language_id).prose)
    if kind == markup.NONE:
        return []
    return [(m.start(1), m.end(1)) for m in _OWN_LINE.finditer(text)]


def find(text: str, kind: str, language_id: str = "") -> Ignores:
    """The ignore comments of `text` read as markup `kind` (markup.MARKDOWN, RST, SOURCE, PLAIN)."""
    if "vq-lsp" not in text:
        return Ignores()
    regions: list[Region] = []
    words: set[str] = set()
    open_since: dict[str, int] = {}
    every = frozenset(KINDS)
    for a, b in sorted(_comments(text, kind, language_id)):
        for m in _DIRECTIVE.finditer(text, a, b):
            line_start, line_end = _line_bounds(text, m.start())
            comment_end = _line_bounds(text, max(m.end() - 1, m.start()))[1]
            regions.append(Region(line_start, max(line_end, comment_end), every))
            if m.group("words") is not None:
                words.update(_WORD.findall(m.group("words").split("-->")[0]))
            elif m.group("ignore"):
                continue  # its own line, added above
            elif m.group("what") == "disable-next-line":
                nxt = _next_line(text, m.end())
                if nxt is not None:
                    regions.append(Region(nxt[0], nxt[1], _kinds(m.group("kinds"))))
            elif m.group("what") == "disable":
                for k in _kinds(m.group("kinds")):
                    open_since.setdefault(k, line_start)
            else:  # enable
                for k in _kinds(m.group("kinds")):
                    if k in open_since:
                        regions.append(Region(open_since.pop(k), line_start, frozenset({k})))
    for k, since in open_since.items():
        regions.append(Region(since, len(text), frozenset({k})))
    return Ignores(tuple(regions), frozenset(words))


_LINE_COMMENT = {"hash": "# {} ", "slash": "// {} ", "dash": "-- {} "}
_EXISTING_WORDS = re.compile(r"vq-lsp-words:")


def document_words_insert(text: str, language_id: str, word: str) -> tuple[int, str]:
    """(offset, text to insert) that makes `word` part of the document's own dictionary: appended to
    its `vq-lsp-words:` comment when it has one, else a new comment line in the document's markup,
    at the top (after front matter in Markdown, after a `#!` line in a source file)."""
    kind = markup.markup_of(language_id)
    comments = _comments(text, kind, language_id) if "vq-lsp-words:" in text else []
    for a, b in comments:
        m = _EXISTING_WORDS.search(text, a, b)
        if m:
            return m.end(), f" {word}"
    at = 0
    if kind == markup.MARKDOWN:
        line = f"<!-- vq-lsp-words: {word} -->\n"
        front = re.match(r"---[ \t]*\r?\n[\s\S]*?\n---[ \t]*(?:\r?\n|$)", text)
        if front:
            at = front.end()
    elif kind == markup.RST:
        line = f".. vq-lsp-words: {word}\n\n"
    elif kind == markup.SOURCE:
        family = markup.comment_family(language_id) or "hash"
        line = _LINE_COMMENT[family].format("vq-lsp-words:") + word + "\n"
        if text.startswith("#!"):
            at = text.find("\n") + 1 or len(text)
    else:
        line = f"vq-lsp-words: {word}\n\n"
    return at, line
