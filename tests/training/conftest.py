"""Tiny shared artefacts for the training tests: a small BPE and a random-init OPT folder.

Everything is tiny (vocab ~320, d=32, 2 layers) so the whole folder runs in well under two
minutes on one core; the data folder comes from the top-level ``data_dir`` fixture.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from training import cli

TINY_OPT = ["--d", 32, "--layers", 2, "--heads", 2, "--ffn", 64]  # the shape of the tiny models trained here
# a tiny fine-tune: give it --lr (and --data, --model, --out, --steps)
FINETUNE = ["--batch", 8, "--seq", 48, "--limit", 160, "--holdout", 40, "--warmup", 2, "--log-every", 1, "--quiet"]
DISTILL = [
    "--batch",
    2,
    "--seq",
    32,
    "--tokens",
    20_000,
    "--window",
    64,
    "--scale",
    1 / 16,
    "--lr",
    3e-3,
    "--warmup",
    1,
    "--log-every",
    1,
    "--kmeans-batches",
    2,
    "--quiet",
]


def run_cli(*argv) -> int:
    """Run ``vq-train`` in-process (no interpreter start-up per stage)."""
    return cli.main([str(a) for a in argv])


def read_log(folder: Path, stage: str) -> list[dict]:
    lines = (Path(folder) / "log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("stage") == stage and not r.get("final")]


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory, data_dir) -> Path:
    out = tmp_path_factory.mktemp("tok")
    run_cli("tokenizer", "--data", data_dir, "--out", out, "--vocab", 320, "--chars", 300_000)
    return out / "tokenizer.json"


@pytest.fixture(scope="session")
def random_opt(tmp_path_factory, tiny_tokenizer) -> Path:
    """A random-init OPT saved with save_pretrained: the real --teacher loading path."""
    from transformers import OPTForCausalLM

    from training.teacher import make_config

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("random_opt")
    model = OPTForCausalLM(make_config(vocab_size=320, d=32, layers=2, heads=2, ffn=64, max_pos=64))
    model.save_pretrained(folder)
    (folder / "tokenizer.json").write_bytes(tiny_tokenizer.read_bytes())
    return folder


@pytest.fixture(scope="session")
def peaked_opt(tmp_path_factory, tiny_tokenizer) -> Path:
    """A random OPT with large weights: peaked next-token distributions that a GELU+VQ student
    does not match at first, so distillation has something to learn."""
    from transformers import OPTForCausalLM

    from training.teacher import make_config

    torch.manual_seed(1)
    folder = tmp_path_factory.mktemp("peaked_opt")
    model = OPTForCausalLM(make_config(vocab_size=320, d=32, layers=2, heads=2, ffn=64, max_pos=64))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.5 if "embed" in name else 0.3)
    model.save_pretrained(folder)
    (folder / "tokenizer.json").write_bytes(tiny_tokenizer.read_bytes())
    return folder


@pytest.fixture(scope="session")
def distilled(tmp_path_factory, data_dir, random_opt) -> Path:
    """A tiny VQ model folder distilled for a few steps from ``random_opt``."""
    out = tmp_path_factory.mktemp("distilled")
    run_cli("distill", "--data", data_dir, "--teacher", random_opt, *DISTILL, "--out", out, "--steps", 3)
    return out / "model"
