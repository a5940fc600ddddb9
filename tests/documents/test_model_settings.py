"""Which settings reload the server's model: each one that decides the model or how its engine runs
(a new value loads the model again, every state rebuilt), and none of the others (a new debounce or
hint setting keeps the model and the states)."""

from __future__ import annotations

import dataclasses

import pytest

from vq_lsp.documents.store import model_settings
from vq_lsp.settings import Settings

RELOADS = {
    "model_path": "/models/other",
    "device": "cuda",
    "precision": "float64",
    "context": "window",
    "state_layout": "lean",
    "sizing": "graphed",
}
KEEPS = {"threads": 2, "debounce_ms": 150, "memory_budget_mb": 64, "full_recompute": True}


@pytest.mark.parametrize(("name", "value"), RELOADS.items())
def test_a_model_setting_changes_what_is_loaded(name, value):
    base = Settings()
    assert getattr(base, name) != value
    assert model_settings(dataclasses.replace(base, **{name: value})) != model_settings(base)


@pytest.mark.parametrize(("name", "value"), KEEPS.items())
def test_other_settings_keep_the_model(name, value):
    base = Settings()
    assert getattr(base, name) != value
    assert model_settings(dataclasses.replace(base, **{name: value})) == model_settings(base)


def test_no_device_means_the_live_device():
    assert model_settings(Settings())["device"] == model_settings(Settings(device="cpu"))["device"] == "cpu"
