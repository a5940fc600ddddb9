"""Exactness: after every edit of long random edit sequences, the state equals a dense pass.

Codes must be identical in every layer and outputs must agree within 1e-4 (float64 gives far
less). Sequences mix inserts, deletes, replacements, several splices per revision, edits at
both ends, deletes down to one token, and insert storms at one spot that exhaust the gap
between two positions and force relabelling; a small pool forces full re-spreads too.
"""

import random

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inference
from inference import Splice, kernels

from .helpers import tiny_model

TOL = {torch.float64: 1e-4, torch.float32: 1e-3}
VOCAB = 101

edit = st.tuples(
    st.sampled_from(["insert", "delete", "replace", "storm", "front", "back", "multi", "shrink"]),
    st.floats(0, 1),  # relative location
    st.integers(1, 4),  # length
    st.integers(0, 2**31 - 1),  # seed for token ids
)


def _random_ids(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(VOCAB) for _ in range(n)]


def _revisions(doc, kind, where, length, seed):
    """Turn one drawn edit into one or more revisions (lists of splices) against the live doc."""
    n = doc.n_tokens
    at = min(n, int(where * (n + 1)))
    ids = _random_ids(seed, 32)
    if kind == "insert":
        yield [Splice(at, at, ids[:length])]
    elif kind == "delete" and n > length:
        start = min(at, n - length)
        yield [Splice(start, start + length, [])]
    elif kind == "replace" and n:
        start = min(at, n - 1)
        yield [Splice(start, min(n, start + length), ids[:length])]
    elif kind == "storm":  # one token at a time at the same spot: exhausts the gap
        for i in range(4 * length):
            yield [Splice(at + i, at + i, [ids[i % 32]])]
    elif kind == "front":
        yield [Splice(0, min(1, n - 1), ids[:length])]
    elif kind == "back":
        yield [Splice(n, n, ids[:length])] if length % 2 else [Splice(n - 1, n, [])] if n > 1 else []
    elif kind == "multi" and n >= 6:
        a, b = sorted(random.Random(seed).sample(range(n), 2))
        yield [Splice(b, b, ids[:length]), Splice(a, a + 1, ids[4:5])]
    elif kind == "shrink":  # deletes down to a single token, then regrow
        while doc.n_tokens > 1:
            k = min(7, doc.n_tokens - 1)
            yield [Splice(0, k, [])]
        yield [Splice(1, 1, ids[:8])]


def _assert_exact(doc):
    check = doc.verify()
    assert check.codes_equal, check
    assert check.max_abs_diff < TOL[doc.model.dtype], check


def _assert_kept_reads_current(doc, reference):
    """The ids and surprise each window keeps for the hints (read once per update) are those a
    fresh read of the state gives: a kept read outliving the update it came from would be a stale hint."""
    assert doc.token_id_array().tolist() == reference
    np.testing.assert_array_equal(doc.surprise_array(), np.asarray(doc.surprise(0, doc.n_tokens)))


def _run(model, edits, start_len=60):
    doc = inference.IncrementalDocument(model, _random_ids(1, start_len))
    reference = doc.token_ids
    stats = {"edits": 0, "relabelled": 0, "respreads": 0, "dirty": 0}
    for kind, where, length, seed in edits:
        for splices in _revisions(doc, kind, where, length, seed):
            reference = inference.apply_splices(reference, splices)
            res = doc.apply(splices)
            assert doc.token_ids == reference
            _assert_exact(doc)
            _assert_kept_reads_current(doc, reference)
            stats["edits"] += 1
            stats["relabelled"] += res.cost.relabelled
            stats["respreads"] += res.cost.full_respreads
            stats["dirty"] += sum(res.cost.dirty_per_layer)
    return doc, stats


SIZINGS = pytest.mark.parametrize("sizing", inference.engine.SIZINGS)  # exact (CPU) and bucketed (CUDA's path)


@SIZINGS
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(edit, min_size=200, max_size=240))
def test_random_edit_sequences_stay_exact(sizing, edits):
    doc, stats = _run(tiny_model(0, sizing=sizing), edits)
    assert stats["edits"] >= 200


