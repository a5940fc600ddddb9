"""Data readers, batching helpers and the tokenizer."""

from __future__ import annotations

import pytest
import torch

from training.data import clean_imdb, imdb_examples, ordered_positions, resolve_data_dir, sample_chunks
from training.tokenizer import SPECIALS, gpt2_tokenizer, load_tokenizer


def test_clean_imdb_turns_br_tags_into_line_breaks():
    assert clean_imdb("Good.<br /><br />Really<br/>good<BR>") == "Good.\n\nReally\ngood"


def test_data_dir_needs_an_explicit_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("VQ_LSP_DATA", raising=False)
    with pytest.raises(SystemExit):
        resolve_data_dir(None)
    with pytest.raises(SystemExit):
        resolve_data_dir(tmp_path / "missing")
    monkeypatch.setenv("VQ_LSP_DATA", str(tmp_path))
    assert resolve_data_dir(None) == tmp_path


def test_imdb_shuffle_mixes_classes_and_holds_out(data_dir):
    rows, held = imdb_examples(data_dir, "train", limit=200, seed=0, holdout=50)
    assert len(rows) == 200 and len(held) == 50
    assert 50 < sum(y for _, y in rows) < 150  # the file is sorted by class; the shuffle mixes
    assert not any("<br" in t for t, _ in rows)
    assert not {t for t, _ in rows} & {t for t, _ in held}


def test_chunks_depend_only_on_step():
    tokens = torch.arange(1000, dtype=torch.int32)
    a, b = sample_chunks(tokens, 3, 16, 7, 0), sample_chunks(tokens, 3, 16, 7, 0)
    assert torch.equal(a, b) and a.shape == (3, 16)
    assert not torch.equal(a, sample_chunks(tokens, 3, 16, 8, 0))
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(3, 15, dtype=torch.long))  # contiguous


def test_ordered_positions_are_sorted_distinct_and_start_at_zero():
    pos = ordered_positions(4, 50, 1000, torch.Generator().manual_seed(0))
    assert pos.shape == (4, 50)
    assert (pos[:, 0] == 0).all() and (pos[:, 1:] > pos[:, :-1]).all() and (pos < 1000).all()


def test_trained_bpe_has_opt_special_ids_and_round_trips(tiny_tokenizer):
    tok = load_tokenizer(tiny_tokenizer)
    assert [tok.token_to_id(s) for s in SPECIALS] == [0, 1, 2, 3]
    text = "It was a dark and stormy night.\n\nThe film, however, was great!"
    ids = tok.encode(text, add_special_tokens=False).ids
    assert min(ids) >= 4 and tok.decode(ids) == text


def test_gpt2_reuse_shifts_ids_behind_the_specials(data_dir):
    tok = gpt2_tokenizer(data_dir / "gpt2_tokenizer")
    assert tok.get_vocab_size() == 50257 - 1 + 4
    assert [tok.token_to_id(s) for s in SPECIALS] == [0, 1, 2, 3]
    text = "Hello world, this is GPT-2's merges."
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == text
    assert ids[0] == 15496 + 4  # "Hello" is 15496 in GPT-2
