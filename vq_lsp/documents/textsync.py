"""Text sync: LSP content changes -> our copy of the text -> a minimal token Splice list.

Pure code: no pygls, no model, only a tokenizer with `encode_with_offsets` (chars, not bytes).

Positions arrive as (line, UTF-16 code unit) pairs, as the protocol says; `\\n`, `\\r\\n` and
`\\r` all end a line. A batch of changes is applied in order to the text while the union of
the edited region is tracked; then only that region, widened to *safe boundaries*, is
re-tokenized, and diffed against the old tokens there.

A safe boundary is a character index p where GPT-2's pre-tokenizer must start a new piece
whatever follows, judging only from text[p - 1] and text[p]:
  - text[p - 1] is a letter and text[p] is not (a letter run always ends there), or
  - text[p - 1] is a line break and text[p] is not whitespace (a whitespace run ends there).
The pre-tokenizer has no look-behind and BPE never merges across pieces, so the tokens before
such a p depend only on text[:p + 1] and the tokens from p on only on text[p:]. That is what
makes splicing the re-tokenized middle between the old prefix and suffix tokens exact; the
property test in tests/documents/test_textsync.py checks it against tokenizing from scratch.
"""

from __future__ import annotations

import bisect
import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

import inference

SEARCH_LIMIT = 20_000  # characters to look for a safe boundary before falling back to the text's end


class TextSyncError(ValueError):
    """A content change that cannot be applied (bad range, split surrogate pair)."""


class TokenizerLike(Protocol):
    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...


@dataclass(frozen=True)
class Change:
    """One content change: `range` None means a full replacement. range = (l0, c0, l1, c1)."""

    text: str
    range: tuple[int, int, int, int] | None = None


# ----------------------------------------------------------------- positions
_BREAK = re.compile(r"\r\n|\r|\n")
_BREAK_CHAR = re.compile(r"[\r\n]")


def line_starts(text: str) -> list[int]:
    """Char index of the first char of every line (\\n, \\r\\n and \\r end a line). One regex pass: looking
    for the next \\n and the next \\r separately scanned to the end of a text without \\r once per line
    (seconds for a 2 MB document)."""
    return [0] + [m.end() for m in _BREAK.finditer(text)]


def _next_break(text: str, i: int) -> int:
    m = _BREAK_CHAR.search(text, i)
    return -1 if m is None else m.start()


def _line_end(text: str, start: int) -> int:
    """Index of the line break ending the line that starts at `start` (or len(text))."""
    j = _next_break(text, start)
    return len(text) if j < 0 else j


