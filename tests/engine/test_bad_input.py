"""Bad input raises a clear ValueError and leaves the document exactly as it was."""

import json

import pytest
import torch

import inference
from inference import IncrementalDocument, ModelLoadError, Splice

from .helpers import tiny_model

IDS = [5, 9, 13, 2, 40, 41, 42, 7, 8, 9]


@pytest.fixture()
def doc():
    return IncrementalDocument(tiny_model(0), IDS)


def _unchanged(doc):
    assert doc.token_ids == IDS
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-9


@pytest.mark.parametrize(
    "splices, message",
    [
        ([Splice(3, 2, [])], "out of range"),
        ([Splice(-1, 0, [1])], "out of range"),
        ([Splice(5, 11, [])], "out of range"),
        ([Splice(2, 5, [1]), Splice(4, 6, [2])], "overlap"),
        ([Splice(3, 3, [1]), Splice(3, 3, [2])], "overlap"),
        ([Splice(1, 2, [101])], "out of vocabulary"),
        ([Splice(1, 2, [-4])], "out of vocabulary"),
        ([Splice(0, 10, [])], "at least one"),
    ],
)
def test_bad_splices_raise_and_keep_state(doc, splices, message):
    before = doc.scores
    with pytest.raises(ValueError, match=message):
        doc.apply(splices)
    _unchanged(doc)
    assert doc.scores == before


def test_empty_document_and_bad_ids_are_rejected():
    model = tiny_model(0)
    with pytest.raises(ValueError, match="empty"):
        IncrementalDocument(model, [])
    with pytest.raises(ValueError, match="vocabulary"):
        IncrementalDocument(model, [1, 2, 999])


def test_bad_spans_are_rejected(doc):
    for a, b in [(3, 3), (5, 2), (0, 11), (-1, 2)]:
        with pytest.raises(ValueError, match="span"):
            doc.span_scores(a, b)
        with pytest.raises(ValueError, match="span"):
            doc.surprise(a, b)


def test_softmax_model_is_refused_by_the_engine():
    with pytest.raises(ValueError, match="gelu"):
        IncrementalDocument(tiny_model(0, attention="softmax"), IDS)


def test_a_fault_mid_update_restores_the_previous_state(doc, monkeypatch):
    norm = doc.model.net.layers[1].final_layer_norm  # inside the layer's output rows (finish)
    calls = {"n": 0}
    original = norm.forward

    def failing_once(*args):  # a transient fault in the middle of the layer stack
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected fault")
        return original(*args)

    monkeypatch.setattr(norm, "forward", failing_once)
    with pytest.raises(RuntimeError, match="injected"):
        doc.apply([Splice(4, 5, [77])])
    assert calls["n"] >= 2  # the fault hit mid-update, then the state was rebuilt
    _unchanged(doc)
    doc.apply([Splice(4, 5, [77])])  # and it keeps working
    assert doc.verify().codes_equal


# ----------------------------------------------------------------- model folders
@pytest.fixture()
def folder(tmp_path, data_dir):
    model = tiny_model(1, vocab_size=50257)
    tok = inference.Tokenizer.from_gpt2_files(
        data_dir / "gpt2_tokenizer/vocab.json", data_dir / "gpt2_tokenizer/merges.txt"
    )
    return inference.save_model_folder(model.net, tok, tmp_path / "m", {"note": "test"})


def test_saved_folder_loads_with_identical_outputs(folder):
    a = inference.load_model(folder)
    assert a.card == {"note": "test"} and a.tokenizer.decode(a.tokenizer.encode("Hello there")) == "Hello there"
    ids = a.tokenizer.encode("A small test of the loader.\n\nAnother paragraph.")
    doc = IncrementalDocument(a, ids)
    again = IncrementalDocument(inference.load_model(folder), ids)
    assert doc.scores == again.scores


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: (f / "model.safetensors").unlink(), "no model.safetensors"),
        (
            lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:5000]),
            "corrupt or truncated",
        ),
        (lambda f: (f / "config.json").write_text("{not json"), "not valid JSON"),
        (lambda f: (f / "config.json").unlink(), "file missing"),
        (lambda f: (f / "tokenizer.json").unlink(), "file missing"),
        (
            lambda f: (f / "config.json").write_text(
                json.dumps({**json.loads((f / "config.json").read_text()), "ffn_dim": 80})
            ),
            "fc1.weight",
        ),
        (
            lambda f: (f / "config.json").write_text(
                json.dumps({**json.loads((f / "config.json").read_text()), "vq_heads": 3})
            ),
            "invalid config",
        ),
    ],
)
def test_damaged_folders_fail_with_a_clear_message(folder, damage, message):
    damage(folder)
    with pytest.raises(ModelLoadError, match=message):
        inference.load_model(folder)


def test_missing_folder_and_missing_default_are_clear(tmp_path, monkeypatch):
    with pytest.raises(ModelLoadError, match="not found"):
        inference.load_model(tmp_path / "nope")
    monkeypatch.setattr(inference.loading, "DEFAULT_MODEL_DIR", tmp_path / "empty")
    with pytest.raises(ModelLoadError, match="no bundled default model"):
        inference.load_model()


def test_device_is_chosen_at_run_time():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert inference.pick_device().type == expected
    assert tiny_model(0).device.type == "cpu"
