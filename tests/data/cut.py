"""Cut the test fixtures in this folder from the full data folder (`$VQ_LSP_DATA`, never its eval/).

    VQ_LSP_DATA=/path/to/data python -m tests.data.cut

The fixtures keep the data folder's layout and formats, so the code under test reads them exactly as it
reads the full files; README.md in this folder lists what each holds and its licence.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Rust book chapters whose whole revision history the tests replay (tests/conftest.py, tests/reliability).
README = "art_of_command_line_README_en.jsonl.gz"  # its newest revision only
HISTORIES = ("src/ch12-02-reading-a-file.md", "src/ch12-00-an-io-project.md")
CHAPTERS = 89  # the first 89 chapters (last revision only) hold the 51 of 2,000+ tokens the memory test opens
BOOKS = {"train": (3, 80_000), "valid": (2, 320_000)}  # books per split, characters kept from each (valid:
# enough held-out text for the 200,000 tokens `vq-train evaluate` reads, with a 49,152-token vocabulary)
REVIEWS = {"train": 150, "test": 100}  # IMDB rows from each end of a split file (the files are sorted by class)
SESSIONS = 3  # CoAuthor typing sessions, the first of the file
ARTICLES = 20  # Wikipedia articles (their newest version), the first of the file: neutral prose for training


def rows(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def write(path: Path, out_rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as raw:  # mtime 0: the same input gives the same bytes
        raw.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out_rows).encode("utf-8"))


def cut_at_paragraph(text: str, chars: int) -> str:
    end = text.rfind("\n\n", 0, chars)
    return text[: end if end > 0 else chars]


def main() -> int:
    data = Path(os.environ.get("VQ_LSP_DATA", ""))
    if not (data / "revisions").is_dir():
        print("set VQ_LSP_DATA to the full data folder", file=sys.stderr)
        return 2
    chapters = []
    for i, row in enumerate(rows(data / "revisions" / "rust_book_chapters.jsonl.gz")):
        if row["doc"] in HISTORIES:
            chapters.append(row)
        elif i < CHAPTERS:
            chapters.append(dict(row, n_revisions=1, revisions=row["revisions"][-1:]))
    write(HERE / "revisions" / "rust_book_chapters.jsonl.gz", chapters)
    readme = [dict(r, n_revisions=1, revisions=r["revisions"][-1:]) for r in rows(data / "revisions" / README)]
    write(HERE / "revisions" / README, readme)
    articles = []
    for row in rows(data / "revisions" / "wiki_versions.jsonl.gz"):
        articles.append(dict(row, versions=row["versions"][-1:]))
        if len(articles) == ARTICLES:
            break
    write(HERE / "revisions" / "wiki_versions.jsonl.gz", articles)

    books, left = [], {k: n for k, (n, _) in BOOKS.items()}
    for row in rows(data / "gutenberg" / "gutenberg_subset.jsonl.gz"):
        if left.get(row["split"], 0) > 0:
            left[row["split"]] -= 1
            books.append(dict(row, text=cut_at_paragraph(row["text"], BOOKS[row["split"]][1])))
    write(HERE / "gutenberg" / "gutenberg_subset.jsonl.gz", books)

    for split, n in REVIEWS.items():
        reviews = list(rows(data / "imdb" / f"imdb_{split}.jsonl.gz"))
        write(HERE / "imdb" / f"imdb_{split}.jsonl.gz", reviews[:n] + reviews[-n:])

    sessions = []
    for row in rows(data / "typing" / "coauthor_sessions.jsonl.gz"):
        sessions.append(row)
        if len(sessions) == SESSIONS:
            break
    write(HERE / "typing" / "coauthor_sessions.jsonl.gz", sessions)

    (HERE / "gpt2_tokenizer").mkdir(exist_ok=True)
    for name in ("vocab.json", "merges.txt", "LICENSE"):
        shutil.copyfile(data / "gpt2_tokenizer" / name, HERE / "gpt2_tokenizer" / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
