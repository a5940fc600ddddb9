"""benchmarks/model_protocol.py: the card's paper protocol for models side by side, rounds alternated."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import model_protocol

DATA = Path(__file__).parent / "data"


def test_two_models_two_rounds_on_short_revisions(tmp_path):
    out = tmp_path / "out"
    argv = ["bundled", "bundled", "--label", "a", "b", "--pairs", "1", "--rounds", "2", "--lengths", "200", "1200"]
    assert model_protocol.main([*argv, "--data", str(DATA), "--out", str(out), "--name", "t"]) == 0
    results = json.loads((out / "t.json").read_text())
    assert list(results["rounds"]) == ["a", "b"] and all(len(r) == 2 for r in results["rounds"].values())
    for runs in results["rounds"].values():
        for r in runs:
            for scenario in model_protocol.SCENARIOS:
                assert r[scenario]["paragraph_cache_over_engine_seconds_median"] > 0
                assert r[scenario]["engine_seconds_median"] > 0
    # the same weights compute the same MACs in every round and under either label
    macs = {
        r[s]["paragraph_cache_over_engine_macs_median"]
        for runs in results["rounds"].values()
        for r in runs
        for s in ["one-token edit"]
    }
    assert len(macs) == 1
    text = (out / "t.md").read_text()
    assert "| a | one-token edit |" in text and "| b | entire revision |" in text
