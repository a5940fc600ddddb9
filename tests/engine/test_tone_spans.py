"""Span scores read from each window's running class sums: the values of summing the span's
tokens, kept per window revision, and never stale after an update."""

import random

import pytest
import torch

import inference
from inference.document import span_probs

from .helpers import tiny_model


def summed_directly(doc: inference.IncrementalDocument, start: int, end: int) -> list[float]:
    """The span's class probabilities from its tokens' class log-probabilities, gathered and summed."""
    total = torch.zeros(doc.model.config.num_labels, dtype=torch.float64)
    for (a, b), w in zip(doc.window_bounds, doc.windows):
        lo, hi = max(start, a), min(end, b)
        if lo < hi:
            total += w.cls_logp[w.token_slots(lo - a, hi - a)].sum(0).double()
    return span_probs(total, end - start).tolist()


def test_spans_scores_equal_direct_sums_across_windows_and_edits():
    model = tiny_model(seed=3, window_tokens=24)
    rng = random.Random(0)
    ids = [rng.randrange(4, 60) for _ in range(70)]
    doc = inference.IncrementalDocument(model, ids)
    assert len(doc.windows) > 2
    for step in range(6):
        if step:
            at = rng.randrange(doc.n_tokens)
            doc.apply([inference.Splice(at, at + 1, [rng.randrange(4, 60)])])
        n = doc.n_tokens
        spans = [(0, n), (n - 1, n)] + [tuple(sorted(rng.sample(range(n + 1), 2))) for _ in range(20)]
        got = doc.spans_scores(spans)
        for (a, b), scores in zip(spans, got):
            assert list(scores.values()) == pytest.approx(summed_directly(doc, a, b), rel=1e-9, abs=1e-12)
        assert got[0] == doc.span_scores(0, n)


def test_running_sums_are_kept_until_the_window_changes():
    model = tiny_model(seed=4, window_tokens=24)
    rng = random.Random(1)
    doc = inference.IncrementalDocument(model, [rng.randrange(4, 60) for _ in range(60)])
    doc.spans_scores([(0, doc.n_tokens)])
    kept = [w.cls_prefix() for w in doc.windows]
    assert all(w.cls_prefix() is k for w, k in zip(doc.windows, kept))  # read once per revision
    doc.apply([inference.Splice(1, 2, [5 if doc.token_ids[1] != 5 else 6])])  # an edit in the first window
    assert doc.windows[0].cls_prefix() is not kept[0]
    assert all(w.cls_prefix() is k for w, k in zip(doc.windows[1:], kept[1:]))
    first = doc.windows[0]
    whole = first.cls_logp[first.token_slots()].sum(0).tolist()
    assert first.cls_prefix()[-1].tolist() == pytest.approx(whole, rel=1e-9)
