"""Distillation on a machine without the data folder: `vq-train tokens` writes the ids that
`vq-train distill` would tokenise, `distill --tokens-file` trains on them to the same weights,
and `--max-seconds` ends a run on a wall-clock budget with a model folder and its speed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.training.conftest import DISTILL, run_cli
from training.token_file import FILE_NAME, read_token_file, write_token_file


def test_distill_from_a_token_file_equals_distill_from_the_data(tmp_path, data_dir, random_opt, monkeypatch):
    tokens_at = ["--tokens", 20_000, "--seed", 3]  # the count DISTILL asks for, a seed other than the default
    assert run_cli("tokens", "--data", data_dir, "--tokenizer", random_opt, *tokens_at, "--out", tmp_path / "t") == 0
    assert read_token_file(tmp_path / "t" / FILE_NAME).shape == (20_000,)

    run_cli("distill", "--data", data_dir, "--teacher", random_opt, *DISTILL, "--seed", 3, "--out", tmp_path / "a",
            "--steps", 3)  # fmt: skip
    assert torch.equal(torch.load(tmp_path / "a" / "tokens_train.pt"), read_token_file(tmp_path / "t" / FILE_NAME))
    monkeypatch.delenv("VQ_LSP_DATA", raising=False)  # no data folder at all
    run_cli("distill", "--teacher", random_opt, *DISTILL, "--seed", 3, "--out", tmp_path / "b", "--steps", 3,
            "--tokens-file", tmp_path / "t" / FILE_NAME)  # fmt: skip
    wa = load_file(tmp_path / "a" / "model" / "model.safetensors")
    wb = load_file(tmp_path / "b" / "model" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    card = json.loads((tmp_path / "b" / "model" / "card.json").read_text())["distill"]
    assert f"{FILE_NAME}, 20000 tokens" in card["data"] and not (tmp_path / "b" / "tokens_train.pt").exists()


def test_token_file_round_trip_and_refusals(tmp_path):
    ids = torch.tensor([0, 5, 8191, 65535], dtype=torch.int32)
    assert torch.equal(read_token_file(write_token_file(ids, tmp_path)), ids)
    with pytest.raises(SystemExit):
        write_token_file(torch.tensor([70_000]), tmp_path)
    np.save(tmp_path / "plain.npy", np.array([3, 4], dtype=np.uint16))  # uncompressed is read too
    assert read_token_file(tmp_path / "plain.npy").tolist() == [3, 4]
    np.save(tmp_path / "bad.npy", np.zeros((2, 2), dtype=np.uint16))
    with pytest.raises(SystemExit):
        read_token_file(tmp_path / "bad.npy")
    (tmp_path / "bad.npy.xz").write_bytes(b"not xz")
    with pytest.raises(SystemExit):
        read_token_file(tmp_path / "bad.npy.xz")


def test_distill_max_seconds_finishes_with_a_model_and_its_throughput(tmp_path, data_dir, random_opt, capsys):
    out = tmp_path / "d"
    run_cli("distill", "--data", data_dir, "--teacher", random_opt, *DISTILL, "--out", out, "--steps", 500,
            "--max-seconds", 1e-6, "--ckpt-every", 100)  # fmt: skip
    card = json.loads((out / "model" / "card.json").read_text())["distill"]
    assert card["steps"] == 1 and card["stopped_by_max_seconds"] == {"max_seconds": 1e-6, "scheduled_steps": 500}
    speed = card["throughput_last_run"]
    assert speed["steps"] == 1 and speed["tokens_per_second"] > 0 and speed["steps_per_second"] > 0
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 1
    printed = capsys.readouterr().out
    assert "1 steps in" in printed and "steps/s" in printed and "tokens/s" in printed