def utf16_len(s: str) -> int:
    """UTF-16 code units of s, in C: a Python loop over a gigantic single line made every
    diagnostic range on it cost milliseconds (1.5 s per keystroke on a 100,000-char line)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def offset_at(text: str, starts: Sequence[int], line: int, character: int) -> int:
    """Char index of an LSP position. A character past the line's end means the line's end
    (the protocol says so); a line past the last one, or a position inside a surrogate pair,
    is an error."""
    if line < 0 or character < 0:
        raise TextSyncError(f"negative position ({line}, {character})")
    if line >= len(starts):
        if line == len(starts) and character == 0 and text.endswith(("\n", "\r")):
            return len(text)
        raise TextSyncError(f"line {line} is out of range: the document has {len(starts)} lines")
    start = starts[line]
    end = _line_end(text, start)
    if text[start:end].isascii() or utf16_len(text[start:end]) == end - start:  # no surrogate pairs: units = chars
        return min(start + character, end)
    units = 0
    for i in range(start, end):
        if units >= character:
            if units > character:
                raise TextSyncError(f"position ({line}, {character}) splits a surrogate pair")
            return i
        units += 2 if ord(text[i]) > 0xFFFF else 1
    if units > character:
        raise TextSyncError(f"position ({line}, {character}) splits a surrogate pair")
    return end


def position_at(text: str, starts: Sequence[int], offset: int) -> tuple[int, int]:
    """LSP (line, UTF-16 character) of a char index."""
    line = bisect.bisect_right(starts, offset) - 1
    return line, utf16_len(text[starts[line] : offset])


def apply_change(text: str, change: Change, starts: Sequence[int] | None = None) -> tuple[str, int, int, int]:
    """Apply one change. Returns (new text, start, old end, new end) as char indices."""
    if change.range is None:
        return change.text, 0, len(text), len(change.text)
    starts = line_starts(text) if starts is None else starts
    l0, c0, l1, c1 = change.range
    a, b = offset_at(text, starts, l0, c0), offset_at(text, starts, l1, c1)
    if b < a:
        raise TextSyncError(f"range end ({l1}, {c1}) is before its start ({l0}, {c0})")
    return text[:a] + change.text + text[b:], a, b, a + len(change.text)


def _is_line_start(text: str, p: int) -> bool:
    return p == 0 or (text[p - 1] in "\r\n" and not (text[p - 1] == "\r" and p < len(text) and text[p] == "\n"))


def shift_line_starts(starts: list[int], text: str, a: int, b: int, e: int) -> list[int]:
    """Line starts of `text`, which is the old text with chars [a, b) replaced by new ones
    ending at e, from the old text's line starts: without scanning the whole text (a burst of
    k changes to a long document scanned it k times). Whether p starts a line depends only on
    text[p - 1] and text[p], so old starts below a and above b + 1 keep their status."""
    lo = bisect.bisect_left(starts, a)
    hi = bisect.bisect_right(starts, b + 1)
    delta = e - b
    mid = [p for p in range(a, min(e + 1, len(text)) + 1) if _is_line_start(text, p)]
    return starts[:lo] + mid + [p + delta for p in starts[hi:]]


def apply_changes(text: str, changes: Sequence[Change], starts: list[int] | None = None):
    """Apply changes in order, keeping the line starts up to date. Yields (text, starts, a, b, e)
    after each change (char indices as in `apply_change`)."""
    starts = line_starts(text) if starts is None else starts
    for ch in changes:
        text, a, b, e = apply_change(text, ch, starts)
        starts = line_starts(text) if ch.range is None else shift_line_starts(starts, text, a, b, e)
        yield text, starts, a, b, e


# ----------------------------------------------------------------- tokens
def _letter_end(text: str, p: int) -> bool:
    return text[p - 1].isalpha() and not text[p].isalpha()


def _line_start(text: str, p: int) -> bool:
    return text[p - 1] in "\r\n" and not text[p].isspace()


def is_safe(text: str, p: int) -> bool:
    """p (0 < p < len(text)) always starts a new pre-token piece (see the module docstring)."""
    return _letter_end(text, p) or _line_start(text, p)


def safe_left(text: str, limit: int) -> int:
    """Largest safe p with p + 1 <= limit, so that text[:p + 1] lies before the edit; else 0."""
    for p in range(min(limit - 1, len(text) - 1), max(0, limit - SEARCH_LIMIT), -1):
        if is_safe(text, p):
            return p
    return 0


def safe_right(text: str, start: int) -> int:
    """Smallest safe p with p - 1 >= start, so that text[p - 1:] lies after the edit; else len."""
    for p in range(max(start + 1, 1), min(len(text), start + SEARCH_LIMIT)):
        if is_safe(text, p):
            return p
    return len(text)


COUNT_CHUNK = 65_536  # characters tokenized at a time when counting the tokens of a long text


def count_tokens(tokenizer: TokenizerLike, text: str, stop_after: int) -> tuple[int, bool]:
    """(tokens of `text`, whether that is all of them): counted a chunk at a time, cut at safe
    boundaries, and stopped once more than `stop_after` are counted. A text far over the
    document limit is neither tokenized whole nor held as tokens: 2 MB of text tokenized at
    once took seconds and hundreds of MiB of offsets."""
    n, p = 0, 0
    while p < len(text):
        q = safe_right(text, min(p + COUNT_CHUNK, len(text)) - 1) if p + COUNT_CHUNK < len(text) else len(text)
        _, offsets = tokenizer.encode_with_offsets(text[p : q + 1] if q < len(text) else text[p:])
        n += sum(1 for o in offsets if o[0] < q - p)
        p = q
        if n > stop_after:
            return n, p >= len(text)
    return n, True


def tokens_lost_at_most(deleted_chars: int) -> int:
    """An upper bound of the tokens one change that deletes `deleted_chars` characters can remove:
    a character takes at most 4 tokens with it (its UTF-8 bytes), and the re-split around the
    change can merge at most 4 more."""
    return 4 * deleted_chars + 4


@dataclass
class SyncResult:
    splices: list[inference.Splice]
    retokenized_chars: int  # how much text was re-tokenized
    full: bool  # the whole text was tokenized from scratch


class TrackedText:
    """A document's text, its token ids and the char offset where every token starts."""

    def __init__(self, tokenizer: TokenizerLike, text: str) -> None:
        self.tokenizer = tokenizer
        self.text = text
        self._starts_cache: list[int] | None = None
        ids, offsets = tokenizer.encode_with_offsets(text)
        self.ids: list[int] = list(ids)
        self.token_starts = np.asarray([o[0] for o in offsets], dtype=np.int64)

    def copy(self) -> TrackedText:
        """A copy that later edits of this text leave alone (`apply` changes `ids` in place)."""
        twin = copy.copy(self)
        twin.ids = list(self.ids)
        return twin

    @property
    def lines(self) -> list[int]:
        if self._starts_cache is None:
            self._starts_cache = line_starts(self.text)
        return self._starts_cache

    def position(self, offset: int) -> tuple[int, int]:
        return position_at(self.text, self.lines, offset)

    def offset(self, line: int, character: int) -> int:
        return offset_at(self.text, self.lines, line, character)

    def token_span(self, a: int, b: int) -> tuple[int, int]:
        """Token index range of the tokens starting in chars [a, b)."""
        return int(np.searchsorted(self.token_starts, a, "left")), int(np.searchsorted(self.token_starts, b, "left"))

    def token_char_end(self, i: int) -> int:
        return int(self.token_starts[i + 1]) if i + 1 < len(self.ids) else len(self.text)

    def apply(self, changes: Sequence[Change]) -> SyncResult:
        """Apply changes in order; on error nothing changes. Returns the token splices."""
        old, text = self.text, self.text
        lo, hi, full = None, None, any(ch.range is None for ch in changes)  # edited region [lo, hi) in the current text
        starts = self.lines
        for text, starts, a, b, e in apply_changes(text, changes, starts):  # noqa: B007, B020 (a running fold)
            if lo is None:
                lo, hi = a, e
            else:
                lo, hi = min(lo, a), max(max(hi, b) + e - b, e)
        if lo is None:
            return SyncResult([], 0, False)
        self._starts_cache = starts
        delta = len(text) - len(old)
        if full or not old or not text:
            new_ids, offsets = self.tokenizer.encode_with_offsets(text)
            splices = inference.diff(self.ids, new_ids)
            self.text, self.ids = text, list(new_ids)
            self.token_starts = np.asarray([o[0] for o in offsets], dtype=np.int64)
            return SyncResult(splices, len(text), True)
        a = safe_left(text, lo) if lo > 0 else 0
        b = safe_right(text, hi)
        i, j = int(np.searchsorted(self.token_starts, a)), int(np.searchsorted(self.token_starts, b - delta))
        mid_ids, mid_off = self.tokenizer.encode_with_offsets(text[a : b + 1] if b < len(text) else text[a:])
        keep = (
            len(mid_ids) if b >= len(text) else next((k for k, o in enumerate(mid_off) if o[0] >= b - a), len(mid_ids))
        )
        mid_ids = list(mid_ids[:keep])
        mid_starts = np.asarray([o[0] + a for o in mid_off[:keep]], dtype=np.int64)
        splices = [inference.Splice(s.start + i, s.end + i, s.new_ids) for s in inference.diff(self.ids[i:j], mid_ids)]
        self.ids[i:j] = mid_ids
        self.token_starts = np.concatenate([self.token_starts[:i], mid_starts, self.token_starts[j:] + delta])
        self.text = text
        return SyncResult(splices, b - a, False)
