"""benchmarks/model_cards.py lines up any number of cards; a figure one card lacks reads "-"."""

from __future__ import annotations

import json

from benchmarks import model_cards


def card(accuracy: float, flips: list[float], protocol: dict | None = None) -> dict:
    evaluation = {
        "imdb_test": {"vq": {"accuracy": accuracy}},
        "tone_hints": {"imdb_test": {"accuracy": accuracy, "shown_share": 0.5}, "rule": "a rule"},
        "single_token_edits": {"flip_rate_per_layer": flips},
        "engine": {"single_token_mac_speedup_median": 30.0},
        "held_out_lm": {"lm_loss_vq_on": 5.5},
    }
    if protocol:
        evaluation["paper_protocol"] = protocol
    return {"evaluation": evaluation}


def test_three_cards_side_by_side_with_the_protocol_only_where_recorded(tmp_path):
    protocol = {"one-token edit": {"paragraph_cache_over_engine_seconds_median": 1.75}}
    folders = []
    for i, c in enumerate([card(0.855, [0.02, 0.03]), card(0.848, [0.006, 0.004], protocol), card(0.86, [0.01, 0.01])]):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / "card.json").write_text(json.dumps(c))
        folders.append(str(folder))
    out = tmp_path / "out"
    assert model_cards.main([*folders, "--label", "a", "--label", "b", "--out", str(out), "--name", "t"]) == 0
    rows = {(r[0], r[1]): r[2:] for r in json.loads((out / "t.json").read_text())["rows"]}
    assert rows[("IMDB test", "accuracy")] == ["85.5%", "84.8%", "86.0%"]
    assert rows[("one-token edit", "codes flipped, layer 1")] == ["3.00%", "0.40%", "1.00%"]
    assert rows[("paper protocol, one-token edit", "paragraph cache / engine, wall clock")] == ["-", "1.75x", "-"]
    assert "| set | figure | before | a | b |" in (out / "t.md").read_text()
