"""A model folder split into bfloat16 parts under a size limit joins back into the same model, or names
the missing part."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from training import bf16_parts
from training.bf16_parts import HEADER_ROOM, PartsError, join_model, split_model

LIMIT = HEADER_ROOM + 200_000


@pytest.fixture
def folder(tmp_path):
    torch.manual_seed(0)
    weights = {
        "decoder.embed_tokens.weight": torch.randn(4096, 32),  # 512 KiB float32: cut by rows across parts
        "decoder.layers.0.fc1.weight": torch.randn(128, 32) * 0.02,  # 4,096 elements: stays float32
        "decoder.layers.0.fc1.bias": torch.randn(128),
        "decoder.layers.0.vq.codebook": torch.randn(2, 64, 16),
    }
    model = tmp_path / "model"
    model.mkdir()
    save_file(weights, str(model / "model.safetensors"))
    (model / "config.json").write_text(json.dumps({"hidden_size": 32}))
    (model / "card.json").write_text(json.dumps({"distill": {"steps": 3}}))
    (model / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0}}}) + " " * 5000)
    return model


def test_parts_stay_under_the_limit_and_join_to_the_bf16_model(tmp_path, folder):
    paths = split_model(folder, tmp_path / "parts", limit=LIMIT)
    assert len(paths) >= 2 and all(p.stat().st_size < LIMIT for p in paths)
    out = join_model(tmp_path / "parts", tmp_path / "back")
    before, after = load_file(folder / "model.safetensors"), load_file(out / "model.safetensors")
    assert set(after) == set(before) and all(t.dtype == torch.float32 for t in after.values())
    emb = "decoder.embed_tokens.weight"
    assert torch.equal(after[emb], before[emb].to(torch.bfloat16).float())
    assert not torch.equal(after[emb], before[emb])  # it did travel as bfloat16
    for name in before:
        if name != emb:
            assert torch.equal(after[name], before[name])
    for side in ("config.json", "card.json", "tokenizer.json"):
        assert (out / side).read_text() == (folder / side).read_text()


def test_a_missing_part_is_named(tmp_path, folder, capsys):
    paths = split_model(folder, tmp_path / "parts", limit=LIMIT)
    n = len(paths)
    paths[1].unlink()
    with pytest.raises(PartsError, match=f"missing trunk-02-of-{n:02d}.safetensors"):
        join_model(tmp_path / "parts", tmp_path / "back")
    assert bf16_parts.main(["join", str(tmp_path / "parts"), "--out", str(tmp_path / "b2")]) == 1
    assert "trunk-02-of" in capsys.readouterr().err
    assert not (tmp_path / "back" / "model.safetensors").exists()


def test_parts_of_two_splits_are_refused(tmp_path, folder):
    split_model(folder, tmp_path / "parts", limit=LIMIT)
    other = split_model(folder, tmp_path / "other", limit=LIMIT * 4)
    other[0].rename(tmp_path / "parts" / other[0].name)
    with pytest.raises(PartsError, match="different splits"):
        join_model(tmp_path / "parts", tmp_path / "back")


def test_the_real_student_shape_fits_the_return_limits(tmp_path):
    """The slot's student (d=384, 6 layers, 49,152 tokens) comes back in at most 5 files under 16 MiB."""
    from inference import VQOPT
    from training.student import StudentShape, student_config

    net = VQOPT(student_config(StudentShape(384, 6, 6, 1536, 2, 2048, 2**-10), 49152))
    model = tmp_path / "model"
    model.mkdir()
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(model / "model.safetensors"))
    (model / "config.json").write_text("{}")
    # SmolLM2's tokenizer.json is 3.5 MB, mostly escaped in a header: quotes, newlines, non-ASCII
    (model / "tokenizer.json").write_text('{"\u0120the": 1,\n "caf\u00e9": 2}' * 110_000)
    paths = split_model(model, tmp_path / "parts")
    assert len(paths) <= 5 and all(p.stat().st_size < 16 << 20 for p in paths)
    back = load_file(join_model(tmp_path / "parts", tmp_path / "back") / "model.safetensors")
    assert set(back) == set(net.state_dict())
