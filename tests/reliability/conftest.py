"""Reliability fixtures: the small model the scenarios run on, and a server per test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from .scenarios import build_test_model


@pytest.fixture(scope="session")
def reliability_model_dir(tmp_path_factory) -> Path:
    """Random VQ weights, the bundled model's 8192-token tokenizer, 256-token windows."""
    return build_test_model(tmp_path_factory.mktemp("reliability-model") / "tiny8k")