@SIZINGS
@pytest.mark.parametrize(
    "vq_heads, dtype, layout",
    [
        (1, torch.float64, "lean"),
        (2, torch.float64, "lean"),
        (4, torch.float64, "lean"),
        (2, torch.float32, "lean"),
        (4, torch.float32, "lean"),
        (2, torch.float64, "full"),
        (2, torch.float32, "full"),
    ],
)
def test_fixed_long_sequence_with_storms_relabels_and_stays_exact(vq_heads, dtype, layout, sizing):
    """float32 is the serving dtype: its codes must equal a float32 dense pass after every edit too
    (the tie guard recomputes the rows whose two best codes are within its rounding). Both state
    layouts: layer outputs recomputed from codes (lean) or kept (full)."""
    rng = random.Random(vq_heads)
    kinds = ["insert", "delete", "replace", "storm", "front", "back", "multi"]
    edits = [(rng.choice(kinds), rng.random(), rng.randint(1, 4), rng.randrange(2**31)) for _ in range(120)]
    edits.insert(60, ("shrink", 0.0, 1, 5))
    _, stats = _run(tiny_model(vq_heads, vq_heads=vq_heads, dtype=dtype, sizing=sizing, layout=layout), edits)
    assert stats["edits"] >= 200
    assert stats["relabelled"] > 0  # the storms really exhausted gaps


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_large_revision_recomputes_whole_layers_and_stays_exact(dtype):
    """Where moving every affected row by the changed keys costs more than recomputing them (most
    rows rewritten), the exact path recomputes the layer's affected rows in full; a small edit moves."""
    doc = inference.IncrementalDocument(tiny_model(8, dtype=dtype, sizing="exact"), _random_ids(6, 100))
    small = doc.apply([Splice(50, 51, [7])]).cost
    assert small.whole_layers == 0
    _assert_exact(doc)
    large = doc.apply([Splice(20, 90, _random_ids(7, 70))]).cost
    assert large.whole_layers > 0 and large.near_ties == 0
    _assert_exact(doc)
    doc.apply([Splice(10, 11, [3])])  # and the state it left moves exactly afterwards
    _assert_exact(doc)


def test_small_pool_forces_full_respread_and_stays_exact():
    model = tiny_model(3, position_pool=256, position_repeat=2, window_tokens=128)
    edits = [("storm", 0.5, 4, s) for s in range(8)]
    _, stats = _run(model, edits, start_len=40)
    assert stats["respreads"] > 0


@SIZINGS
def test_windows_split_and_rebuild_stay_exact(sizing):
    model = tiny_model(4, window_tokens=48, sizing=sizing)
    edits = [("insert", (i * 0.37) % 1, 4, i) for i in range(40)] + [
        ("delete", (i * 0.61) % 1, 4, i) for i in range(40)
    ]
    doc, _ = _run(model, edits, start_len=100)
    assert len(doc.windows) > 1


@SIZINGS
def test_without_vq_every_later_row_is_dirty_and_exact(sizing):
    model = tiny_model(5, vq=False, sizing=sizing)
    doc = inference.IncrementalDocument(model, _random_ids(2, 50))
    res = doc.apply([Splice(10, 11, [7])])
    assert res.cost.dirty_per_layer[1:] == [50 - 10] * 2  # the edited row and every row after it
    _assert_exact(doc)


