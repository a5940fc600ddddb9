"""Many rows recomputed at once go by blocks of positions, each against only the keys before it, and
a few rows read only the first slots when those hold every key they see: the same sums as one
product over every key, and the engine stays exact through it."""

from __future__ import annotations

import random

import pytest
import torch

from inference import Splice
from inference.engine import rows

from .helpers import tiny_model


@pytest.mark.parametrize("blocks", [2, 3, 8])
def test_blocks_give_the_sums_of_one_product_over_every_key(blocks):
    model = tiny_model(dtype=torch.float64)
    cfg, consts = model.config, model.consts
    H, hd, slots, r = cfg.num_attention_heads, cfg.head_dim, 90, 70
    g = torch.Generator().manual_seed(blocks)
    keys = torch.randn(H, hd, slots, generator=g, dtype=torch.float64)
    values = torch.randn(H, slots, hd, generator=g, dtype=torch.float64)
    key_pos = torch.randperm(slots, generator=g).to(torch.float64) * 7  # slots in no position order
    key_pos[torch.randperm(slots, generator=g)[:10]] = 1e30  # free slots: never a key
    pick = torch.randperm(slots, generator=g)[:r]
    query_pos = key_pos[pick].clamp(max=700).unsqueeze(1)  # rows at keys' positions, in no order
    queries = torch.randn(H, r, hd, generator=g, dtype=torch.float64)
    args = (cfg, consts, 1, keys, values, key_pos, queries, query_pos)
    whole, blocked = rows.full_sums(*args), rows.full_sums(*args, blocks=blocks)
    assert torch.allclose(blocked, whole, rtol=1e-12, atol=1e-12)


def test_a_large_revision_recomputes_by_blocks_and_stays_exact(monkeypatch):
    calls = []
    monkeypatch.setattr(rows, "full_sums", _counting(rows.full_sums, calls))
    model = tiny_model(3, dtype=torch.float32)
    rng = random.Random(3)
    ids = [rng.randrange(4, model.config.vocab_size) for _ in range(110)]
    from inference import IncrementalDocument

    doc = IncrementalDocument(model, ids)
    new = [rng.randrange(4, model.config.vocab_size) for _ in range(90)]
    doc.apply([Splice(5, 100, new)])  # almost every row changes
    assert calls and max(calls) >= rows.BLOCKED_ROWS
    assert doc.verify().codes_equal


def _counting(fn, calls):
    """fn, noting the row count of each call that goes by blocks."""

    def counted(*args, blocks=1):
        if blocks > 1:
            calls.append(args[6].shape[1])
        return fn(*args, blocks=blocks)

    return counted


def _keys_read(calls):
    """rows.full_sums, noting how many key slots each one-block call reads."""
    fn = rows.full_sums

    def noted(*args, blocks=1):
        if blocks == 1:
            calls.append(args[3].shape[-1])
        return fn(*args, blocks=blocks)

    return noted


def test_an_edit_early_in_a_fresh_document_reads_only_the_keys_before_it(monkeypatch):
    """A fresh document keeps its rows in slot order (BOS in slot 0): the edited row, recomputed
    over every key it sees, reads only the slots up to its own, and the codes stay exact."""
    from inference import IncrementalDocument

    model = tiny_model(4, dtype=torch.float32)
    rng = random.Random(4)
    doc = IncrementalDocument(model, [rng.randrange(4, model.config.vocab_size) for _ in range(100)])
    calls = []
    monkeypatch.setattr(rows, "full_sums", _keys_read(calls))
    doc.apply([Splice(10, 11, [3])])
    assert calls[0] == 12  # layer 0: the edited token's row (slot 11) and the 11 before it
    assert doc.verify().codes_equal


def test_rows_typed_in_fresh_slots_are_among_the_keys_read_and_the_codes_stay_exact(monkeypatch):
    """Typed tokens take fresh slots after the document's: an edit after them reads up to them."""
    from inference import IncrementalDocument

    model = tiny_model(5, dtype=torch.float32)
    rng = random.Random(5)
    doc = IncrementalDocument(model, [rng.randrange(4, model.config.vocab_size) for _ in range(100)])
    doc.apply([Splice(20, 20, [5, 6])])  # two typed tokens, in slots after the document's rows
    calls = []
    monkeypatch.setattr(rows, "full_sums", _keys_read(calls))
    doc.apply([Splice(10, 11, [3])])  # before them: only the first 12 slots
    assert calls[0] == 12
    calls.clear()
    doc.apply([Splice(40, 41, [3])])  # after them: up to the typed tokens' slots
    assert calls[0] > 101
    assert doc.verify().codes_equal
