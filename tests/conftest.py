"""Shared fixtures: the data folder and small models the tests build themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# Tests run many tiny tensor ops: one thread avoids OpenMP spin-waiting on a busy 2-core machine.
torch.set_num_threads(1)

DATA = Path(os.environ.get("VQ_LSP_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"data folder {DATA} not found: set VQ_LSP_DATA")
    return DATA
