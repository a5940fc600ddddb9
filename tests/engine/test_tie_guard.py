"""The tie guard's scale: u, kept per row and VQ head instead of s, must stay an upper bound of |s|
through any edits (a smaller u would narrow the guard below the rounding it is meant to cover), a
full recomputation must reset it to |s|, and tie_growth must widen it with the moves a row takes."""

import random

import pytest
import torch

import inference
from inference import Splice
from inference.engine import dense

from .helpers import tiny_model


def _edits(doc, rng, count):
    for _ in range(count):
        n = doc.n_tokens
        at = rng.randrange(n + 1)
        kind = rng.choice(["insert", "delete", "replace"])
        if kind == "insert" or n < 10:
            doc.apply([Splice(at, at, [rng.randrange(4, 101) for _ in range(rng.randint(1, 3))])])
        elif kind == "delete":
            at = min(at, n - 2)
            doc.apply([Splice(at, at + 2, [])])
        else:
            at = min(at, n - 1)
            doc.apply([Splice(at, at + 1, [rng.randrange(4, 101)])])


def _bounds_and_norms(model, doc):
    """(u, |s^j| of the dense pass) per row, layer and VQ head of the only window."""
    (win,) = doc.windows
    order = torch.tensor(win.order)
    with torch.no_grad():
        ids, pos = torch.from_numpy(win.ids_host[win.order]), torch.from_numpy(win.pos_host[win.order])
        out = dense.dense_pass(win, ids, pos)
    h = model.config.vq_heads
    u = torch.stack([win.bounds_of(win.sums[l, order]) for l in range(model.config.num_hidden_layers)])
    s = torch.stack([tr.s[0].view(len(order), h, -1).norm(dim=-1) for tr in out.traces])
    return u, s


@pytest.mark.parametrize(
    "vq_heads, heads, dtype",
    [(2, 4, torch.float64), (4, 4, torch.float32), (1, 4, torch.float64), (4, 2, torch.float64)],
)  # (the last: VQ heads finer than attention heads)
def test_u_stays_an_upper_bound_of_s_and_builds_start_exact(vq_heads, heads, dtype):
    model = tiny_model(3, vq_heads=vq_heads, num_attention_heads=heads, dtype=dtype)
    doc = inference.IncrementalDocument(model, [4 + i % 90 for i in range(70)])
    u, s = _bounds_and_norms(model, doc)
    torch.testing.assert_close(u, s)  # a build sets u = |s| (to rounding)
    _edits(doc, random.Random(vq_heads), 120)
    assert doc.verify().codes_equal
    u, s = _bounds_and_norms(model, doc)
    slack = 1e-5 if dtype == torch.float32 else 1e-12
    assert (u >= s * (1 - slack)).all()
    assert (u > s * 1.01).any()  # moves really grew some bounds (the check above is not vacuous)


def test_tie_growth_widens_the_guard_of_moved_rows_and_keeps_codes_exact():
    rng_ids = [4 + (i * 7) % 90 for i in range(80)]
    us = {}
    for growth in (0.0, 0.05):
        model = tiny_model(5)
        model.tie_growth = growth
        doc = inference.IncrementalDocument(model, rng_ids)
        _edits(doc, random.Random(11), 60)
        assert doc.verify().codes_equal
        us[growth] = _bounds_and_norms(model, doc)[0]
    assert (us[0.05] > us[0.0] * 1.5).any()  # rows moved many times since their last full recomputation
