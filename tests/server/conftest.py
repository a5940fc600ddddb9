"""Server test fixtures: the GPT-2 tokenizer and a tiny model folder the server can load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inference
from tests.engine.helpers import tiny_model


@pytest.fixture(scope="session")
def gpt2(data_dir) -> inference.Tokenizer:
    folder = data_dir / "gpt2_tokenizer"
    return inference.Tokenizer.from_gpt2_files(folder / "vocab.json", folder / "merges.txt")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, gpt2) -> Path:
    """A tiny random VQ model with the GPT-2 tokenizer, 256-token windows."""
    model = tiny_model(3, tokenizer=gpt2, vocab_size=50257, window_tokens=256, position_pool=25600)
    folder = tmp_path_factory.mktemp("model")
    inference.save_model_folder(model.net, gpt2, folder, {"name": "tiny-test", "trained_on": "nothing (random)"})
    return folder


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
