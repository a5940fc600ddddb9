"""What a distillation run on a remote GPU did, in a few lines (and a JSON file that comes back with the trunk).

Why: the output of a run on a remote machine comes back only as its last lines and a few files; the
card's throughput, whether the time budget stopped the run and the last logged losses are what
the next slot is sized from.

    python -m training.gpu_run_report OUT [--json FILE]     # OUT: the vq-train distill --out folder
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LAST_KEYS = ("step", "loss", "kl", "hidden", "locality", "flip")


def summary(out: Path) -> dict:
    card = json.loads((out / "model" / "card.json").read_text())["distill"]
    logs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
    last = [r for r in logs if r.get("stage") == "distill"][-1]
    return {
        "trunk": str(out / "model"),
        "steps": card["steps"],
        "stopped_by_time_budget": "stopped_by_max_seconds" in card,
        "throughput_last_run": card["throughput_last_run"],
        "reads_order_only": card.get("reads_order_only"),
        "last_log": {k: last[k] for k in LAST_KEYS if k in last},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.gpu_run_report", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the distill run's --out folder")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = ap.parse_args(argv)
    s = summary(args.out)
    print("trunk:", s["trunk"], "| steps", s["steps"], "| stopped by the time budget:", s["stopped_by_time_budget"])
    print("throughput:", json.dumps(s["throughput_last_run"]))
    print("last log:", json.dumps(s["last_log"]))
    if args.json:
        args.json.write_text(json.dumps(s, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
