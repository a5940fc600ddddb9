"""Graphed sizing: an update's first pass captured per shape and replayed (inference/engine/graphs.py).

A CUDA graph replays the kernels it recorded, with the arguments they had at capture, on the
tensors they read then. So a pass may be captured only if it is a function of its shapes: the
same ops with the same non-tensor arguments for every plan of the same shapes, and no host read
inside. On a CPU the replay is emulated (the pass runs again on the captured plan, its host-side
values checked against the capture's), so the rest is checked here without a GPU: replayed
updates keep a dense pass's codes, account the same costs as bucketed sizing, and a window that
reallocates its tensors drops its captures. On a machine with CUDA the same runs on real graphs."""

from __future__ import annotations

import random

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import inference
from inference import Splice
from inference.engine import graphs, passes
from inference.engine.plan import LayerRecord, PassState, plan_edit, reorder

from .helpers import tiny_model

# ops that make the host wait for the device, or copy from the host: not allowed inside a capture
CAPTURE_BREAKERS = {"nonzero", "_local_scalar_dense", "masked_select", "unique", "_unique2", "lift_fresh", "_to_copy"}


def _random_edits(n: int, count: int, seed: int) -> list[Splice]:
    """One-token replacements, insertions and deletions at random places (n: the starting length)."""
    rng, edits = random.Random(seed), []
    for _ in range(count):
        p = rng.randrange(0, n - 1)
        kind = rng.choice("rrid")
        if kind == "r":
            edits.append(Splice(p, p + 1, [rng.randrange(4, 101)]))
        elif kind == "i":
            edits.append(Splice(p, p, [rng.randrange(4, 101)]))
            n += 1
        else:
            edits.append(Splice(p, p + 1, []))
            n -= 1
    return edits


def _describe(x):
    """An op argument as a graph records it: tensors by shape and dtype, everything else by value."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_describe(y) for y in x)
    return x


class _Trace(TorchDispatchMode):
    """Every op a pass dispatches, with its arguments as a CUDA graph would bake them in."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append((func.__name__, _describe(args), _describe(sorted((kwargs or {}).items()))))
        return func(*args, **(kwargs or {}))


def test_a_padded_pass_is_a_function_of_its_shapes(monkeypatch):
    model = tiny_model(11, window_tokens=256, sizing="bucketed")
    traces: dict[tuple, list] = {}
    host_reads: list[str] = []
    real_pass = passes.layer_pass

    def traced(state, plan, first, dirty, rooms, with_deleted, extras, riders):
        if first or extras:  # a resumed pass (an overflow): run eagerly, never captured
            return real_pass(state, plan, first, dirty, rooms, with_deleted, extras, riders)
        key = graphs.pass_key(plan, rooms, riders)
        reads = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy", "item")}
        for name, real in reads.items():  # reads that bypass the dispatcher
            setattr(torch.Tensor, name, lambda t, *a, _n=name, _r=real, **k: host_reads.append(_n) or _r(t, *a, **k))
        try:
            with _Trace() as trace:
                run = real_pass(state, plan, first, dirty, rooms, with_deleted, extras, riders)
        finally:
            for name, real in reads.items():
                setattr(torch.Tensor, name, real)
        traces.setdefault(key, []).append(trace.ops)
        return run

    monkeypatch.setattr(passes, "layer_pass", traced)
    doc = inference.IncrementalDocument(model, [random.Random(0).randrange(4, 101) for _ in range(200)])
    for sp in _random_edits(200, 300, seed=1):
        doc.apply([sp])
    monkeypatch.undo()
    assert doc.verify().codes_equal
    repeated = [runs for runs in traces.values() if len(runs) > 1]
    assert sum(len(runs) - 1 for runs in repeated) > 100  # keys do repeat: captures get replayed
    for key, runs in traces.items():
        for ops in runs[1:]:
            diff = next(((a, b) for a, b in zip(runs[0], ops) if a != b), None)
            assert diff is None and len(ops) == len(runs[0]), (key, diff)
    assert host_reads == []
    dispatched = {name.split(".")[0] for runs in traces.values() for ops in runs for name, _, _ in ops}
    assert dispatched and not dispatched & CAPTURE_BREAKERS


@pytest.mark.parametrize("layout", inference.LAYOUTS)
def test_replayed_updates_keep_a_dense_pass_codes_and_account_as_bucketed(layout):
    docs = {}
    for sizing in ("graphed", "bucketed"):
        model = tiny_model(11, window_tokens=256, sizing=sizing, layout=layout)
        docs[sizing] = inference.IncrementalDocument(model, [random.Random(0).randrange(4, 101) for _ in range(200)])
    for i, sp in enumerate(_random_edits(200, 240, seed=2)):
        costs = {sizing: doc.apply([sp]).cost for sizing, doc in docs.items()}
        assert costs["graphed"].incremental_macs == costs["bucketed"].incremental_macs
        assert costs["graphed"].dirty_per_layer == costs["bucketed"].dirty_per_layer
        if i % 60 == 59:
            assert docs["graphed"].verify().codes_equal
    assert docs["graphed"].scores == pytest.approx(docs["bucketed"].scores, abs=1e-12)
    assert docs["graphed"].surprise_array() == pytest.approx(docs["bucketed"].surprise_array(), abs=1e-9)
    captured = [w.graphs for w in docs["graphed"].windows if w.graphs is not None]
    assert sum(g.replays for g in captured) > 100 and sum(g.captures for g in captured) > 0


