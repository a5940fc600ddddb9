"""The `sizing` setting and flag reach the engine: load_model(sizing=...) runs every update at that
sizing, auto keeps the device's choice, and a bad name is refused. Every sizing gives the codes of a
dense pass and the scores of exact sizing."""

from __future__ import annotations

import pytest

import inference
from inference.engine import SIZINGS

TEXT = "The film was slow at first.\n\nThen it found its feet, and the last hour is wonderful."


def test_auto_keeps_the_devices_choice_and_a_name_sets_it():
    assert inference.load_model(device="cpu").consts.sizing.name == "exact"
    assert inference.load_model(device="cpu", sizing="auto").consts.sizing.name == "exact"
    for name in SIZINGS:
        assert inference.load_model(device="cpu", sizing=name).consts.sizing.name == name


def test_a_loaded_model_changes_sizing_by_name_and_back_to_the_devices_choice():
    model = inference.load_model(device="cpu")
    for name in SIZINGS:
        model.use_sizing(name)
        assert (model.sizing, model.consts.sizing.name) == (name, name)
    model.use_sizing("auto")
    assert (model.sizing, model.consts.sizing.name) == ("auto", "exact")


def test_the_setting_the_flag_and_the_engine_offer_the_same_sizings():
    import dataclasses

    from vq_lsp.engine_flags import ENGINE_FLAGS
    from vq_lsp.settings import Settings

    field = next(f for f in dataclasses.fields(Settings) if f.name == "sizing")
    assert field.metadata["choices"] == ENGINE_FLAGS["sizing"].choices == inference.loading.SIZING_CHOICES


def test_a_bad_sizing_is_refused_by_name():
    with pytest.raises(ValueError, match="sizing must be one of"):
        inference.load_model(device="cpu", sizing="padded")
    model = inference.load_model(device="cpu", sizing="bucketed")
    with pytest.raises(ValueError, match="sizing must be one of"):
        model.use_sizing("padded")
    assert (model.sizing, model.consts.sizing.name) == ("bucketed", "bucketed")  # unchanged


@pytest.mark.parametrize("name", list(SIZINGS))
def test_every_sizing_gives_a_dense_passs_codes_and_exact_sizings_scores(name):
    exact = inference.load_model(device="cpu", dtype="float32", sizing="exact")
    model = inference.load_model(device="cpu", dtype="float32", sizing=name)
    ids = model.tokenizer.encode(TEXT)
    docs = [inference.IncrementalDocument(m, ids) for m in (exact, model)]
    for start, end, new in [(3, 4, [400]), (0, 0, [501, 502]), (10, 12, [])]:
        for doc in docs:
            doc.apply([inference.Splice(start, end, new)])
    assert docs[1].verify().codes_equal
    assert docs[1].scores == pytest.approx(docs[0].scores, abs=1e-5)
