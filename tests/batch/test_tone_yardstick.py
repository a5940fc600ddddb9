"""The tone yardstick benchmark runs end to end on a tiny sample and writes a well-formed report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import tone_yardstick  # noqa: E402

SETS = ["movie reviews (lowercased, tokenized)", "review sentences", "PEPs, whole documents (neutral), per paragraph"]
HEADER = (
    "| set | model | texts | paragraphs | accuracy | positive rate | tone hint shown on | shown hints that are right |"
)


def percent_or_dash(cell: str) -> float | None:
    if cell == "-":
        return None
    assert cell.endswith("%"), cell
    return float(cell[:-1]) / 100


def test_tiny_run_writes_a_table_of_shares(full_data_dir, tiny_model_dir, tmp_path, capsys):
    code = tone_yardstick.main(
        [
            "--model",
            str(tiny_model_dir),
            "--name",
            "tiny",
            "--model",
            str(tiny_model_dir),
            "--name",
            "tiny again",
            "--reviews",
            "2",
            "--sentences",
            "4",
            "--peps",
            "3",
            "--data",
            str(full_data_dir),
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    capsys.readouterr()
    results = json.loads((tmp_path / "tone_yardstick.json").read_text())
    assert [m["name"] for m in results["models"]] == ["tiny", "tiny again"]
    for model in results["models"]:
        assert [s["set"] for s in model["sets"]] == SETS
        assert [s["texts"] for s in model["sets"]] == [2, 4, 3]
        assert model["sets"][2]["units"] > 3  # a PEP's shares are of its paragraphs
        for s in model["sets"]:
            for key in ("accuracy", "positive_rate", "shown_share", "shown_right"):
                assert s[key] is None or 0.0 <= s[key] <= 1.0, (s["set"], key, s[key])
            assert (s["accuracy"] is None) == (s["set"] == SETS[2])  # neutral prose has no accuracy
            assert s["shown_share"] == 0.0 or s["set"] == SETS[2] or s["shown_right"] is not None
    assert results["models"][0]["sets"] == [
        dict(s, seconds=t["seconds"]) for s, t in zip(results["models"][1]["sets"], results["models"][0]["sets"])
    ]

    text = (tmp_path / "tone_yardstick.md").read_text()
    assert "Command: `python -m benchmarks.tone_yardstick --model" in text and "one CPU core" in text
    assert str(tiny_model_dir) not in text  # a model outside the repository is shown by its label
    lines = text.splitlines()
    start = lines.index(HEADER)
    rows = [line.strip("|").split(" | ") for line in lines[start + 2 :] if line.startswith("|")]
    assert [(r[0].strip(), r[1]) for r in rows] == [(s, m) for s in SETS for m in ("tiny", "tiny again")]
    for row in rows:
        assert int(row[2]) > 0
        assert row[3] == "-" if row[0].strip() != SETS[2] else int(row[3]) > 0
        for cell in row[4:]:
            share = percent_or_dash(cell.strip())
            assert share is None or 0.0 <= share <= 1.0, row
