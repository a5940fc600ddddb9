"""The ONNX Runtime dense pass: same codes and outputs as torch's, exact builds from its traces, and a
clear message when the [onnx] extra is missing (that part runs without onnxruntime too)."""

from __future__ import annotations

import sys

import pytest
import torch

import inference
from inference import onnx_dense
from inference.engine import dense
from inference.positions import spread_positions
from tests.engine.helpers import seed_codebooks, tiny_config

try:
    onnx_dense.require_onnxruntime()
    MISSING = None
except onnx_dense.OnnxRuntimeMissing as e:
    MISSING = str(e)
needs_ort = pytest.mark.skipif(MISSING is not None, reason=f"onnxruntime not installed ({MISSING})")


def float32_model(seed: int = 0, **overrides) -> inference.LoadedModel:
    torch.manual_seed(seed)
    net = seed_codebooks(inference.VQOPT(tiny_config(**overrides)), seed)
    return inference.LoadedModel.from_net(net, device="cpu", dtype=torch.float32)


@pytest.fixture(scope="module")
def model():
    return float32_model()


@pytest.fixture(scope="module")
def forward(model):
    return onnx_dense.OnnxDenseForward(model.net, threads=1)


def inputs(model, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (n,), generator=g)
    ids[0] = model.config.bos_token_id
    return ids, spread_positions(n, model.config.position_pool)


