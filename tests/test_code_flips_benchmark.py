"""benchmarks/code_flips.py: code flips per layer for models side by side, over many edits."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import code_flips

DATA = Path(__file__).parent / "data"


def test_every_model_meets_the_same_edits(tmp_path, monkeypatch):
    monkeypatch.setattr(code_flips, "CHUNK", 4)  # two chunks of the six sequences
    out = tmp_path / "out"
    argv = ["bundled", "bundled", "--label", "a", "b", "--edits", "6", "--seq", "64", "--data", str(DATA)]
    assert code_flips.main([*argv, "--out", str(out), "--name", "t"]) == 0
    results = json.loads((out / "t.json").read_text())
    a, b = results["models"]["a"], results["models"]["b"]
    assert a["flip_rate_per_layer"] == b["flip_rate_per_layer"]  # the same sequences and edits for every model
    assert len(a["flip_rate_per_layer"]) == 4 and all(0 <= x <= 1 for x in a["flip_rate_per_layer"])
    assert 0 < a["later_positions"] < 6 * 64
    assert sum(a["later_by_distance"]) == a["later_positions"]  # the bands split the later positions
    assert sum(a["later_by_depth"]) == a["later_positions"]
    assert a["distance_bands"] == [8, 64, 256] and len(a["flip_rate_by_distance"]) == 4
    assert a["depth_bands"] == [64, 256, 512] and len(a["flip_rate_by_depth"]) == 4
    for axis in ("distance", "depth"):
        for rate, bands in zip(a["flip_rate_per_layer"], a[f"flip_rate_by_{axis}"]):
            flips = sum(r * n for r, n in zip(bands, a[f"later_by_{axis}"]))
            assert round(flips) == round(rate * a["later_positions"])  # the bands' flips add up to the layer's
    assert a["card_sequences"] == 8 and len(a["card_flip_rate_per_layer"]) == 4
    text = (out / "t.md").read_text()
    assert "| a |" in text and "| b |" in text and "6 held-out sequences of 64 tokens" in text
    assert "| 1-8 tokens after |" in text and "| 257+ tokens after |" in text
    assert "| 1-64 tokens deep |" in text and "| 513+ tokens deep |" in text


def test_bad_counts_are_refused(capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        code_flips.main(["bundled", "--edits", "0"])
    assert e.value.code == 2 and "--edits" in capsys.readouterr().err
