"""Server test fixtures: the GPT-2 tokenizer and a tiny model folder the server can load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inference


@pytest.fixture(scope="session")
def gpt2(gpt2_tokenizer) -> inference.Tokenizer:
    return gpt2_tokenizer


@pytest.fixture(scope="session")
def model_dir(tiny_model_dir) -> Path:
    """The shared tiny random VQ model folder (GPT-2 tokenizer, 256-token windows)."""
    return tiny_model_dir


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
