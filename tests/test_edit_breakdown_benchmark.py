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


def test_later_rows_are_counted_in_the_edited_window():
    """With paragraph context an edit moves only the rest of its paragraph: the rows after it in
    its window, not in the document."""
    import inference

    model = inference.load_model(context="paragraph")
    text = "One short paragraph here.\n\nA second paragraph, a little longer than the first one."
    doc = inference.IncrementalDocument(model, model.tokenizer.encode(text))
    bounds = doc.window_bounds
    assert len(bounds) == 2
    (a0, b0), (a1, b1) = bounds
    assert edit_breakdown.rows_after(doc, a0) == b0 - a0 < doc.n_tokens - a0
    assert edit_breakdown.rows_after(doc, b1 - 1) == 1
