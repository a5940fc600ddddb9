"""The code check of moved rows (exact sizes): a gather and two amins instead of an argmin and a
count per code must find the same rows as the argmin and the count would, flipped and tied."""

import numpy as np
import torch

import inference
from inference.engine import code_check
from inference.engine import rows as kernels

from .helpers import tiny_model


def _state():
    model = tiny_model(7)
    return inference.IncrementalDocument(model, [4 + i % 90 for i in range(40)]).windows[0]


def _rows(state, layer: int, n: int, seed: int):
    """Projections, bounds and old codes of n made-up rows: bounds spread over decades, so that the
    guard ties some rows and not others; old codes the argmin for half of the rows, else random."""
    g = torch.Generator().manual_seed(seed)
    h, k = state.consts.code_sq[layer].shape
    dtype = state.consts.code_sq[layer].dtype
    proj = torch.randn(n, h, k, generator=g, dtype=dtype)
    gaps = (proj.topk(2, -1).values[..., 0] - proj.topk(2, -1).values[..., 1]).abs()  # (n, h)
    bounds = (gaps / state.tie_rel).sqrt() * torch.exp(torch.randn(n, h, generator=g, dtype=dtype))
    best = kernels.code_distances(state.consts, layer, proj).argmin(-1)
    old = torch.where(torch.rand(n, 1, generator=g) < 0.5, best, torch.randint(0, k, (n, h), generator=g))
    return proj, bounds, old


def test_flipped_and_tied_rows_are_those_an_argmin_and_a_count_find():
    state, layer, n = _state(), 1, 400
    proj, bounds, old = _rows(state, layer, n, seed=3)
    distances = kernels.code_distances(state.consts, layer, proj)
    counts = kernels.near_ties(
        state.cfg, state.tie_rel, state.tie_code_term[layer], bounds, distances, distances.amin(-1), None, True
    )
    tied = (counts > state.cfg.vq_heads).numpy()
    flipped = (distances.argmin(-1) != old).any(-1).numpy()
    assert 20 < tied.sum() < n - 20 and 20 < flipped.sum() < n - 20  # both kinds of rows are there

    moved_off, tied_found = code_check._moved_off_and_tied(state, layer, proj, bounds, old).numpy()
    flipped_rows = np.flatnonzero(moved_off)
    distances_of_flipped = kernels.code_distances(state.consts, layer, proj[flipped_rows])
    also = flipped_rows[code_check._tied(state, layer, bounds[flipped_rows], distances_of_flipped)]
    np.testing.assert_array_equal(np.union1d(np.flatnonzero(tied_found), also), np.flatnonzero(tied))
    assert set(np.flatnonzero(tied_found)) <= set(np.flatnonzero(tied))  # what the first read finds is a tie
    untied = ~tied  # where no tie is, a moved-off head is exactly a flip of the argmin
    np.testing.assert_array_equal(moved_off[untied], flipped[untied])


def test_the_check_by_old_codes_and_the_check_by_argmin_update_a_document_alike(monkeypatch):
    """The CPU's check and the one other devices run: the same codes, row sets and costs."""
    model = tiny_model(9)
    ids = [4 + (i * 13) % 90 for i in range(120)]
    runs = {}
    for devices in (("cpu",), ()):
        monkeypatch.setattr(code_check, "OLD_CODE_CHECK_DEVICES", devices)
        doc = inference.IncrementalDocument(model, ids)
        rng = np.random.default_rng(5)
        costs = []
        for _ in range(40):
            at = int(rng.integers(0, doc.n_tokens))
            cost = doc.apply([inference.Splice(at, at + 1, [int(rng.integers(4, 101))])]).cost
            costs.append((list(cost.dirty_per_layer), cost.near_ties, cost.incremental_macs))
        assert doc.verify().codes_equal
        runs[devices] = (costs, doc.windows[0].codes.clone())
    (costs_cpu, codes_cpu), (costs_argmin, codes_argmin) = runs.values()
    assert costs_cpu == costs_argmin
    assert any(sum(d) > 3 * len(d) for d, _, _ in costs_cpu)  # codes flipped: rows beyond the edited one went on
    torch.testing.assert_close(codes_cpu, codes_argmin, rtol=0, atol=0)
