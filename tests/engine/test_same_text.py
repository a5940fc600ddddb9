"""Same text, same scores: a document's state after an edit history against a fresh open.

The model reads positions, so the scores a writer sees depend on the positions an edit history
leaves. Typing at the end must leave exactly an open's positions (one layout rule for both);
any history, settled (IncrementalDocument.settle, or `apply(..., at_rest=True)`), must equal a
fresh open bit for bit in positions and to rounding in scores, with its codes still those of a
dense pass.
"""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest
import torch

import inference
from inference.positions import NEW, assign_positions, capacity_bucket, spread_array, spread_positions

from .helpers import tiny_model

BOUND = 0.02  # largest paragraph score difference from a fresh open allowed while typing at the end


def test_the_layout_leaves_room_to_append_and_appends_keep_it():
    pool = 204800
    for n in range(5, 3000):  # (4 rows or fewer: the smallest bucket, 4)
        c = capacity_bucket(n)
        assert n <= c <= 1.25 * n + 1  # the rows fill at least four fifths of their bucket
    pos = spread_array(3, pool)
    for n in range(4, 700):  # one token appended at a time, as typing does
        got = assign_positions(np.append(pos, NEW), pool)
        assert np.array_equal(got.positions, spread_positions(n, pool).numpy()), n
        assert len(got.relabelled) == (n - 2 if got.full_respreads else 0)  # a bucket crossed moves every token
        pos = got.positions
    assert np.array_equal(
        assign_positions(np.append(spread_array(30, pool), [NEW] * 40), pool).positions, spread_array(70, pool)
    )


@pytest.fixture(scope="module")
def bundled():
    torch.set_num_threads(1)
    return inference.load_model(None, device="cpu", dtype="float32")


