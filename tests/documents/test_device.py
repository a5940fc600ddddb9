"""Where the live server's model runs when the settings name no device: the CPU, even where CUDA is
present (a keystroke's update there is bound by launching kernels and is slower than on the CPU);
a device the settings name is used as named."""

from __future__ import annotations

import pytest
import torch

import inference
from vq_lsp.server import handlers
from vq_lsp.settings import Settings


@pytest.mark.parametrize(("setting", "expected"), [(None, "cpu"), ("cuda", "cuda"), ("cpu", "cpu")])
def test_the_model_loads_on_the_device_the_settings_mean(monkeypatch, setting, expected):
    asked = []
    real = inference.load_model

    def load(path=None, device=None, **options):
        asked.append(device)
        return real(path, device="cpu", **options)  # this machine may have no GPU: the request is what counts

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(inference, "load_model", load)
    server = handlers.build(Settings(device=setting))
    server.docs.load_model()
    assert asked == [expected]


@pytest.mark.parametrize("sizing", ["auto", "bucketed", "graphed"])
def test_the_sizing_setting_reaches_the_model(sizing):
    server = handlers.build(Settings(device="cpu", sizing=sizing))
    server.docs.load_model()
    assert server.docs.model.consts.sizing.name == ("exact" if sizing == "auto" else sizing)
