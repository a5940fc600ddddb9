"""What a training run on a remote GPU did, in a few lines (and a JSON file that comes back with the model).

Why: the output of a run on a remote machine comes back only as its last lines and a few files; the
card's throughput, whether the time budget stopped the run and the last logged losses are what
the next slot is sized from.

    python -m training.gpu_run_report OUT [--stage distill|finetune] [--json FILE]   # OUT: the run's --out folder
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LAST_KEYS = ("step", "loss", "kl", "hidden", "locality", "flip", "acc", "lm", "cls")


def summary(out: Path, stage: str = "distill") -> dict:
    """The run's card section of `stage` (distill or finetune: a fine-tuned model's card keeps the
    sections of the model it started from, so the stage is named) and its last log line."""
    card = json.loads((out / "model" / "card.json").read_text())[stage]
    logs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
    last = [r for r in logs if r.get("stage") == stage][-1]
    throughput = card.get("throughput_last_run") or {
        "steps_per_second": round(card["steps"] / card["wall_seconds"], 3) if card.get("wall_seconds") else None,
        "tokens_per_second": last.get("tok_s"),
    }
    return {
        "model": str(out / "model"),
        "stage": stage,
        "steps": card["steps"],
        "stopped_by_time_budget": "stopped_by_max_seconds" in card,
        "throughput_last_run": throughput,
        "reads_order_only": card.get("reads_order_only"),
        "holdout_accuracy": card.get("holdout_accuracy"),
        "last_log": {k: last[k] for k in LAST_KEYS if k in last},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.gpu_run_report", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the run's --out folder")
    ap.add_argument("--stage", choices=("distill", "finetune"), default="distill", help="the run's stage")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = ap.parse_args(argv)
    s = summary(args.out, args.stage)
    print("model:", s["model"], "| steps", s["steps"], "| stopped by the time budget:", s["stopped_by_time_budget"])
    if s["holdout_accuracy"]:
        print("held-out reviews:", json.dumps(s["holdout_accuracy"]))
    print("throughput:", json.dumps(s["throughput_last_run"]))
    print("last log:", json.dumps(s["last_log"]))
    if args.json:
        args.json.write_text(json.dumps(s, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
