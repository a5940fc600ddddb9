"""Benchmark results files name no machine's own paths: a path is recorded relative to the
repository or to $VQ_LSP_DATA, and anything elsewhere only as lying elsewhere."""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import REPO, recorded_command, recorded_path


def test_paths_are_recorded_relative_to_the_repository_or_the_data(monkeypatch, tmp_path):
    data = tmp_path / "shared" / "data"
    monkeypatch.setenv("VQ_LSP_DATA", str(data))
    assert recorded_path(REPO / "benchmarks" / "results" / "x.json") == "benchmarks/results/x.json"
    assert recorded_path(data / "eval" / "a.jsonl.gz") == "$VQ_LSP_DATA/eval/a.jsonl.gz"
    assert recorded_path(tmp_path / "shared" / "models" / "teacher") == "$VQ_LSP_DATA/../models/teacher"
    assert recorded_path("/somewhere/else") == "<outside the repository>"
    assert recorded_command(["--out", "/somewhere/else", "--seed", "0"]) == [
        "--out",
        "<outside the repository>",
        "--seed",
        "0",
    ]


def test_no_results_file_holds_a_machine_path():
    for path in sorted((REPO / "benchmarks" / "results").glob("*.json")):
        text = path.read_text()
        for home in ("/home/", "/tmp/", "/work/", "/Users/", str(Path.home()) + "/"):
            assert home not in text, f"{path.name} holds a machine path ({home})"
