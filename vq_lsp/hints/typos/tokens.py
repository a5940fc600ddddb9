"""Words as tokens: which tokens are exactly a word, and the few words after a word that a
confusable is read on over."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# A confusable and its partners are also scored on the words after them, up to this many tokens (never
# past a line break): "quiet, orderly" and "quite, orderly" read alike up to the word itself.
WORDS_AFTER_TOKENS = 4


def token_span(text: str, starts: np.ndarray, n_tokens: int, a: int, b: int) -> tuple[int, int] | None:
    """Tokens [i, j) that are exactly the word text[a:b] (plus leading whitespace on the first);
    None when a token straddles the word's edge (glued to punctuation or digits)."""
    spans = word_tokens(text, starts, n_tokens, [(a, b)])
    return spans[0][2:4] if spans else None


def word_tokens(text: str, starts: np.ndarray, n_tokens: int, words: Sequence[tuple[int, int]]):
    """(a, b, i, j) for each word text[a:b] whose tokens [i, j) are its own (see token_span),
    in one vectorised search: the server does this for every prose word on every publish."""
    if not len(words) or not n_tokens:
        return []
    starts = np.asarray(starts[:n_tokens])
    ab = np.asarray(words, dtype=np.int64).reshape(-1, 2)
    i = np.searchsorted(starts, ab[:, 0], "right") - 1
    j = np.searchsorted(starts, ab[:, 1], "left")
    ok = (i >= 0) & (j > i)
    ok &= (j >= n_tokens) | (starts[np.minimum(j, n_tokens - 1)] == ab[:, 1])
    out = []
    for k in np.flatnonzero(ok).tolist():
        a, b, ti = int(ab[k, 0]), int(ab[k, 1]), int(i[k])
        if not text[int(starts[ti]) : a].strip():
            out.append((a, b, ti, int(j[k])))
    return out


def words_after(text: str, starts: Sequence[int], n_tokens: int, j: int) -> str:
    """The text of at most WORDS_AFTER_TOKENS tokens from token j on, stopping before the first
    that holds a line break (a paragraph's findings depend on its own text only), and never
    ending inside a word: a word the token limit cuts is left out, and so is a last word that
    ends the paragraph without punctuation. That is the word being typed, and reading on over
    each of its letters would cost a forward pass per keystroke for a word not written yet (a
    finished paragraph ends in punctuation)."""
    k, last = j, min(j + WORDS_AFTER_TOKENS, n_tokens)
    while k < last:
        end = int(starts[k + 1]) if k + 1 < n_tokens else len(text)
        if "\n" in text[int(starts[k]) : end]:
            break
        k += 1
    stop = int(starts[k]) if k < n_tokens else len(text)
    at_end = k == n_tokens or "\n" in text[stop : int(starts[k + 1]) if k + 1 < n_tokens else len(text)]
    if k > j and text[stop - 1].isalnum() and (at_end or text[stop : stop + 1].isalnum()):
        while k > j and not text[int(starts[k - 1])].isspace():
            k -= 1
        k = max(k - 1, j)  # the last word's first token (it starts with its space) goes too
    return text[int(starts[j]) : int(starts[k]) if k < n_tokens else len(text)] if k > j else ""
