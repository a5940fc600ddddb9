"""The chunks a Markdown text is parsed in (markup.py): a keystroke re-parses only the chunk it
changed, each chunk's layout kept by its text."""

from __future__ import annotations

import re

# A Markdown document is parsed chunk by chunk, each chunk's layout cached by its text, so that a
# keystroke re-parses only the chunk it changed. Chunks end at blank lines after which a line starts
# in column 0 (no block continues across those: an indented line after a blank may continue a list
# item or be code, so it stays with the chunk before), never inside fenced code, front matter, an
# HTML comment or a raw HTML block (<pre>, <script>, <style>, <textarea>), which may hold blank lines.
_CHUNK_BREAK = re.compile(r"\n[ \t]*\n(?=\S)")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.MULTILINE)
_SPANNING = re.compile(
    r"<!--[\s\S]*?(?:-->|$(?![\s\S]))"
    r"|^<(pre|script|style|textarea)[\s>][\s\S]*?(?:</\1>|$(?![\s\S]))",
    re.MULTILINE | re.IGNORECASE,
)
_FRONT_MATTER = re.compile(r"---[ \t]*\n[\s\S]*?(?:^(?:---|\.\.\.)[ \t]*$|\Z)", re.MULTILINE)


def markdown_chunks(text: str) -> list[tuple[int, int]]:
    """(start, end) of the chunks a Markdown text is parsed in, covering it in order."""
    closed: list[tuple[int, int]] = []  # spans no chunk may end inside
    fence: tuple[str, int, int] | None = None  # (marker char, length, start) of an open fence
    for m in _FENCE_LINE.finditer(text):
        marker = m.group(1)
        if fence is None:
            if marker[0] == "`" and "`" in m.group(2):
                continue  # an info string with a backtick: not a fence
            fence = (marker[0], len(marker), m.start())
        elif marker[0] == fence[0] and len(marker) >= fence[1] and not m.group(2).strip():
            closed.append((fence[2], m.end()))
            fence = None
    if fence is not None:
        closed.append((fence[2], len(text)))
    closed += _spanning(text)
    if text.startswith("---"):
        m = _FRONT_MATTER.match(text)
        if m:
            closed.append((0, m.end()))
    closed.sort()
    out, start, k, reach = [], 0, 0, -1
    for m in _CHUNK_BREAK.finditer(text):
        at = m.end()
        while k < len(closed) and closed[k][0] < at:
            reach = max(reach, closed[k][1])
            k += 1
        if at <= reach:
            continue
        out.append((start, at))
        start = at
    if start < len(text) or not out:
        out.append((start, len(text)))
    return out


def _spanning(text: str) -> list[tuple[int, int]]:
    """(start, end) of every _SPANNING match, as `_SPANNING.finditer` finds them, trying the
    pattern only at a "<" (the regex engine's own scan of a whole document was the slow part)."""
    out, at = [], text.find("<")
    while at >= 0:
        m = _SPANNING.match(text, at)
        if m is not None:
            out.append((m.start(), m.end()))
        at = text.find("<", m.end() if m is not None else at + 1)
    return out
