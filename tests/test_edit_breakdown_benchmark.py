"""benchmarks/edit_breakdown.py: a one-token edit's time by engine step."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import edit_breakdown

DATA = Path(__file__).parent / "data"


def test_every_step_is_clocked_and_the_clocks_come_off(tmp_path):
    from inference.engine import layer, passes

    before = {name: getattr({"layer": layer, "passes": passes}[m], name) for m, name, _ in edit_breakdown.STEPS}
    out = tmp_path / "out"
    argv = ["--pairs", "1", "--edits", "4", "--lengths", "200", "1200", "--data", str(DATA), "--out", str(out)]
    assert edit_breakdown.main(argv) == 0
    edits = json.loads((out / "edit_breakdown.json").read_text())["edits"]
    assert len(edits) == 4
    for e in edits:
        steps = sum(e["steps"].values())
        assert 0 < steps <= e["seconds"]  # the steps run inside the edit's wall clock
        assert e["steps"]["later rows moved by the changed keys"] > 0 and len(e["dirty_per_layer"]) == 4
        assert e["dirty_per_layer"][0] == 1 and e["later_rows"] >= 1  # one replaced token, dirty at layer 0
    after = {name: getattr({"layer": layer, "passes": passes}[m], name) for m, name, _ in edit_breakdown.STEPS}
    assert after == before  # the engine is left as it was
    text = (out / "edit_breakdown.md").read_text()
    assert "| whole edit |" in text and "Fit: ms per edit" in text
