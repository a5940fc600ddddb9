"""Replay of real consecutive revisions (the Rust book) through inference.diff, verified each time."""

import inference

from .helpers import tiny_model


def test_real_revision_history_replays_exactly(gpt2_tokenizer, rust_book_revisions):
    assert len(rust_book_revisions) >= 21
    model = tiny_model(7, tokenizer=gpt2_tokenizer, vocab_size=50257, window_tokens=512, position_pool=51200)
    doc = inference.IncrementalDocument(model, gpt2_tokenizer.encode(rust_book_revisions[0]))
    assert len(doc.windows) >= 2  # real paragraph-boundary windows are exercised
    changed = 0
    for text in rust_book_revisions[1:]:
        new_ids = gpt2_tokenizer.encode(text)
        splices = inference.diff(doc.token_ids, new_ids)
        res = doc.apply(splices)
        assert doc.token_ids == new_ids
        check = doc.verify()
        assert check.codes_equal, check
        assert check.max_abs_diff < 1e-4
        changed += bool(splices)
        assert res.cost.incremental_macs <= res.cost.dense_macs or not splices
    assert changed >= 20


def test_windows_are_cut_after_paragraph_breaks(gpt2_tokenizer, rust_book_revisions):
    model = tiny_model(8, tokenizer=gpt2_tokenizer, vocab_size=50257, window_tokens=256, position_pool=25600)
    ids = gpt2_tokenizer.encode(rust_book_revisions[-1])
    doc = inference.IncrementalDocument(model, ids)
    assert len(doc.window_bounds) >= 3
    for start, end in doc.window_bounds[:-1]:
        assert end - start <= 255
        assert gpt2_tokenizer.decode(ids[start:end]).endswith("\n\n"), repr(
            gpt2_tokenizer.decode(ids[end - 3 : end + 1])
        )