def test_a_window_that_grows_drops_its_captures():
    model = tiny_model(11, window_tokens=512, sizing="graphed")
    doc = inference.IncrementalDocument(model, [random.Random(0).randrange(4, 101) for _ in range(100)])
    for _ in range(3):
        doc.apply([Splice(50, 51, [7])])
        doc.apply([Splice(50, 51, [9])])
    window = doc.windows[0]
    assert window.graphs is not None and window.graphs.replays
    cap = window.cap
    at = 100
    while window.cap == cap:  # inserts until the window reallocates its tensors
        doc.apply([Splice(at, at, [5, 6, 7, 8])])
        at += 4
    assert window.graphs is None or window.graphs.replays == 0
    for _ in range(3):
        doc.apply([Splice(50, 51, [11])])
        doc.apply([Splice(50, 51, [13])])
    assert window.graphs.replays and doc.verify().codes_equal


def test_a_window_remembers_a_bounded_number_of_shapes(monkeypatch):
    """Shapes run once are remembered so that a second sight captures them; a long document's
    one-off shapes must not pile up, so the least recently seen are forgotten."""
    monkeypatch.setattr(graphs, "MAX_SEEN", 3)
    model = tiny_model(11, window_tokens=256, sizing="graphed")
    doc = inference.IncrementalDocument(model, [random.Random(0).randrange(4, 101) for _ in range(200)])
    for sp in _random_edits(200, 80, seed=5):
        doc.apply([sp])
    windows = [w.graphs for w in doc.windows if w.graphs is not None]
    assert windows and all(len(g.seen) <= 3 for g in windows)
    assert sum(g.eager for g in windows) > 3 and doc.verify().codes_equal


def test_a_pass_that_depends_on_more_than_its_shapes_is_refused():
    """Emulated replay compares what the pass decided on the host with the capture's."""
    model = tiny_model(11, window_tokens=256, sizing="graphed")
    window = inference.IncrementalDocument(model, list(range(4, 100))).windows[0]
    _, plan = plan_edit(window, reorder(window, [Splice(50, 51, [7])]))
    calls = []

    def depends_on_data(plan, riders):  # a layer record whose host-side value changes from call to call
        calls.append(1)
        record = LayerRecord(0, 1, len(calls), True, False, True, 0, False, [plan.edited_rows] * 3)
        return PassState(first=0, counts=[plan.zero, plan.zero], records=[record], carry=(plan.affected, plan.valid))

    g = graphs.PassGraphs(torch.device("cpu"))
    rooms = [inference.engine.policy.Room(0, 1)]
    for _ in range(2):  # seen (run eagerly), then captured
        assert isinstance(g.run(plan, rooms, None, depends_on_data), PassState)
    with pytest.raises(graphs.CaptureMismatch, match="layer record 0"):
        g.run(plan, rooms, None, depends_on_data)


def test_a_window_whose_capture_fails_runs_its_passes_eagerly():
    model = tiny_model(11, window_tokens=256, sizing="graphed")
    window = inference.IncrementalDocument(model, list(range(4, 100))).windows[0]
    _, plan = plan_edit(window, reorder(window, [Splice(50, 51, [7])]))
    calls = []

    def refused_at_capture(plan, riders):
        calls.append(1)
        if len(calls) == 2:  # the second sighting is the capture
            raise RuntimeError("operation not permitted when stream is capturing")
        return PassState(first=0, counts=[plan.zero], records=[], carry=(plan.affected, plan.valid))

    g = graphs.PassGraphs(torch.device("cpu"))
    rooms = [inference.engine.policy.Room(0, 1)]
    assert g.run(plan, rooms, None, refused_at_capture).carry[0] is plan.affected
    with pytest.warns(UserWarning, match="capture failed"):
        g.run(plan, rooms, None, refused_at_capture)
    g.run(plan, rooms, None, refused_at_capture)
    assert "not permitted" in g.failure and (g.eager, g.captures, g.replays) == (3, 0, 0) and len(calls) == 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_real_cuda_graphs_keep_a_dense_pass_codes():
    model = tiny_model(11, window_tokens=256, sizing="graphed", dtype=torch.float32)
    model.net.to("cuda")
    model = inference.LoadedModel.from_net(model.net, device="cuda", dtype=torch.float32, sizing="graphed")
    doc = inference.IncrementalDocument(model, [random.Random(0).randrange(4, 101) for _ in range(200)])
    for sp in _random_edits(200, 200, seed=3):
        doc.apply([sp])
    assert doc.verify().codes_equal
    assert sum(w.graphs.replays for w in doc.windows if w.graphs is not None) > 50
