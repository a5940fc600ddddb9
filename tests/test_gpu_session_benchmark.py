"""benchmarks/gpu_session.py, the one command the engine's GPU figures come from, in its quick mode on
the CPU: every section reports, the engine's codes stay exact, the report names the device and the
dtype, and a section that fails is reported without losing the others."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import torch

from benchmarks import gpu_session as gs
from benchmarks import graph_memory


def test_edits_are_the_kinds_they_say():
    n = 50
    edits = gs.one_token_edits(n, 4, vocab=100, seed=1)
    assert [k for k, _ in edits] == ["replace", "insert", "delete"] * 4 + ["append"] * 4
    for kind, sp in edits:
        size = {"replace": (1, 1), "insert": (0, 1), "delete": (1, 0), "append": (0, 1)}[kind]
        assert (sp.end - sp.start, len(sp.new_ids)) == size
        assert 0 <= sp.start <= n
        if kind == "append":
            assert sp.start == n
        n += len(sp.new_ids) - (sp.end - sp.start)
    for sp in gs.random_splices(20, 40, vocab=100, seed=2):
        assert sp.end > sp.start or sp.new_ids


def test_graph_memory_edits_land_inside_the_windows_it_names():
    bounds = [(0, 3), (3, 40), (40, 41), (41, 90), (90, 150), (150, 160)]
    places = graph_memory.edit_places(bounds, windows=2, places=3)
    long_enough = [b for b in bounds if b[1] - b[0] > 4]
    hit = {next(b for b in long_enough if b[0] <= p < b[1]) for p in places}
    assert len(places) == 6 and len(hit) == 2  # three places in each of two windows long enough
    assert len(set(places)) == 6


def test_quick_run_on_the_cpu(full_data_dir, tmp_path):
    code = gs.main(["--quick", "--device", "cpu", "--data", str(full_data_dir), "--out", str(tmp_path)])
    results = json.loads((tmp_path / "gpu_session.json").read_text())
    assert code == 0, [v for v in results.values() if isinstance(v, dict) and "error" in v]
    assert results["facts"]["device"] == "cpu" and results["facts"]["dtype"] == "float32"
    rows = results["one_token"]
    assert {(r["sizing"], r["kind"]) for r in rows} == {
        (s, k) for s in gs.SIZED for k in ("replace", "insert", "delete", "append")
    }
    graphed = next(r for r in rows if r["sizing"] == "graphed" and r["kind"] == "replace")
    assert graphed["first_passes"]["replays"] > 0  # after the warm-up rounds the timed edits replay
    assert all(r["codes_equal"] and 0 < r["p50_ms"] <= r["p95_ms"] and r["dense_ms"] > 0 for r in rows)
    assert {r["sizing"] for r in results["counts"]} == set(gs.SIZED)
    assert all(r["launches"] > 0 for r in results["counts"])
    assert results["exactness"]["all_equal"] and len(results["exactness"]["checks"]) == 2
    scenarios = {r["scenario"]: r for r in results["revisions"]["rows"]}
    assert set(scenarios) == {"entire revision", "atomic"} and scenarios["atomic"]["pairs"] == 2
    assert [r["device"] for r in results["server"]] == ["cpu"] and results["server"][0]["keystrokes"] > 0
    assert results["profile"]["edits"] > 0 and (tmp_path / "profile_ops.txt").read_text().count("aten::") > 5
    memory = results["graph_memory"]
    edits = memory["windows_edited"] * memory["places_per_window"]
    assert memory["windows_edited"] == gs.QUICK.graph_windows and memory["windows"] > memory["windows_edited"]
    assert memory["eager"] + memory["captures"] + memory["replays"] == graph_memory.ROUNDS * edits
    assert memory["captures"] > 0 and memory["replays"] > 0 and memory["codes_equal"]
    assert memory["after"]["reserved_mb"] is None  # a CPU has no capture pools to measure
    report = (tmp_path / "gpu_session.md").read_text()
    assert (
        "dtype float32" in report
        and "codes against a dense pass" in report
        and "NO" not in [cell.strip() for cell in report.split("|")]
    )


def test_a_failing_section_is_reported_and_the_rest_kept(tmp_path):
    session = gs.Session(tmp_path, ["--quick"])
    session.section("counts", lambda: 1 / 0)
    session.section("exactness", lambda: {"sizing": "exact", "splices": 0, "checks": [], "all_equal": True})
    saved = json.loads((tmp_path / "gpu_session.json").read_text())
    assert "ZeroDivisionError" in saved["counts"]["error"] and saved["exactness"]["all_equal"]
    assert gs._failed(saved["counts"]).startswith("failed: ZeroDivisionError")


def test_the_gpu_pack_runs_the_benchmark_from_its_own_data(full_data_dir, tmp_path):
    """benchmarks/gpu_pack_run.sh, as the pack's run.sh, runs the engine's CUDA tests, reads the pack's
    data (not $VQ_LSP_DATA) and writes the engine's GPU benchmark results and a log naming the GPU,
    Python and torch into OUT, the rest packed into one file (a remote run returns at most 8)."""
    repo = Path(__file__).resolve().parents[1]
    pack = tmp_path / "pack"
    for name in ("eval/python_peps.jsonl.gz",):
        (pack / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (pack / "data" / name).symlink_to(full_data_dir / name)
    shutil.copy(repo / "benchmarks" / "gpu_pack_run.sh", pack / "run.sh")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "VQ_LSP_DATA"}
    env.update(REPO=str(repo), PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(pack / "run.sh"), str(out), "--quick", "--device", "cpu", "--sections", "one_token", "profile"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / "gpu_session.json").read_text())
    assert results["facts"]["device"] == "cpu" and all(r["codes_equal"] for r in results["one_token"])
    log = (out / "run.log").read_text()
    assert torch.__version__ in log  # the machine named
    # the engine's CUDA tests ran (one skips on a CPU)
    assert re.search(r"\b\d+ passed, 1 skipped\b", log) and " failed" not in log
    assert sorted(p.name for p in out.iterdir()) == ["extras.tgz", "gpu_session.json", "gpu_session.md", "run.log"]
    with tarfile.open(out / "extras.tgz") as tar:
        assert "profile_ops.txt" in tar.getnames()
