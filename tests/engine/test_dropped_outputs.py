"""The "auto" layout: windows built full, their layer outputs dropped when the memory budget needs
the room. A document that loses them stays exact, stays lean through later edits (windows the
edits build included), and its snapshot keeps the layout it had."""

from __future__ import annotations

import random

import pytest
import torch

import inference
from inference import Splice, snapshot
from inference.snapshot import SnapshotError

from .helpers import tiny_model


def _ids(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, 101) for _ in range(n)]


def _edits(doc: inference.IncrementalDocument, seed: int, count: int) -> None:
    rng = random.Random(seed)
    for i in range(count):
        at = rng.randrange(doc.n_tokens)
        doc.apply([Splice(at, min(doc.n_tokens, at + rng.randrange(3)), _ids(seed * 100 + i, rng.randrange(1, 40)))])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_document_whose_outputs_are_dropped_stays_exact_and_lean(dtype):
    """Drop the outputs halfway through an edit history: every later edit (inserts long enough to
    make new windows) leaves codes equal to a dense pass, no window keeps outputs again, and the
    scores are the ones a document kept full through the same history has."""
    auto, full = tiny_model(5, dtype=dtype, layout="auto"), tiny_model(5, dtype=dtype, layout="full")
    ids = _ids(1, 300)  # three windows of the tiny models
    dropped, kept = inference.IncrementalDocument(auto, ids), inference.IncrementalDocument(full, ids)
    assert dropped.keeps_outputs and len(dropped.windows) > 1
    _edits(dropped, 2, 6)
    _edits(kept, 2, 6)
    before = dropped.state_bytes()
    freed = dropped.drop_outputs()
    cfg = auto.config
    assert freed == before - dropped.state_bytes() > 0
    assert freed == sum((w.cap + 1) * cfg.num_hidden_layers * cfg.hidden_size * dtype.itemsize for w in dropped.windows)
    assert dropped.drop_outputs() == 0  # once
    windows = len(dropped.windows)
    _edits(dropped, 3, 12)
    _edits(kept, 3, 12)
    assert len(dropped.windows) != windows  # the edits made (or merged) windows
    assert not any(w.outputs is not None for w in dropped.windows) and kept.keeps_outputs
    check = dropped.verify()
    assert check.codes_equal and check.max_abs_diff <= auto.verify_tolerance
    assert dropped.token_ids == kept.token_ids
    assert dropped.scores == pytest.approx(kept.scores, abs=1e-9 if dtype == torch.float64 else 1e-5)
    dropped.settle()
    assert not dropped.keeps_outputs and dropped.verify().codes_equal


def test_a_lean_build_and_the_lean_estimate():
    """DocumentBuilder(lean=True) builds windows without outputs under "auto"; the lean estimate of
    an "auto" model is the lean model's, and what a dropped document holds."""
    auto, lean = tiny_model(2, layout="auto"), tiny_model(2, layout="lean")
    ids = _ids(4, 200)
    builder = inference.DocumentBuilder(auto, ids, lean=True)
    while not builder.done:
        builder.step()
    doc = builder.document()
    assert not doc.keeps_outputs and doc.verify().codes_equal
    assert inference.estimate_state_bytes(auto, ids, lean=True) == inference.estimate_state_bytes(lean, ids)
    assert inference.estimate_state_bytes(auto, ids) > inference.estimate_state_bytes(auto, ids, lean=True)
    assert doc.state_bytes() == inference.IncrementalDocument(lean, ids).state_bytes()


def test_snapshots_keep_the_layout_a_document_had(tmp_path):
    """Under "auto" a full and a dropped document both round-trip through a snapshot with their
    layout; a model built "full" refuses the dropped one (it would not be the layout it serves)."""
    auto = tiny_model(3, layout="auto")
    ids = _ids(5, 150)
    saved = {}
    for drop in (False, True):
        doc = inference.IncrementalDocument(auto, ids)
        _edits(doc, 6, 4)
        if drop:
            doc.drop_outputs()
        saved[drop] = (tmp_path / f"dropped-{drop}", doc.token_ids)
        snapshot.save_snapshot(doc, saved[drop][0])
        back = snapshot.load_snapshot(auto, *saved[drop])
        assert back.keeps_outputs == (not drop) and back.verify().codes_equal
        assert back.scores == doc.scores
        _edits(back, 7, 3)
        assert back.keeps_outputs == (not drop) and back.verify().codes_equal
    full = inference.LoadedModel.from_net(auto.net, dtype=auto.dtype, layout="full")
    assert snapshot.load_snapshot(full, *saved[False]).keeps_outputs
    with pytest.raises(SnapshotError, match="another state layout"):
        snapshot.load_snapshot(full, *saved[True])
