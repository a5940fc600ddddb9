"""Benchmarks check optional packages before work and write their results before plotting."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import optional  # noqa: E402


@pytest.fixture()
def no_matplotlib(monkeypatch):
    """As if the [bench] extra were not installed: every `import matplotlib` fails."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_missing_and_can_plot_say_so_up_front(no_matplotlib, capsys):
    assert optional.missing("matplotlib", "json") == ["matplotlib"]
    assert optional.can_plot("x.py") is False
    assert "plots are skipped" in capsys.readouterr().err


def test_require_exits_2_with_the_install_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(SystemExit) as e:
        optional.require("paper_table.py", "transformers", why="the prefix-KV baseline")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "needs transformers" in err and ".[bench]" in err


def test_paper_table_writes_results_before_plotting(no_matplotlib, tmp_path):
    from benchmarks import paper_table as pt

    results = {
        s: [
            pt.Sample(
                inc_macs=10,
                inc_s=0.1,
                base_macs={"dense": 100},
                base_s={"dense": 1.0},
                changed_fraction=0.01,
                location=0.5,
            )
        ]
        for s in pt.SCENARIOS
    }
    text = pt.write_results(results, ["table"], tmp_path, plots=optional.can_plot("paper_table.py"))
    assert text == "table" and (tmp_path / "paper_table.md").read_text() == "table\n"
    assert json.loads((tmp_path / "paper_table.json").read_text())["atomic"][0]["inc_macs"] == 10
    assert not list(tmp_path.glob("*.png"))
    for f in tmp_path.iterdir():
        f.unlink()
    with pytest.raises(ImportError):  # even when plotting is attempted and fails, the results are on disk
        pt.write_results(results, ["table"], tmp_path, plots=True)
    assert (tmp_path / "paper_table.json").exists() and (tmp_path / "paper_table.md").exists()


def test_paper_table_records_its_plots_without_the_machines_folders(monkeypatch, tmp_path):
    """The results file names its plots as any results file names a path (benchmarks.common.recorded_path):
    relative to the repository, never a folder of the machine that ran it. The plotting itself (matplotlib,
    the [bench] extra) is stood in for by a function that writes the files and returns their absolute paths."""
    from benchmarks import paper_table as pt

    def plot(results, out):
        paths = [out / "reduction_vs_modified_fraction.png", out / "reduction_vs_edit_location.png"]
        for path in paths:
            path.write_bytes(b"png")
        return paths

    monkeypatch.setattr(pt, "plot", plot)
    sample = pt.Sample(10, 0.1, {"dense": 100, "prefix": 50, "paragraph": 20}, {}, 0.01, 0.5)
    results = {s: [sample, sample] for s in pt.SCENARIOS}
    pt.write_results(results, ["table"], tmp_path, plots=True)
    plots = [line for line in (tmp_path / "paper_table.md").read_text().splitlines() if line.startswith("plot:")]
    assert len(plots) == 2
    assert all(str(tmp_path) not in line for line in plots), plots


def test_typing_replay_report_without_matplotlib(no_matplotlib, tmp_path):
    from benchmarks import typing_replay as tr

    meta = dict(
        command="x",
        speed=[1.0],
        wall_seconds=1.0,
        loadavg_start=(0, 0, 0),
        loadavg_end=(0, 0, 0),
        cpus=2,
        plots=optional.can_plot("typing_replay.py"),
    )
    md = tr.write_report({}, meta, tmp_path / "replay")
    assert "latency CDF: skipped" in md
    assert json.loads((tmp_path / "replay.json").read_text())["meta"]["plots"] is False
    assert not list(tmp_path.glob("*.png"))


def test_one_percentile_function():
    from benchmarks import common, typing_replay

    assert typing_replay.pct is common.percentile
    assert [common.percentile([5, 1, 3, 2], q) for q in (0, 0.5, 0.95, 1)] == [1, 3, 5, 5]
    assert common.p95(list(range(101))) == 95


def test_lm_head_rows_reports_every_form_and_their_agreement(tmp_path):
    from benchmarks import lm_head_rows

    assert lm_head_rows.main(["--calls", "4", "--repeats", "1", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "lm_head_rows.json").read_text())
    assert [r["dtype"] for r in rows] == ["float32", "float64"]
    for r in rows:
        assert set(r["mean_ms"]) == {"F.linear", "transposed copy", "padded F.linear", "engine"}
        assert r["max_abs_diff"] < (1e-4 if r["dtype"] == "float32" else 1e-10)
    assert "engine" in (tmp_path / "lm_head_rows.md").read_text()