@needs_ort
@pytest.mark.parametrize("n", [1, 2, 17, 100])
def test_same_codes_and_outputs_as_torch(model, forward, n):
    """One graph, exported once at two tokens, serves every length: codes equal, floats within float32 noise."""
    ids, pos = inputs(model, n, seed=n)
    got = forward(ids, pos)
    with torch.no_grad():
        ref = model.net(ids.unsqueeze(0), pos.unsqueeze(0), collect=True)
    assert len(got.traces) == len(ref.traces) == model.config.num_hidden_layers
    for a, b in zip(got.traces, ref.traces):
        assert a.codes.shape == b.codes.shape and torch.equal(a.codes, b.codes)
        for name in ("x", "q", "k", "v", "s"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.shape == y.shape and x.dtype == y.dtype == torch.float32
            assert (x - y).abs().max() < 1e-4, name
    for x, y in zip([*got.layer_outputs, got.hidden, got.cls_logits], [*ref.layer_outputs, ref.hidden, ref.cls_logits]):
        assert x.shape == y.shape and (x - y).abs().max() < 1e-4
    if n >= 100:  # the comparison means something only when rows pick different codes (17 rows of the
        # spread layout can all land on two codes of a layer)
        assert all(len(torch.unique(t.codes)) > 2 for t in ref.traces)


@needs_ort
def test_a_build_from_onnx_traces_is_exact(model, forward, monkeypatch):
    """The hook: a window built (and rebuilt) from ORT's traces passes torch's verify after edits."""
    ids = inputs(model, 90, seed=7)[0][1:].tolist()
    monkeypatch.setattr(dense, "dense_pass", lambda state, i, p: forward(i, p))
    doc = inference.IncrementalDocument(model, ids)
    built = [w.codes.clone() for w in doc.windows]
    monkeypatch.undo()
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-4, check
    torch_doc = inference.IncrementalDocument(model, ids)
    assert all(torch.equal(a, w.codes) for a, w in zip(built, torch_doc.windows))
    doc.apply([inference.Splice(10, 12, [5, 6, 7]), inference.Splice(40, 40, [9])])
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-4, check


@needs_ort
def test_a_model_without_vq_exports_without_codes():
    model = float32_model(vq=False)
    ids, pos = inputs(model, 20, seed=1)
    got = onnx_dense.OnnxDenseForward(model.net, threads=1)(ids, pos)
    with torch.no_grad():
        ref = model.net(ids.unsqueeze(0), pos.unsqueeze(0), collect=True)
    assert all(t.codes is None for t in got.traces)
    assert (got.cls_logits - ref.cls_logits).abs().max() < 1e-4


@needs_ort
def test_float64_is_refused_with_the_reason():
    torch.manual_seed(0)
    net = inference.LoadedModel.from_net(inference.VQOPT(tiny_config()), device="cpu").net  # float64
    with pytest.raises(ValueError, match="float32 models only.*float64 Erf"):
        onnx_dense.OnnxDenseForward(net)


@needs_ort
def test_onnx_runtime_itself_has_no_float64_erf():
    """What the refusal above rests on: if a later onnxruntime gains the kernel, this fails and says so."""
    torch.manual_seed(0)
    net = inference.LoadedModel.from_net(inference.VQOPT(tiny_config()), device="cpu").net
    with pytest.raises(Exception, match="Erf"):
        onnx_dense.make_session(net, threads=1)


@pytest.mark.parametrize("blocked", ["onnxruntime", "onnx"])
def test_missing_extra_names_the_install_command(monkeypatch, blocked):
    monkeypatch.setitem(sys.modules, blocked, None)  # any `import blocked` now fails
    with pytest.raises(onnx_dense.OnnxRuntimeMissing) as e:
        onnx_dense.OnnxDenseForward(float32_model().net)
    message = str(e.value)
    assert f"needs the {blocked} package" in message and 'pip install "vq-lsp[onnx]"' in message
    assert "onnxruntime-gpu" in message


@needs_ort
def test_select_dense_picks_onnx_runtime_for_float32_only(model):
    auto = onnx_dense.select_dense(model.net, "auto")
    assert isinstance(auto, onnx_dense.SizedDense) and auto.min_rows == onnx_dense.AUTO_MIN_ROWS
    assert isinstance(onnx_dense.select_dense(model.net, "onnx"), onnx_dense.OnnxDenseForward)
    assert onnx_dense.select_dense(model.net, "torch") is None
    torch.manual_seed(0)
    net64 = inference.LoadedModel.from_net(inference.VQOPT(tiny_config()), device="cpu").net
    assert onnx_dense.select_dense(net64, "auto") is None  # float64: torch
    with pytest.raises(ValueError, match="float32 models only"):
        onnx_dense.select_dense(net64, "onnx")


@needs_ort
def test_auto_runs_long_windows_on_onnx_runtime_and_short_ones_on_torch(model, monkeypatch):
    calls = []
    ort = onnx_dense.OnnxDenseForward(model.net, threads=1)
    monkeypatch.setattr(ort, "session", _Spy(ort.session, calls))
    sized = onnx_dense.SizedDense(model.net, ort, min_rows=30)
    for n in (29, 30, 60):
        ids, pos = inputs(model, n, seed=n)
        out = sized(ids, pos)
        with torch.no_grad():
            ref = model.net(ids.unsqueeze(0), pos.unsqueeze(0), collect=True)
        assert all(torch.equal(a.codes, b.codes) for a, b in zip(out.traces, ref.traces))
    assert calls == [30, 60]  # the 29-row window never reached ONNX Runtime


class _Spy:
    """An ORT session that records the row count of every run."""

    def __init__(self, session, calls: list) -> None:
        self.session, self.calls = session, calls

    def run(self, names, feeds):
        self.calls.append(len(feeds["ids"]))
        return self.session.run(names, feeds)


def test_select_dense_without_the_extra(monkeypatch, model):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert onnx_dense.select_dense(model.net, "auto") is None  # falls back to torch quietly
    with pytest.raises(onnx_dense.OnnxRuntimeMissing, match=r"vq-lsp\[onnx\]"):
        onnx_dense.select_dense(model.net, "onnx")
    with pytest.raises(ValueError, match="torch, onnx, auto"):
        onnx_dense.select_dense(model.net, "tensorrt")


def test_the_cuda_provider_is_picked_only_for_a_gpu_model_when_offered():
    both = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert onnx_dense.providers_for(torch.device("cuda", 0), both) == both
    assert onnx_dense.providers_for(torch.device("cpu"), both) == ["CPUExecutionProvider"]
    assert onnx_dense.providers_for(torch.device("cuda"), ["CPUExecutionProvider"]) == ["CPUExecutionProvider"]


@needs_ort
def test_use_dense_routes_builds_and_verify_through_onnx_runtime(monkeypatch):
    """The engine's own hook (LoadedModel.use_dense): builds and verify run ORT, updates run torch."""
    model = float32_model(3)
    calls = []
    model.use_dense("onnx", threads=1)
    ort = model.consts.dense
    monkeypatch.setattr(model.consts, "dense", lambda i, p: calls.append(len(i)) or ort(i, p))
    ids = inputs(model, 60, seed=3)[0][1:].tolist()
    doc = inference.IncrementalDocument(model, ids)
    doc.apply([inference.Splice(5, 6, [9]), inference.Splice(30, 30, [4, 4])])
    check = doc.verify()
    assert calls == [60, 62]  # the build (BOS + 59 tokens) and verify; the update did not call it
    assert check.codes_equal and check.max_abs_diff < 1e-3, check
    model.use_dense("torch")
    assert model.consts.dense is None
