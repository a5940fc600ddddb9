"""Neutral paragraphs: prose that carries no opinion, for the "no tone" target.

Why: a head trained only on reviews must call every paragraph positive or negative, and it did
so with high confidence on technical documentation. Paragraphs of technical and encyclopedic
text (the Rust book, a command-line README, Wikipedia articles, all under
``$VQ_LSP_DATA/revisions/``) and Gutenberg narration (paragraphs without dialogue) are trained
towards a uniform distribution over the two classes, so the score stays a per-token two-class
quantity and neutral text lands near 0.5, below any hint threshold.

A paragraph is what the server gives a tone: a tone block of ``vq_lsp.hints.markup.layout`` (Markdown
for the book and README, plain text otherwise) with its word count. Each source document falls
into one part by a hash of its name (``train``, ``calibration`` or ``test``); Gutenberg's own
``valid`` books are split between calibration and test, its ``train`` books train. Nothing under
``eval/`` is read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vq_lsp.hints import markup  # the server's prose layout (tests/test_architecture.py allows it)

from .data import read_jsonl_gz

PARTS = ("train", "calibration", "test")
SOURCES = ("rust_book", "command_line_readme", "wikipedia", "gutenberg_narration")
_QUOTES = ('"', "“", "”", "‘")


@dataclass(frozen=True)
class NeutralParagraph:
    """One prose paragraph without an opinion, with where it came from."""

    text: str
    source: str  # one of SOURCES
    document: str  # chapter, article or book it belongs to (the unit of the train/test split)
    words: int  # words as the server counts them for its tone gate


def part_of(document: str, calibration: float = 0.1, test: float = 0.1) -> str:
    """The part a document belongs to, from a hash of its name (stable across runs and machines)."""
    u = int(hashlib.sha1(document.encode()).hexdigest()[:8], 16) / 2**32
    return "test" if u < test else "calibration" if u < test + calibration else "train"


def tone_paragraphs(text: str, markup_kind: str, min_words: int, max_words: int) -> list[tuple[str, int]]:
    """(paragraph, words) of the tone blocks the server would score, within a word range."""
    lay = markup.layout(text, markup_kind)
    return [(text[a:b].strip(), n) for a, b, n in lay.tone if min_words <= n <= max_words]


def _documents(data_dir: Path) -> Iterator[tuple[str, str, str, str]]:
    """(source, document name, markup kind, text) of the newest version of every document."""
    rev = Path(data_dir) / "revisions"
    for row in read_jsonl_gz(rev / "rust_book_chapters.jsonl.gz"):
        yield "rust_book", "rust_book/" + row["doc"], markup.MARKDOWN, row["revisions"][-1]["text"]
    for row in read_jsonl_gz(rev / "art_of_command_line_README_en.jsonl.gz"):
        yield "command_line_readme", "readme/" + row["doc"], markup.MARKDOWN, row["revisions"][-1]["text"]
    for row in read_jsonl_gz(rev / "wiki_versions.jsonl.gz"):
        yield "wikipedia", "wikipedia/" + row["title"], markup.PLAIN, row["versions"][-1]


def _is_narration(paragraph: str) -> bool:
    """No quotation marks: narration, not a character's speech (which may well carry an opinion)."""
    return not any(q in paragraph for q in _QUOTES)


def _gutenberg(data_dir: Path, part: str, min_words: int, max_words: int) -> Iterator[NeutralParagraph]:
    split = "train" if part == "train" else "valid"
    path = Path(data_dir) / "gutenberg" / "gutenberg_subset.jsonl.gz"
    for row in read_jsonl_gz(path):
        if row.get("split") != split:
            continue
        name = f"gutenberg/{row['author']}/{row['title']}"
        if split == "valid" and part_of(name, calibration=0.5, test=0.5) != part:
            continue
        for text, n in tone_paragraphs(row["text"], markup.PLAIN, min_words, max_words):
            if _is_narration(text):
                yield NeutralParagraph(" ".join(text.split()), "gutenberg_narration", name, n)


def neutral_paragraphs(
    data_dir: Path,
    part: str,
    limit: int,
    seed: int = 0,
    min_words: int = 12,
    max_words: int = 300,
    gutenberg_share: float = 0.25,
) -> list[NeutralParagraph]:
    """A seeded sample of ``limit`` paragraphs of one part: technical and encyclopedic paragraphs
    first, Gutenberg narration making up ``gutenberg_share`` of them (books are long: without a
    cap they would crowd out the documentation)."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, not {part!r}")
    rng = random.Random(seed)
    technical = [
        NeutralParagraph(text, source, name, n)
        for source, name, kind, doc in _documents(data_dir)
        if part_of(name) == part or (source == "command_line_readme" and part == "train")
        for text, n in tone_paragraphs(doc, kind, min_words, max_words)
    ]
    narration = list(_gutenberg(data_dir, part, min_words, max_words))
    rng.shuffle(technical)
    rng.shuffle(narration)
    n_story = min(len(narration), round(limit * gutenberg_share))
    chosen = technical[: limit - n_story] + narration[:n_story]
    rng.shuffle(chosen)
    return chosen


def write_training_book_heads(data_dir: Path, out: Path, chars: int) -> int:
    """Write a Gutenberg file of the training books only, each cut to its first `chars` characters
    at a paragraph break, in the data folder's format: the narration the "train" part samples from,
    small enough to travel to a GPU machine (the whole file is 45 MB). Returns the books written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    books = 0
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for row in read_jsonl_gz(Path(data_dir) / "gutenberg" / "gutenberg_subset.jsonl.gz"):
            if row.get("split") != "train":
                continue
            text = row["text"]
            cut = text.rfind("\n\n", 0, chars) if len(text) > chars else len(text)
            fh.write(json.dumps({**row, "text": text[: cut if cut > 0 else chars]}) + "\n")
            books += 1
    return books
