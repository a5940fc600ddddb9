"""benchmarks.float32_ties finds a planted difference and describes it: a document whose held code
is changed by hand differs from a dense pass at exactly that code, which the report names with both
candidates' distances; an untouched run reports no difference."""

from __future__ import annotations

import json

import inference
from benchmarks import float32_ties


def test_a_planted_code_is_the_one_difference_found():
    model = inference.load_model(device="cpu", dtype="float32")
    doc = inference.IncrementalDocument(model, model.tokenizer.encode("The film was slow, then wonderful."))
    assert float32_ties.differing_codes(doc) == []
    state = doc.windows[0]
    row = state.order[3]
    old = int(state.codes[1, row, 0])
    state.codes[1, row, 0] = (old + 1) % model.config.vq_codes
    (found,) = float32_ties.differing_codes(doc)
    assert (found.layer, found.row, found.head, found.dense_code) == (1, 3, 0, old)
    assert found.engine_code == (old + 1) % model.config.vq_codes
    assert found.alone_distances[0] <= found.alone_distances[1]  # the dense pass's code is the nearer one


def test_a_short_run_reports_its_edits(full_data_dir, tmp_path):
    argv = ["--tokens", "200", "--per-kind", "2", "--sizing", "exact", "--data", str(full_data_dir)]
    assert float32_ties.main([*argv, "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "float32_ties.json").read_text())
    (run,) = results["runs"]
    assert run["sizing"] == "exact" and run["edits"] == 6 and run["codes"] == []
    assert "none in 6" in (tmp_path / "float32_ties.md").read_text()