def test_untouched_rows_are_bit_identical_after_an_edit():
    doc = inference.IncrementalDocument(tiny_model(6), _random_ids(3, 80))
    before = doc.surprise(0, 80)
    doc.apply([Splice(79, 80, [5])])
    assert doc.surprise(0, 79) == before[:79]  # nothing before the edit may move


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_engine_layer_inputs_and_attention_sums_match_the_dense_pass_bitwise(dtype):
    """The first layer's input the engine recomputes (one embedding_bag over a stacked table) is the
    dense pass's embedding bit for bit, and its s -> state-row map gives the code projections."""
    net = tiny_model(7, dtype=dtype).net
    with torch.no_grad():  # (a fresh model's fine position table is zero: every addition order agrees)
        net.decoder.embed_positions_fine.weight.normal_(0, 0.05)
    model = inference.LoadedModel.from_net(net, dtype=dtype)
    doc = inference.IncrementalDocument(model, _random_ids(4, 60))
    (win,) = doc.windows
    order = torch.tensor(win.order)
    ids, pos = torch.from_numpy(win.ids_host[win.order]), torch.from_numpy(win.pos_host[win.order])
    assert torch.equal(win.layer_input(0, order), model.net.embed(ids, pos))
    rng = np.random.default_rng(0)  # and anywhere in the vocabulary and the position pool
    ids = rng.integers(0, model.config.vocab_size, 5000)
    pos = rng.integers(0, model.config.position_pool, 5000)
    bag = model.consts.embed(torch.from_numpy(model.consts.embed_rows(ids, pos)))
    assert torch.equal(bag, model.net.embed(torch.from_numpy(ids), torch.from_numpy(pos)))
    s = torch.randn(9, model.config.hidden_size, dtype=dtype)
    rows = s @ model.consts.sum_map[0]
    h, K = model.config.vq_heads, model.config.vq_codes
    cb = model.net.layers[0].vq.codebook
    per_head = torch.stack([s.view(9, h, -1)[:, j] @ cb[j].t() for j in range(h)], 1)  # (9, h, K)
    torch.testing.assert_close(win.per_vq_head(rows), per_head)
    assert rows.shape[1] == h * K + h and not rows[:, h * K :].any()  # the |s| bounds are set apart


@SIZINGS
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layout", inference.LAYOUTS)
def test_layer_outputs_recomputed_or_kept_match_the_dense_pass(sizing, dtype, layout):
    """The lean state keeps no layer output: an update recomputes a layer's input (and the heads'
    input) from the row's embedding and its codes at the earlier layers; the full one keeps them. After edits,
    that input is the dense pass's layer
    output at every layer, for every row, within the outputs' tolerance."""
    model = tiny_model(3, dtype=dtype, sizing=sizing, layout=layout)
    doc = inference.IncrementalDocument(model, _random_ids(5, 90))
    for seed in range(12):
        rng = random.Random(seed)
        at = rng.randrange(doc.n_tokens)
        doc.apply([Splice(at, at + rng.randrange(2), _random_ids(seed, rng.randrange(1, 4)))])
    _assert_exact(doc)
    (win,) = doc.windows
    order = torch.tensor(win.order)
    with torch.no_grad():
        out = model.net(
            torch.from_numpy(win.ids_host[win.order])[None],
            torch.from_numpy(win.pos_host[win.order])[None],
            collect=True,
        )
        for l in range(1, model.config.num_hidden_layers + 1):  # (the last: what the heads read)
            torch.testing.assert_close(win.layer_input(l, order), out.layer_outputs[l - 1][0], rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_gelu_weights_in_place_are_the_plain_formula_bit_for_bit(dtype):
    """A build's dense pass works the attention weights out in the scores' memory (no graph is
    recorded); they must be exactly c * gelu(q.k) masked, the form training differentiates."""
    g = torch.Generator().manual_seed(3)
    scores = (torch.randn(2, 4, 33, 33, generator=g) * 3).to(dtype)
    mask = torch.rand(2, 1, 33, 33, generator=g) > 0.3
    plain = torch.where(mask, torch.nn.functional.gelu(scores) * 0.125, scores.new_zeros(()))
    given = scores.clone()
    weights = kernels.gelu_weights(given, mask, 0.125)
    assert torch.equal(weights, plain)
    assert weights.data_ptr() == given.data_ptr()  # in the scores' memory: no (H, T, T) tensor more
    recorded = scores.clone().requires_grad_(True)
    assert torch.equal(kernels.gelu_weights(recorded, mask, 0.125).detach(), plain)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_dense_pass_without_a_graph_equals_the_one_training_records(dtype):
    """Codes, attention sums and logits of the no-grad pass (builds) equal the autograd pass's."""
    model = tiny_model(11, dtype=dtype)
    ids = torch.tensor([_random_ids(6, 70)])
    pos = torch.arange(70).unsqueeze(0)
    with torch.no_grad():
        fast = model.net(ids, pos, collect=True)
    slow = model.net(ids, pos, collect=True)
    assert torch.equal(fast.cls_logits, slow.cls_logits.detach())
    for a, b in zip(fast.traces, slow.traces, strict=True):
        assert torch.equal(a.s, b.s.detach()) and torch.equal(a.codes, b.codes)
