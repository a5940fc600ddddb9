"""Data access for training: streaming readers and fixed-length token chunks.

Why streaming: the Gutenberg subset is 121 MB of text and this pipeline runs on a small CPU,
so every stage reads only as much text as it needs (a token budget), never the whole corpus.

The data folder is always passed in (CLI option ``--data`` or env ``VQ_LSP_DATA``); nothing here
knows where it lives. ``eval/`` is never read by training code.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def resolve_data_dir(path: str | os.PathLike | None) -> Path:
    """The data folder from an explicit path or ``VQ_LSP_DATA``; a clear error if neither."""
    raw = path if path is not None else os.environ.get("VQ_LSP_DATA")
    if not raw:
        raise SystemExit("no data folder: pass --data DIR or set VQ_LSP_DATA")
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        raise SystemExit(f"data folder {folder} does not exist")
    return folder


def clean_imdb(text: str) -> str:
    """IMDB texts keep the original ``<br />`` tags; they are line breaks."""
    return _BR.sub("\n", text).strip()


def read_jsonl_gz(path: Path) -> Iterator[dict]:
    if not path.is_file():
        raise SystemExit(f"missing data file {path}")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def iter_gutenberg(data_dir: Path, split: str = "train") -> Iterator[str]:
    """Book texts of one split ('train' or 'valid'), in file order."""
    for row in read_jsonl_gz(Path(data_dir) / "gutenberg" / "gutenberg_subset.jsonl.gz"):
        if row.get("split") == split:
            yield row["text"]


def iter_imdb(data_dir: Path, split: str = "train") -> Iterator[tuple[str, int]]:
    """(cleaned text, label 0/1) for the labelled IMDB split 'train' or 'test'."""
    for row in read_jsonl_gz(Path(data_dir) / "imdb" / f"imdb_{split}.jsonl.gz"):
        yield clean_imdb(row["text"]), int(row["label"])


def imdb_examples(
    data_dir: Path, split: str, limit: int | None = None, seed: int = 0, holdout: int = 0
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """A seeded shuffle of an IMDB split (the files are sorted by class).

    Returns (examples, held_out): the last ``holdout`` shuffled rows are kept apart as a
    validation set so that nothing is tuned on the test split.
    """
    rows = list(iter_imdb(data_dir, split))
    random.Random(seed).shuffle(rows)
    held = rows[len(rows) - holdout :] if holdout else []
    rows = rows[: len(rows) - holdout] if holdout else rows
    if limit is not None:
        rows = rows[:limit]
    return rows, held


def _book_pieces(text: str, piece_chars: int) -> Iterator[str]:
    """Cut a book into paragraph-aligned pieces of about ``piece_chars`` characters."""
    start = 0
    while start < len(text):
        end = min(len(text), start + piece_chars)
        if end < len(text):
            cut = text.rfind("\n\n", start + piece_chars // 2, end)
            end = cut if cut > start else end
        piece = text[start:end].strip()
        if piece:
            yield piece
        start = end


def lm_texts(data_dir: Path, split: str = "train", seed: int = 0, piece_chars: int = 20_000) -> Iterator[str]:
    """Language-model text: Gutenberg pieces interleaved with IMDB reviews.

    Books are cut into pieces and the pieces of all books shuffled with the reviews, so that a
    short run already sees many books and the review register the classifier will need.
    'valid' uses the Gutenberg valid split and the IMDB test text (unlabelled use only).
    """
    yield from _lm_texts(str(data_dir), split, seed, piece_chars)


@functools.lru_cache(maxsize=4)
def _lm_texts(data_dir: str, split: str, seed: int, piece_chars: int) -> tuple[str, ...]:
    """Cached: decompressing and cutting the corpus takes seconds; stages in one process share it."""
    data = Path(data_dir)
    pieces = [p for book in iter_gutenberg(data, split) for p in _book_pieces(book, piece_chars)]
    reviews = [t for t, _ in iter_imdb(data, "train" if split == "train" else "test")]
    everything = pieces + reviews
    random.Random(seed).shuffle(everything)
    return tuple(everything)


def token_stream(encode, texts: Iterable[str], eos_id: int) -> Iterator[int]:
    """Token ids of consecutive texts, each followed by ``eos_id`` as a separator."""
    for text in texts:
        yield from encode(text)
        yield eos_id


def collect_tokens(encode, texts: Iterable[str], eos_id: int, n_tokens: int, batch: int = 256) -> torch.Tensor:
    """The first ``n_tokens`` of the token stream as one int32 tensor (N,).

    ``encode`` maps a list of texts to a list of id lists (batched for speed).
    """
    out: list[int] = []
    buf: list[str] = []
    it = iter(texts)
    while len(out) < n_tokens:
        buf = [t for _, t in zip(range(batch), it)]
        if not buf:
            break
        for ids in encode(buf):
            out.extend(ids)
            out.append(eos_id)
    if len(out) < n_tokens:
        raise SystemExit(f"asked for {n_tokens} tokens but the data has only {len(out)}")
    return torch.tensor(out[:n_tokens], dtype=torch.int32)  # (N,)


def sample_chunks(tokens: torch.Tensor, batch: int, length: int, step: int, seed: int) -> torch.Tensor:
    """A batch of random contiguous chunks (batch, length), a pure function of (seed, step).

    Making each batch depend only on the step number is what makes ``--resume`` reproduce an
    uninterrupted run exactly.
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, tokens.numel() - length, (batch,), generator=g)  # (B,)
    idx = starts[:, None] + torch.arange(length)[None, :]  # (B, L)
    return tokens[idx].long()  # (B, L)


def ordered_positions(batch: int, length: int, pool: int, generator: torch.Generator) -> torch.Tensor:
    """Sorted distinct positions (batch, length) drawn from range(pool), position 0 first.

    Training on ordered random subsets of the pool teaches the model to use only the order of
    positions, which is what lets an inserted token take a free position between neighbours.
    One row is the engine's own `sample_positions`, so training and inference cannot drift apart.
    """
    from inference.positions import sample_positions

    return torch.stack([sample_positions(length, pool, generator) for _ in range(batch)])  # (B, L)
