"""Which parts of a document are prose: where word hints may go, and which blocks get a tone.

The model reads the whole text either way; this only decides what is *hinted*. Markdown is
parsed with markdown-it-py (CommonMark, tables, front matter): only paragraphs and headings
are prose, so tables, fenced and indented code, HTML blocks and front matter get no hints.
reStructuredText uses a small rule set (literal blocks after `::`, directives, comments,
tables, section underlines). Source files hint only their comments and docstrings (or
nothing, a setting). Inside prose, inline code, URLs, link targets, autolinks and inline HTML
are masked too. A tone block is a prose paragraph (never a heading) of at least a minimum
number of words, so install commands and one-line list items get no tone.

The blocks of prose each markup has are found in markup_blocks.py, the chunks a Markdown text is
parsed in in markdown_chunks.py; this module masks the inline non-prose and keeps each chunk's
layout.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePath

import numpy as np

from .markdown_chunks import markdown_chunks
from .markup_blocks import comment_spans, markdown_blocks, rst_blocks
from .paragraphs import PARAGRAPH

MARKDOWN, RST, PLAIN, SOURCE, NONE = "markdown", "rst", "plain", "source", "none"

_LANGUAGE_MARKUP = {"markdown": MARKDOWN, "mdx": MARKDOWN, "restructuredtext": RST, "rst": RST}
# languageId -> comment syntax family, for source files
_HASH = (
    "python",
    "shellscript",
    "sh",
    "bash",
    "ruby",
    "perl",
    "r",
    "yaml",
    "toml",
    "makefile",
    "dockerfile",
    "powershell",
    "julia",
    "elixir",
    "coffeescript",
    "cmake",
    "nim",
)
_SLASH = (
    "c",
    "cpp",
    "csharp",
    "java",
    "javascript",
    "javascriptreact",
    "typescript",
    "typescriptreact",
    "go",
    "rust",
    "swift",
    "kotlin",
    "scala",
    "dart",
    "php",
    "objective-c",
    "objective-cpp",
    "groovy",
    "zig",
    "css",
    "scss",
    "less",
    "jsonc",
    "proto",
)
_DASH = ("lua", "sql", "haskell", "elm", "ada")
_SOURCE = {**{k: "hash" for k in _HASH}, **{k: "slash" for k in _SLASH}, **{k: "dash" for k in _DASH}}
_SUFFIX = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".rst": "rst",
    ".txt": "plaintext",
    ".py": "python",
    ".sh": "shellscript",
    ".rb": "ruby",
    ".pl": "perl",
    ".r": "r",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".java": "java",
    ".js": "javascript",
    ".ts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".swift": "swift",
    ".kt": "kotlin",
    ".scala": "scala",
    ".lua": "lua",
    ".sql": "sql",
    ".hs": "haskell",
    ".css": "css",
    ".php": "php",
}

WORD = re.compile(r"(?<![\w@/\\'’-])[A-Za-z]+(?:['’][A-Za-z]+)*(?![\w@/\\]|['’]\w|\.\w)")

# Inline things inside prose that are not prose
_URL = r"(?:[a-z][a-z0-9+.-]*://|www\.|mailto:)[^\s<>()\[\]`]*[^\s<>()\[\]`.,;:!?'\"]"
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_MD_INLINE = re.compile(
    "|".join(
        [
            r"(`+)[\s\S]*?\1",  # code span
            r"\]\([^)\n]*\)",
            r"\]\[[^\]\n]*\]",  # link targets: [text](target), [text][ref]
            r"^\s*\[[^\]\n]+\]:.*$",  # a reference definition line
            r"<[a-zA-Z][a-zA-Z0-9+.-]*:[^\s<>]*>",
            r"<[^\s<>@]+@[^\s<>]+>",  # autolinks
            r"</?[a-zA-Z][a-zA-Z0-9-]*(?:\s[^<>]*)?/?>",  # a tag, its attributes (alt="...") on any of its lines
            r"<!--[\s\S]*?-->",  # inline HTML
            _URL,
            _EMAIL,
        ]
    ),
    re.MULTILINE | re.IGNORECASE,
)
_RST_INLINE = re.compile(
    "|".join(
        [
            r"``[\s\S]+?``",  # inline literal
            r":[\w.+-]+:`[^`]*`",  # a role: :ref:`target`
            r"<[^<>\s]+>`_{1,2}",  # hyperlink target inside a reference
            r"\|[^|\s][^|\n]*\|_{0,2}",  # substitution reference
            _URL,
            _EMAIL,
        ]
    ),
    re.IGNORECASE,
)
_PLAIN_INLINE = re.compile("|".join([r"`[^`\n]+`", _URL, _EMAIL]), re.IGNORECASE)


@dataclass(frozen=True)
class Layout:
    """Character ranges of a text: `prose` (sorted, disjoint) may carry word hints; `tone`
    holds (start, end, words) of the paragraphs that may have a tone when they have enough words."""

    prose: tuple[tuple[int, int], ...]
    tone: tuple[tuple[int, int, int], ...]

    def allows(self, a: int, b: int) -> bool:
        """Whether [a, b) lies inside one prose range."""
        i = bisect.bisect_right(self.prose, (a, float("inf"))) - 1
        return i >= 0 and self.prose[i][0] <= a and b <= self.prose[i][1]

    def words(self, text: str):
        """(start, end) of every word inside the prose ranges."""
        for a, b in self.prose:
            for m in WORD.finditer(text, a, b):
                yield m.start(), m.end()


def language_of(name: str) -> str:
    """An LSP languageId for a file name (batch scoring has names, not languageIds)."""
    return _SUFFIX.get(PurePath(name).suffix.lower(), "plaintext")


def comment_family(language_id: str) -> str | None:
    """How a source language writes a line comment: "hash" (#), "slash" (//) or "dash" (--); None: not source."""
    return _SOURCE.get(language_id.lower())


def markup_of(language_id: str | None = None, name: str | None = None, source_hints: str = "comments") -> str:
    """The markup to parse a document as, from its LSP languageId or (batch) its file name;
    source files give SOURCE, or NONE when `source_hints` is "off"."""
    lang = (language_id or "").lower()
    if not lang and name:
        lang = language_of(name)
    if lang in _LANGUAGE_MARKUP:
        return _LANGUAGE_MARKUP[lang]
    if lang in _SOURCE:
        return SOURCE if source_hints == "comments" else NONE
    return PLAIN


def layout(text: str, markup: str, language_id: str = "") -> Layout:
    """The prose ranges and tone blocks of `text` read as `markup`."""
    if markup == NONE:
        return Layout((), ())
    if markup == MARKDOWN:
        return _markdown_layout(text)
    elif markup == RST:
        blocks = rst_blocks(text)
        inline = _RST_INLINE
    elif markup == SOURCE:
        blocks = [
            (a, b, False)
            for a, b in comment_spans(text, _SOURCE.get(language_id.lower(), "hash"), language_id.lower() == "python")
        ]
        inline = _PLAIN_INLINE
    else:
        blocks = [(m.start(), m.end(), True) for m in PARAGRAPH.finditer(text)]
        inline = _PLAIN_INLINE
    return Layout(*_masked(text, blocks, inline))


def _masked(text: str, blocks, inline: re.Pattern) -> tuple[tuple, tuple]:
    """(prose, tone) of `blocks` ((start, end, may have a tone)) with the inline non-prose masked."""
    prose, tone = [], []
    for a, b, may_tone in blocks:
        pieces = _subtract(a, b, [(m.start(), m.end()) for m in inline.finditer(text, a, b)])
        prose.extend(pieces)
        if may_tone:
            tone.append((a, a + len(text[a:b].rstrip()), sum(1 for p, q in pieces for _ in WORD.finditer(text, p, q))))
    return tuple(sorted(prose)), tuple(tone)


@lru_cache(maxsize=16384)
def _markdown_chunk_layout(chunk: str, first: bool) -> tuple[tuple, tuple]:
    """(prose, tone) of one chunk, offsets in the chunk; only the first chunk may hold front matter."""
    return _masked(chunk, markdown_blocks(chunk, first), _MD_INLINE)


@lru_cache(maxsize=16384)
def _markdown_chunk_arrays(chunk: str, first: bool) -> tuple[np.ndarray, np.ndarray]:
    """`_markdown_chunk_layout` as (k, 2) and (k, 3) int64 arrays."""
    prose, tone = _markdown_chunk_layout(chunk, first)
    return np.asarray(prose, dtype=np.int64).reshape(-1, 2), np.asarray(tone, dtype=np.int64).reshape(-1, 3)


def _markdown_layout(text: str) -> Layout:
    """The layout of a Markdown text from its chunks' kept layouts, each moved to its place (all at
    once: a long document has hundreds of chunks and thousands of prose ranges)."""
    prose, tone, prose_at, tone_at = [], [], [], []
    for c0, c1 in markdown_chunks(text):
        p, t = _markdown_chunk_arrays(text[c0:c1], c0 == 0)
        if len(p):
            prose.append(p)
            prose_at.append((c0, len(p)))
        if len(t):
            tone.append(t)
            tone_at.append((c0, len(t)))
    return Layout(_placed_rows(prose, prose_at, 2), _placed_rows(tone, tone_at, 3))


def _placed_rows(rows: list[np.ndarray], at: list[tuple[int, int]], width: int) -> tuple:
    """Chunks' rows of offsets moved by their chunk's start (the first two columns), as tuples."""
    if not rows:
        return ()
    where = np.asarray(at, dtype=np.int64)
    shift = np.zeros(width, dtype=np.int64)
    shift[:2] = 1
    moved = np.concatenate(rows) + np.repeat(where[:, 0], where[:, 1])[:, None] * shift
    return tuple(map(tuple, moved.tolist()))


def _subtract(a: int, b: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, cur = [], a
    for p, q in sorted(holes):
        if p > cur:
            out.append((cur, p))
        cur = max(cur, q)
    if cur < b:
        out.append((cur, b))
    return out
