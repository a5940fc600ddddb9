"""The blocks of prose each markup has, as (start, end, may have a tone): Markdown's paragraphs
and headings (markdown-it-py), reStructuredText's paragraphs, titles and admonitions (a small
rule set), and a source file's comments and docstrings. markup.py masks the inline non-prose in
them and makes the layout."""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin


def line_starts(text: str, line_end: re.Pattern = re.compile("\n")) -> list[int]:
    """The offset each line of `text` starts at, lines ending at `line_end`."""
    return [0] + [m.end() for m in line_end.finditer(text)]


# markdown-it's line ends (its normalize rule): the line numbers of its tokens count a lone \r as one too
_MD_LINE_END = re.compile(r"\r\n?|\n")


# ---------------------------------------------------------------------------- Markdown
@lru_cache(maxsize=2)
def _md(front_matter: bool = True) -> MarkdownIt:
    # Block structure only: inline parsing (a third of the time) is not needed, inline code,
    # links and HTML inside prose are masked by _MD_INLINE.
    md = MarkdownIt("commonmark").enable("table")
    return (md.use(front_matter_plugin) if front_matter else md).disable("inline")


def markdown_blocks(text: str, front_matter: bool = True) -> list[tuple[int, int, bool]]:
    """(start, end, may have a tone) of every paragraph and heading; table cells excluded."""
    starts = line_starts(text, _MD_LINE_END)
    out, in_table, heading = [], 0, False
    for t in _md(front_matter).parse(text):
        if t.type == "table_open":
            in_table += 1
        elif t.type == "table_close":
            in_table -= 1
        elif t.type == "heading_open":
            heading = True
        elif t.type == "heading_close":
            heading = False
        elif t.type == "inline" and not in_table and t.map:
            l0, l1 = t.map
            a = starts[l0]
            b = starts[l1] if l1 < len(starts) else len(text)
            out.append((a, b, not heading))
    return out


# ---------------------------------------------------------------------------- reStructuredText
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")
_RST_DIRECTIVE = re.compile(r"^\s*\.\.(?:\s|$)")
_RST_ADMONITION = re.compile(
    r"^\s*\.\.\s+(note|warning|tip|important|attention|caution|danger|error|hint|seealso|admonition)::", re.IGNORECASE
)
_RST_TABLE = re.compile(r"^\s*(?:\+[-=+]+\+\s*|=+(?:\s+=+)+\s*)$")


def rst_blocks(text: str) -> list[tuple[int, int, bool]]:
    """Paragraphs, titles and admonition bodies; literal blocks (after `::`), other directives,
    comments and tables are left out. A block is a run of non-blank lines."""
    starts = line_starts(text)
    lines = text.split("\n")
    out = []
    skip_indent: int | None = None  # inside a literal block / directive body indented deeper than this
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].strip():
            j += 1
        block = lines[i:j]
        indent = len(block[0]) - len(block[0].lstrip())
        if skip_indent is not None and indent > skip_indent:
            i = j
            continue
        skip_indent = None
        a, b = starts[i], (starts[j] - 1 if j < len(starts) else len(text))
        first = block[0]
        if _RST_DIRECTIVE.match(first):
            skip_indent = indent
            if _RST_ADMONITION.match(first):
                skip_indent = None  # an admonition's body is prose
                head = first.split("::", 1)[1]
                if head.strip() or len(block) > 1:
                    out.append((starts[i] + len(first) - len(head), b, True))
        elif any(_RST_TABLE.match(line) for line in block) or block[0].lstrip().startswith("|") and "|" in block[0][1:]:
            pass
        else:
            title = len(block) <= 3 and any(_RST_ADORNMENT.match(line) for line in block)
            out.append((a, b, not title))
            if block[-1].rstrip().endswith("::"):
                skip_indent = indent
        i = j
    return out


# ---------------------------------------------------------------------------- source code
_STRING = r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
_COMMENTS = {
    "hash": re.compile(rf"{_STRING}|(?P<c>#[^\n]*)"),
    "slash": re.compile(rf"{_STRING}|`(?:\\.|[^`\\])*`|(?P<c>//[^\n]*|/\*[\s\S]*?(?:\*/|$))"),
    "dash": re.compile(rf"{_STRING}|(?P<c>--[^\n]*)"),
}
_PYTHON = re.compile(rf"(?P<c>\"\"\"[\s\S]*?(?:\"\"\"|$)|'''[\s\S]*?(?:'''|$))|{_STRING}|(?P<h>#[^\n]*)")


def comment_spans(text: str, family: str, python: bool) -> list[tuple[int, int]]:
    """Comments (and in Python, triple-quoted strings: docstrings) of a source file; strings skipped."""
    if python:
        return [(m.start(), m.end()) for m in _PYTHON.finditer(text) if m.group("c") or m.group("h")]
    return [(m.start("c"), m.end("c")) for m in _COMMENTS[family].finditer(text) if m.group("c")]
