"""Replay of real consecutive revisions (the Rust book) through inference.diff, verified each time."""

import gzip
import json

import pytest

import inference

from .helpers import tiny_model

DOC = "src/ch12-02-reading-a-file.md"


@pytest.fixture(scope="module")
def gpt2(data_dir):
    folder = data_dir / "gpt2_tokenizer"
    return inference.Tokenizer.from_gpt2_files(folder / "vocab.json", folder / "merges.txt")


@pytest.fixture(scope="module")
def revisions(data_dir):
    with gzip.open(data_dir / "revisions" / "rust_book_chapters.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            if row["doc"] == DOC:
                return [r["text"] for r in row["revisions"]]
    pytest.fail(f"{DOC} not found in the revisions data")


def test_real_revision_history_replays_exactly(gpt2, revisions):
    assert len(revisions) >= 21
    model = tiny_model(7, tokenizer=gpt2, vocab_size=50257, window_tokens=512, position_pool=51200)
    doc = inference.IncrementalDocument(model, gpt2.encode(revisions[0]))
    assert len(doc.windows) >= 2  # real paragraph-boundary windows are exercised
    changed = 0
    for text in revisions[1:]:
        new_ids = gpt2.encode(text)
        splices = inference.diff(doc.token_ids, new_ids)
        res = doc.apply(splices)
        assert doc.token_ids == new_ids
        check = doc.verify()
        assert check.codes_equal, check
        assert check.max_abs_diff < 1e-4
        changed += bool(splices)
        assert res.cost.incremental_macs <= res.cost.dense_macs or not splices
    assert changed >= 20


def test_windows_are_cut_after_paragraph_breaks(gpt2, revisions):
    model = tiny_model(8, tokenizer=gpt2, vocab_size=50257, window_tokens=256, position_pool=25600)
    ids = gpt2.encode(revisions[-1])
    doc = inference.IncrementalDocument(model, ids)
    assert len(doc.window_bounds) >= 3
    for start, end in doc.window_bounds[:-1]:
        assert end - start <= 255
        assert gpt2.decode(ids[start:end]).endswith("\n\n"), repr(gpt2.decode(ids[end - 3 : end + 1]))
