"""The one step loop the four training stages share: schedule, stops, logs, probes and checkpoints."""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch

from training import common


def _run(tmp_path, start=0, **kw):
    args = SimpleNamespace(steps=10, lr=0.1, warmup=2, stop_after=None, log_every=3, ckpt_every=4, eval_every=0)
    vars(args).update(kw)
    torch.manual_seed(0)
    net = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    bar = common.Progress(tmp_path, args.steps, start, "t", disable=True)
    saved, lrs, probes = [], [], []

    def batch_terms(step):
        lrs.append(opt.param_groups[0]["lr"])
        x = torch.full((1, 2), float(step))
        return {"loss": (net(x) ** 2).mean(), "extra": torch.tensor(1.0)}, 5

    end = common.train_steps(
        args,
        opt,
        net.parameters(),
        start,
        bar,
        batch_terms,
        save=saved.append,
        log_record=lambda step, shown: dict(stage="t", step=step, **shown),
        probe=(lambda n: probes.append(n) or 0.5) if args.eval_every else None,
        net=net,
    )
    logs = (
        [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
        if (tmp_path / "log.jsonl").exists()
        else []
    )
    return end, saved, lrs, logs, probes, args


def test_full_run_saves_logs_and_follows_the_schedule(tmp_path):
    end, saved, lrs, logs, _, args = _run(tmp_path)
    assert end == 10 and saved == [4, 8, 10]
    assert [r["step"] for r in logs] == [3, 6, 9, 10] and all("loss" in r and "extra" in r for r in logs)
    assert lrs == [0.1 * common.warmup_cosine(s, 10, 2) for s in range(10)]


def test_stop_after_checkpoints_where_it_stops(tmp_path):
    end, saved, lrs, logs, _, _ = _run(tmp_path, start=3, stop_after=2)
    assert end == 5 and saved == [4, 5] and len(lrs) == 2


def test_probe_every_eval_every_steps(tmp_path):
    end, _, _, logs, probes, _ = _run(tmp_path, eval_every=5)
    assert len(probes) == 2 and [r["step"] for r in logs if "probe" in r] == [5, 10]


def test_max_seconds_stops_after_the_step_that_spends_it_and_saves_there(tmp_path):
    end, saved, lrs, logs, _, args = _run(tmp_path, max_seconds=1e-9)  # spent by the first step
    assert end == 1 and saved == [1] and [r["step"] for r in logs] == [1]
    assert lrs == [0.1 * common.warmup_cosine(0, 10, 2)]  # the schedule still follows --steps


def test_max_seconds_larger_than_the_run_changes_nothing(tmp_path):
    end, saved, _, logs, _, _ = _run(tmp_path, max_seconds=3600.0)
    assert end == 10 and saved == [4, 8, 10] and [r["step"] for r in logs] == [3, 6, 9, 10]
