"""How many distillation steps a wall-clock budget allows, from the run's own first steps.

Why: the learning rate follows ``--steps`` (warm-up, then cosine), so a run cut by
``--max-seconds`` should be scheduled for about the steps the budget allows, and no H100
throughput of this student and teacher has been measured before the slot. The run script
therefore starts the real run with ``--stop-after PROBE`` (still inside the warm-up, where the
learning rate does not depend on ``--steps``, and before ``--vq-start``), reads the step times
from its log, and resumes it with the steps computed here: the probe's steps are the first steps
of the run, nothing is thrown away. The first ``skip`` steps (CUDA start-up) are not timed. The
probe runs without VQ and the locality term, which come later and make a step dearer, so the
estimate is scaled by ``margin``; a run that still outlasts its budget stops on ``--max-seconds``.

    python -m training.slot_steps OUT/log.jsonl --seconds 380 [--skip 20 --margin 0.8 --probe 60]
    # prints: STEPS VQ_START
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SlotPlan:
    steps: int
    vq_start: int
    steps_per_second: float  # measured in the probe, without VQ


def probe_rate(log: Path, skip: int) -> float:
    """Steps per second between the logged step ``skip`` (or the first logged after it) and the last."""
    records = [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]
    timed = sorted((r["step"], r["time"]) for r in records if r.get("stage") == "distill" and "time" in r)
    timed = [(s, t) for s, t in timed if s >= skip]
    if len(timed) < 2 or timed[-1][1] <= timed[0][1]:
        raise SystemExit(f"{log}: fewer than two timed steps after step {skip}; probe longer or log more often")
    (s0, t0), (s1, t1) = timed[0], timed[-1]
    return (s1 - s0) / (t1 - t0)


def plan(rate: float, seconds: float, probe: int, margin: float, vq_share: float = 0.1) -> SlotPlan:
    """Steps for ``seconds`` more at ``rate`` x ``margin``, plus the probe's; VQ starts at ``vq_share`` of them
    (never inside the probe, which ran without it)."""
    steps = probe + max(1, int(rate * margin * seconds))
    return SlotPlan(steps, max(probe, int(vq_share * steps)), round(rate, 3))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.slot_steps", description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="the probe's log.jsonl")
    ap.add_argument("--seconds", type=float, required=True, help="wall clock left for the step loop")
    ap.add_argument("--probe", type=int, default=60, help="steps the probe ran")
    ap.add_argument("--skip", type=int, default=20, help="steps not timed (start-up)")
    ap.add_argument("--margin", type=float, default=0.8, help="the VQ steps' cost against the probe's")
    args = ap.parse_args(argv)
    p = plan(probe_rate(args.log, args.skip), args.seconds, args.probe, args.margin)
    print(p.steps, p.vq_start)
    print(f"probe: {p.steps_per_second} steps/s without VQ -> {p.steps} steps, VQ from {p.vq_start}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
