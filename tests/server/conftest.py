"""Server test fixtures: a model folder the server cannot load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def corrupt_model_dir(tmp_path_factory, model_dir) -> Path:
    folder = tmp_path_factory.mktemp("corrupt")
    for f in model_dir.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    return folder


def write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj))
    return path
