"""benchmarks/flips_accuracy.py: each model a point of its worst layer's code flips against its accuracy,
from a card, an eval.json or a model_cards study; a source that is neither is refused."""

from __future__ import annotations

import json

import pytest

from benchmarks import flips_accuracy

from .test_model_cards_benchmark import card


def study(tmp_path) -> str:
    """A model_cards results file of two models, one without an accuracy."""
    path = tmp_path / "study.json"
    rows = [
        ["IMDB test", "accuracy", "85.5%", "-"],
        ["one-token edit", "codes flipped, layer 0", "1.68%", "0.70%"],
        ["one-token edit", "codes flipped, layer 1", "3.30%", "0.10%"],
        ["paper protocol, one-token edit", "paragraph cache / engine, wall clock", "1.48x", "1.90x"],
    ]
    path.write_text(json.dumps({"before": "runs/a", "after": ["runs/b"], "labels": ["B: b"], "rows": rows}))
    return str(path)


def test_points_from_a_card_an_eval_file_and_a_study(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    protocol = {"one-token edit": {"paragraph_cache_over_engine_seconds_median": 1.75}}
    (folder / "card.json").write_text(json.dumps(card(0.848, [0.006, 0.004], protocol)))
    evaluation = tmp_path / "run" / "eval.json"
    evaluation.parent.mkdir()
    evaluation.write_text(json.dumps(card(0.503, [0.005, 0.002])["evaluation"]))
    out = tmp_path / "out"
    argv = [
        str(folder),
        str(evaluation),
        "--label",
        "local",
        "--label",
        "run",
        "--study",
        study(tmp_path),
        "--out",
        str(out),
    ]
    assert flips_accuracy.main(argv) == 0
    points = {p["label"]: p for p in json.loads((out / "flips_accuracy.json").read_text())["points"]}
    assert set(points) == {"before (study)", "local", "run"}  # the study's model without an accuracy is left out
    assert points["before (study)"]["flips"] == pytest.approx([0.0168, 0.033])
    assert points["before (study)"]["one_token"] == pytest.approx(1.48)
    assert points["local"]["one_token"] == 1.75 and points["run"]["one_token"] is None
    table = (out / "flips_accuracy.md").read_text()
    # sorted by the worst layer: the eval file's model (0.50%), the card's (0.60%), the study's (3.30%)
    assert table.index("| run |") < table.index("| local |") < table.index("| before (study) |")
    assert "| local | 0.60 / 0.40 | 0.60% | 84.8% | 1.75x | - |" in table


def test_points_on_top_of_each_other_share_one_annotation():
    points = [flips_accuracy.Point(name, [0.0063], acc) for name, acc in (("A: x", 0.85), ("B: y", 0.851))]
    points.append(flips_accuracy.Point("C", [0.03], 0.80))
    notes = flips_accuracy._annotations(points, lambda p: 100 * p.accuracy)
    assert [n for _, _, n in notes] == ["A, B", "C"]


def test_a_source_that_is_no_model_nor_evaluation_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="neither a model folder nor an eval.json"):
        flips_accuracy.main([str(tmp_path / "nothing"), "--out", str(tmp_path)])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no card with an evaluation"):
        flips_accuracy.main([str(tmp_path / "empty"), "--out", str(tmp_path)])
