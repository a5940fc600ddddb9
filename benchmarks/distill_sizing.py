"""Sizing the SmolLM2 recipe's distillation from CPU step times, beside the GPU recipe's own distillation.

    python -m benchmarks.distill_sizing [--seq 2048] [--steps 4]

Runs ``vq-train distill`` on one CPU core for a few steps in two settings, each step 4 sequences
plus 1 edited copy (the locality loss on; the GPU recipe's 8 + 2 in proportion), at the same length:

- the GPU recipe's distillation: the project's GPU-trained OPT teacher (d=256, 4 layers, 8,192-token
  vocabulary) converted into its VQ student, whose H100 throughput the GPU recipe measured;
- the SmolLM2 recipe's: SmolLM2-135M as teacher of a fresh student in the recipe's shape
  (``--student`` flags, 49,152-token vocabulary, top-64 logits).

A step's time is the median gap between consecutive logged steps after the first. The ratio of the
two step times, applied to the GPU recipe's measured H100 distillation throughput, is an estimate
of the SmolLM2 recipe's H100 throughput: it assumes the GPU keeps the CPU's cost ratio, which a GPU
(faster at large matrix products, slower at many small kernels) need not. It is not a GPU figure.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import tempfile
from pathlib import Path

import torch

from benchmarks.common import REPO, data_dir, markdown_table
from training import cli

RESULTS = REPO / "benchmarks" / "results"
GPU_TEACHER = REPO.parent / "shared" / "models" / "vq-opt-gpu-2026-11" / "teacher"
H100_OPT_DISTILL_TOK_S = 140_000  # the GPU recipe's distillation at 2,048 tokens on one H100 (training/README.md)
STUDENT = "--d 384 --layers 6 --heads 6 --ffn 1536 --top-k 64 --vq-start 0"


def step_seconds(argv: list[str], out: Path) -> tuple[float, list[float]]:
    assert cli.main([str(a) for a in argv] + ["--out", str(out)]) == 0
    times = [
        r["time"]
        for r in map(json.loads, (out / "log.jsonl").read_text().splitlines())
        if r.get("stage") == "distill" and "step" in r and not r.get("final")
    ]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps), gaps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--teacher", default="smollm2", help="smollm2, or its folder from vq-train teacher --pretrained")
    ap.add_argument("--student", default=STUDENT, help="the SmolLM2 student's shape flags")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    common = [
        "--data",
        data_dir(args.data),
        "--seq",
        args.seq,
        "--window",
        args.seq,
        "--batch",
        args.batch,
        "--edit-batch",
        1,
        "--steps",
        args.steps,
        "--warmup",
        1,
        "--log-every",
        1,
        "--tokens",
        200_000,
        "--kmeans-batches",
        1,
        "--vq-heads",
        2,
        "--scale",
        1 / 1024,
        "--threads",
        1,
        "--device",
        "cpu",
        "--quiet",
        "--locality",
        1.0,
    ]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows["GPU recipe: project OPT teacher -> its converted VQ student (d=256, 4 layers)"] = step_seconds(
            ["distill", "--teacher", GPU_TEACHER, *common], Path(tmp) / "opt"
        )
        rows[f"SmolLM2 recipe: SmolLM2-135M -> fresh student ({args.student})"] = step_seconds(
            ["distill", "--teacher", args.teacher, *common, *shlex.split(args.student)], Path(tmp) / "smollm2"
        )
    (opt_name, (opt_s, _)), (smol_name, (smol_s, _)) = rows.items()
    ratio = smol_s / opt_s
    tokens = args.seq * args.batch
    report = {
        "seq": args.seq,
        "batch": args.batch,
        "edit_batch": 1,
        "tokens_per_step": tokens,
        "student": args.student,
        "step_seconds": {k: {"median": v[0], "gaps": v[1]} for k, v in rows.items()},
        "cpu_step_time_ratio": ratio,
        "h100_tok_s_estimate_unmeasured": H100_OPT_DISTILL_TOK_S / ratio,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "distill_sizing.json").write_text(json.dumps(report, indent=2) + "\n")
    sequences = f"{args.batch} sequence{'s' if args.batch > 1 else ''}"
    table = markdown_table(
        [f"distillation step ({sequences} + 1 edited copy)", "seconds per step, one CPU core", "CPU tokens/s"],
        [[k, f"{v[0]:.1f}", f"{tokens / v[0]:.0f}"] for k, v in rows.items()],
    )
    (RESULTS / "distill_sizing.md").write_text(
        f"# Distillation step cost on one CPU core, {args.seq} tokens per sequence\n\n"
        f"`python -m benchmarks.distill_sizing --seq {args.seq} --steps {args.steps} --batch {args.batch}`\n\n"
        f"{table}\n\n"
        f"The SmolLM2 step costs {ratio:.1f}x the GPU recipe's. Applied to that recipe's measured H100 "
        f"distillation throughput ({H100_OPT_DISTILL_TOK_S:,} tokens/s), this estimates "
        f"{H100_OPT_DISTILL_TOK_S / ratio:,.0f} tokens/s for the SmolLM2 recipe on one H100: an estimate from CPU "
        f"cost ratios, not a GPU measurement.\n"
    )
    print((RESULTS / "distill_sizing.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
