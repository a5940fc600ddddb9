"""A thin wrapper over a `tokenizers` byte-level BPE saved as `tokenizer.json`.

The engine sees token ids only; this is where text becomes ids (no BOS added: the engine puts
BOS at the head of every window itself) and where the paragraph and line-break tokens that
windows are cut after are found.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer as _HFTokenizer
from tokenizers import decoders, models, pre_tokenizers


class Tokenizer:
    def __init__(self, inner: _HFTokenizer) -> None:
        self.inner = inner

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        return cls(_HFTokenizer.from_file(str(path)))

    @classmethod
    def from_gpt2_files(cls, vocab: str | Path, merges: str | Path) -> Tokenizer:
        """GPT-2's byte-level BPE from its vocab.json and merges.txt (no network)."""
        tok = _HFTokenizer(models.BPE.from_file(str(vocab), str(merges)))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        return cls(tok)

    def save(self, path: str | Path) -> None:
        self.inner.save(str(path))

    @property
    def vocab_size(self) -> int:
        return self.inner.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and the character span of each token in `text`."""
        enc = self.inner.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets

    def decode(self, ids: list[int]) -> str:
        return self.inner.decode(ids, skip_special_tokens=False)

    def token_text(self, token_id: int) -> str:
        return self.inner.decode([token_id], skip_special_tokens=False)

    @cached_property
    def line_break_ids(self) -> frozenset[int]:
        """Tokens whose text holds a line break."""
        return frozenset(i for i in range(self.vocab_size) if "\n" in self.token_text(i))

    @cached_property
    def paragraph_break_ids(self) -> frozenset[int]:
        """Tokens whose text holds a blank line (a paragraph boundary)."""
        return frozenset(i for i in self.line_break_ids if "\n\n" in self.token_text(i))

    @cached_property
    def newline_end_ids(self) -> frozenset[int]:
        """Tokens whose text ends with a line break (two in a row make a blank line)."""
        return frozenset(i for i in self.line_break_ids if self.token_text(i).endswith("\n"))


def paragraph_breaks(ids, paragraph_ids: frozenset[int], newline_end_ids: frozenset[int]) -> np.ndarray:
    """True at every token where a blank line ends: one token holding it, or two line ends in a row.

    Byte-level BPE often splits "\n\nThe" into "\n", "\n", "The", so looking for "\n\n" tokens
    alone would miss most paragraph boundaries.
    """
    arr = np.asarray(ids, dtype=np.int64)
    ends = members(arr, newline_end_ids)
    strong = members(arr, paragraph_ids)
    strong[1:] |= ends[1:] & ends[:-1]
    return strong


def members(arr: np.ndarray, ids: frozenset[int]) -> np.ndarray:
    """Whether each token id of `arr` is one of `ids` (a new bool array). A lookup in a table over the
    ids, made once per set: np.isin sorts both sides on every call, and an edit asks a few times."""
    table = _table(ids)
    return table[np.minimum(arr, len(table) - 1)]


@lru_cache(maxsize=16)
def _table(ids: frozenset[int]) -> np.ndarray:
    """True at each of `ids`, then one False that every larger id reads."""
    table = np.zeros(max(ids, default=-1) + 2, dtype=bool)
    table[list(ids)] = True
    return table
