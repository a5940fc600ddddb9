"""The GPU pack of the whole-model tone fine-tune with the locality term: run.sh reads only the
pack's data, stops on its time budget with a finished model, and what comes back (bfloat16 parts
under 16 MiB, the log, a report) makes the model folder again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from inference import load_model_folder
from training.bf16_parts import PART_LIMIT
from training.data import read_jsonl_gz
from training.neutral import write_training_book_heads

REPO = Path(__file__).resolve().parents[2]
DATA_FILES = (
    "imdb/imdb_train.jsonl.gz",
    "revisions/rust_book_chapters.jsonl.gz",
    "revisions/art_of_command_line_README_en.jsonl.gz",
    "revisions/wiki_versions.jsonl.gz",
)


def test_the_training_books_travel_cut_at_a_paragraph(full_data_dir, tmp_path):
    out = tmp_path / "gutenberg_subset.jsonl.gz"
    books = write_training_book_heads(full_data_dir, out, chars=3000)
    rows = list(read_jsonl_gz(out))
    assert books == len(rows) > 100
    assert all(row["split"] == "train" and 0 < len(row["text"]) <= 3000 for row in rows)
    books_read = read_jsonl_gz(full_data_dir / "gutenberg" / "gutenberg_subset.jsonl.gz")
    whole = {(r["author"], r["title"]): r["text"] for r in books_read}
    heads = [(whole[(r["author"], r["title"])], r["text"]) for r in rows]
    assert all(book.startswith(head) for book, head in heads)
    cut = [(book, head) for book, head in heads if len(book) > len(head)]
    assert cut and all(book[len(head) : len(head) + 2] == "\n\n" for book, head in cut)  # at a paragraph break


def test_the_pack_fine_tunes_from_its_own_data_and_sends_the_model_back(full_data_dir, tmp_path):
    pack = tmp_path / "pack"
    for name in DATA_FILES:
        (pack / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (pack / "data" / name).symlink_to(full_data_dir / name)
    write_training_book_heads(full_data_dir, pack / "data" / "gutenberg" / "gutenberg_subset.jsonl.gz", chars=3000)
    shutil.copy(REPO / "training" / "tone_locality_gpu_run.sh", pack / "run.sh")
    out, run = tmp_path / "out", tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "VQ_LSP_DATA"}
    env.update(REPO=str(REPO), PYTHON=sys.executable, RUN=str(run), MAX_SECONDS="2", STEPS="1000")
    tiny = ["--device", "cpu", "--batch", "2", "--seq", "64", "--limit", "40", "--neutral", "8", "--holdout", "20"]
    done = subprocess.run(
        ["bash", str(pack / "run.sh"), str(out), *tiny, "--threads", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["stage"] == "finetune" and report["stopped_by_time_budget"] and 0 < report["steps"] < 1000
    assert report["throughput_last_run"]["steps_per_second"] > 0
    parts = sorted((out / "parts").glob("*.safetensors"))
    assert parts and all(p.stat().st_size <= PART_LIMIT for p in parts)
    joined = tmp_path / "model"
    subprocess.run(
        [sys.executable, "-m", "training.bf16_parts", "join", str(out / "parts"), "--out", str(joined)],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    net, card = load_model_folder(joined)[:2]
    assert card["finetune"]["scope"] == "all" and card["finetune"]["locality_weight"] == 4.0
    assert card["finetune"]["margin"] == 0.1 and card["finetune"]["loss_weights"]["lm"] == 1.0
    assert card["finetune"]["stopped_by_max_seconds"]["scheduled_steps"] == 1000
    assert "calibration" not in card  # the bundled model's calibration described its weights, not these
    assert net.config.vq and torch.isfinite(next(net.parameters())).all()
    assert (out / "log.jsonl").is_file() and torch.__version__ in (out / "run.log").read_text()