def _reviews(data_dir, count: int) -> list[str]:
    with gzip.open(data_dir / "imdb" / "imdb_test.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(200), f)]
    random.Random(1).shuffle(rows)
    return [r["text"].replace("<br /><br />", "\n\n").replace("<br />", "\n") for r in rows[:count]]


def _paragraph_scores(model, doc, text: str) -> list[float]:
    """Positive score of every blank-line paragraph with at least 12 tokens (a paragraph's tokens
    are those that start in it)."""
    _, offsets = model.tokenizer.encode_with_offsets(text)
    starts = np.asarray([a for a, _ in offsets])
    out, at = [], 0
    for part in text.split("\n\n"):
        a, b = np.searchsorted(starts, [at, at + len(part)])
        if b - a >= 12:
            out.append(doc.span_scores(int(a), int(b))["positive"])
        at += len(part) + 2
    return out


def test_paragraph_scores_typed_at_the_end_stay_those_of_a_fresh_open(bundled, data_dir):
    """Two held-out reviews typed word by word: at every tenth word each paragraph's score is
    within BOUND of a fresh open's (and the positions are an open's)."""
    checked = 0
    for text in _reviews(data_dir, 2):
        ends = [i for i in range(20, len(text)) if text[i].isspace() and not text[i - 1].isspace()][:150]
        ids = bundled.tokenizer.encode(text[:20])
        doc = inference.IncrementalDocument(bundled, ids)
        for k, end in enumerate(ends):
            new = bundled.tokenizer.encode(text[:end])
            doc.apply(inference.diff(ids, new))
            ids = new
            if k % 10:
                continue
            fresh = inference.IncrementalDocument(bundled, ids)
            assert doc.positions == fresh.positions
            live, ref = _paragraph_scores(bundled, doc, text[:end]), _paragraph_scores(bundled, fresh, text[:end])
            assert len(live) == len(ref)
            assert all(abs(a - b) <= BOUND for a, b in zip(live, ref)), (k, live, ref)
            assert abs(doc.scores["positive"] - fresh.scores["positive"]) <= BOUND
            checked += len(live)
        assert doc.at_rest()
    assert checked >= 10


def _splice_history(ids: list[int], edits: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    out, cur = [], list(ids)
    for _ in range(edits):
        at = rng.randrange(len(cur))
        if rng.random() < 0.6:
            cur[at:at] = [rng.randrange(1, 100) for _ in range(rng.randint(1, 12))]
        else:
            del cur[at : at + rng.randint(1, 6)]
        out.append(list(cur))
    return out


@pytest.mark.parametrize("context", ["window", "paragraph"])
def test_middle_edits_settle_to_a_fresh_open(context):
    """Insertions and deletions anywhere (windows overflowing and merging on a 128-token window):
    the live state differs from an open, the settled one equals it, and stays exact."""
    model = tiny_model(3)
    model.context = context
    rng = random.Random(0)
    ids = [rng.randrange(1, 100) for _ in range(300)]
    for i in range(0, 300, 37):
        ids[i] = 50  # breaks, for the paragraph context (model.paragraph_ids below)
    model.paragraph_ids = model.line_ids = model.newline_end_ids = frozenset({50})
    doc = inference.IncrementalDocument(model, ids)
    moved = False
    for new in _splice_history(ids, 30, 1):
        doc.apply(inference.diff(ids, new))
        ids = new
        moved = moved or not doc.at_rest()
    assert moved  # the edits did leave an open's layout behind
    cost = doc.settle().cost
    fresh = inference.IncrementalDocument(model, ids)
    assert doc.at_rest() and doc.token_ids == ids
    assert doc.window_bounds == fresh.window_bounds and doc.positions == fresh.positions
    assert cost.incremental_macs > 0
    for k in doc.scores:
        assert abs(doc.scores[k] - fresh.scores[k]) < 1e-9
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-6
    assert doc.settle().cost.incremental_macs == 0  # at rest: nothing to do


def test_an_update_at_rest_is_a_fresh_open():
    """apply(..., at_rest=True), what `vq-lsp score` does per revision: every revision's scores
    equal an open's of its text, and the codes a dense pass's."""
    model = tiny_model(4)
    rng = random.Random(2)
    ids = [rng.randrange(1, 100) for _ in range(90)]
    doc = inference.IncrementalDocument(model, ids)
    for new in _splice_history(ids, 12, 3):
        doc.apply(inference.diff(ids, new), at_rest=True)
        ids = new
        fresh = inference.IncrementalDocument(model, ids)
        assert doc.positions == fresh.positions and doc.at_rest()
        for k in doc.scores:
            assert abs(doc.scores[k] - fresh.scores[k]) < 1e-9
    assert doc.verify().codes_equal


def _order_only(seed: int):
    """A tiny model whose position tables are constant (training/order_only.py), re-loaded so the
    engine's precomputed tables see it."""
    from training.order_only import make_order_only

    model = tiny_model(seed)
    make_order_only(model.net)
    return inference.LoadedModel(model.net, model.tokenizer, context="paragraph")


@pytest.mark.parametrize("seed", [5, 6])
def test_a_model_that_reads_only_the_order_scores_any_history_as_a_fresh_open(seed):
    """With constant position tables, middle insertions and deletions (gaps filled, neighbourhoods
    re-spread) leave positions unlike an open's, yet every step's codes and scores are a fresh
    open's: the live state is already at rest, and settling has nothing to do."""
    model = _order_only(seed)
    assert model.order_only and not tiny_model(seed).order_only
    rng = random.Random(seed)
    ids = [rng.randrange(1, 100) for _ in range(300)]
    for i in range(0, 300, 37):
        ids[i] = 50
    model.paragraph_ids = model.line_ids = model.newline_end_ids = frozenset({50})
    doc = inference.IncrementalDocument(model, ids)
    layouts_differ = False
    for step, new in enumerate(_splice_history(ids, 30, seed)):
        doc.apply(inference.diff(ids, new))
        ids = new
        fresh = inference.IncrementalDocument(model, ids)
        layouts_differ = layouts_differ or doc.positions != fresh.positions
        assert doc.window_bounds == fresh.window_bounds and doc.at_rest(), step
        for w, f in zip(doc.windows, fresh.windows):
            assert torch.equal(w.codes[:, w.order], f.codes[:, f.order]), step
        for k in doc.scores:
            assert abs(doc.scores[k] - fresh.scores[k]) < 1e-9, step
    assert layouts_differ  # the history did leave positions an open would not give
    assert doc.settle().cost.incremental_macs == 0
    assert doc.verify().codes_equal


def test_the_same_history_moves_the_scores_of_a_model_that_reads_positions():
    """The contrast: the same kind of history on the same model with its position tables intact
    leaves scores that differ from a fresh open's until it settles."""
    model = tiny_model(5)
    model.context = "paragraph"
    rng = random.Random(5)
    ids = [rng.randrange(1, 100) for _ in range(300)]
    for i in range(0, 300, 37):
        ids[i] = 50
    model.paragraph_ids = model.line_ids = model.newline_end_ids = frozenset({50})
    doc = inference.IncrementalDocument(model, ids)
    worst = 0.0
    for new in _splice_history(ids, 30, 5):
        doc.apply(inference.diff(ids, new))
        ids = new
        fresh = inference.IncrementalDocument(model, ids)
        worst = max(worst, max(abs(doc.scores[k] - fresh.scores[k]) for k in doc.scores))
    assert worst > 1e-6


def test_the_bundled_model_gives_a_fresh_opens_scores_after_middle_edits(bundled, data_dir):
    """The bundled model reads only the order (constant position tables): a held-out review edited
    in the middle, words inserted, deleted and replaced, has after every edit, live and unsettled,
    each paragraph's score and the document's of a fresh open, at the server's paragraph context."""
    model = inference.LoadedModel(bundled.net, bundled.tokenizer, context="paragraph")
    assert model.order_only
    text = _reviews(data_dir, 3)[2]
    rng = random.Random(7)
    ids = model.tokenizer.encode(text)
    doc = inference.IncrementalDocument(model, ids)
    layouts_differ = False
    for step in range(12):
        words = text.split(" ")
        at = rng.randrange(1, len(words) - 1)
        if step % 3 == 0:
            words[at:at] = ["truly", "remarkably"]
        elif step % 3 == 1:
            del words[at]
        else:
            words[at] = "awful"
        text = " ".join(words)
        new = model.tokenizer.encode(text)
        doc.apply(inference.diff(ids, new))
        ids = new
        fresh = inference.IncrementalDocument(model, ids)
        layouts_differ = layouts_differ or doc.positions != fresh.positions
        live, ref = _paragraph_scores(model, doc, text), _paragraph_scores(model, fresh, text)
        assert live == pytest.approx(ref, abs=1e-6), step
        assert doc.scores["positive"] == pytest.approx(fresh.scores["positive"], abs=1e-6)
    assert layouts_differ  # the edits left positions a fresh open would not give
