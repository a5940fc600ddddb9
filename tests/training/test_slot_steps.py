"""The slot's step count comes from the probe's own step times, after its start-up steps."""

from __future__ import annotations

import json

import pytest

from training.slot_steps import main, plan, probe_rate


def write_log(path, times):
    lines = [json.dumps({"stage": "distill", "step": s, "time": t}) for s, t in times]
    path.write_text("\n".join([json.dumps({"stage": "other", "step": 99, "time": 0.0}), *lines]) + "\n")


def test_the_rate_skips_the_start_up_steps(tmp_path):
    log = tmp_path / "log.jsonl"
    write_log(log, [(10, 100.0), (20, 130.0), (30, 132.0), (60, 138.0)])  # 30 s of CUDA start-up at first
    assert probe_rate(log, skip=20) == pytest.approx(40 / 8)
    with pytest.raises(SystemExit, match="fewer than two timed steps"):
        probe_rate(log, skip=60)


def test_the_plan_adds_the_probe_and_never_starts_vq_inside_it(tmp_path, capsys):
    p = plan(rate=5.0, seconds=400, probe=60, margin=0.8)
    assert (p.steps, p.vq_start) == (60 + 1600, 166)
    assert plan(rate=0.5, seconds=100, probe=60, margin=0.8).vq_start == 60  # 100 steps: 10% is inside the probe
    log = tmp_path / "log.jsonl"
    write_log(log, [(20, 10.0), (60, 18.0)])
    assert main([str(log), "--seconds", "400", "--probe", "60", "--skip", "20"]) == 0
    assert capsys.readouterr().out.split() == ["1660", "166"]
