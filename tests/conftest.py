"""Shared fixtures: the data folder and small models the tests build themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# Tests run many tiny tensor ops: one thread avoids OpenMP spin-waiting when the cores are busy.
torch.set_num_threads(1)

DATA = Path(os.environ.get("VQ_LSP_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"data folder {DATA} not found: set VQ_LSP_DATA")
    return DATA


@pytest.fixture(scope="session")
def gpt2_tokenizer(data_dir):
    import inference

    folder = data_dir / "gpt2_tokenizer"
    return inference.Tokenizer.from_gpt2_files(folder / "vocab.json", folder / "merges.txt")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, gpt2_tokenizer) -> Path:
    """A small random VQ model folder with the GPT-2 tokenizer (no trained model needed)."""
    import inference
    from tests.engine.helpers import tiny_model

    model = tiny_model(11, tokenizer=gpt2_tokenizer, vocab_size=50257, window_tokens=256, position_pool=25600)
    return inference.save_model_folder(
        model.net, gpt2_tokenizer, tmp_path_factory.mktemp("model") / "tiny", {"note": "random weights, for tests"}
    )


REPLAY_DOC = "src/ch12-02-reading-a-file.md"  # a Rust book chapter with 29 consecutive revisions


@pytest.fixture(scope="session")
def rust_book_revisions(data_dir) -> list[str]:
    """Texts of REPLAY_DOC's consecutive revisions, oldest first (real edit history)."""
    import gzip
    import json

    with gzip.open(data_dir / "revisions" / "rust_book_chapters.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            if row["doc"] == REPLAY_DOC:
                return [r["text"] for r in row["revisions"]]
    pytest.fail(f"{REPLAY_DOC} not found in the revisions data")
