"""benchmarks/paired_tone.py: a candidate's differences from the reference, with paired intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks import paired_tone
from benchmarks.paired_tone import SETS_NEUTRAL, Outcome, compare

DATA = Path(__file__).parent / "data"


def outcome(correct: list[bool], shown: list[bool], confidence: list[float] | None = None) -> Outcome:
    conf = np.where(shown, 0.9, 0.6) if confidence is None else np.array(confidence)
    return Outcome(np.array(correct), np.array(shown), conf)


def test_the_same_reading_differs_by_nothing():
    rng = np.random.default_rng(0)
    ref = outcome(list(rng.random(400) < 0.85), list(rng.random(400) < 0.6))
    for name in paired_tone.FIGURES:
        fig = compare(ref, ref, name, "reviews, original", rng, 200)
        assert (fig.diff, fig.low, fig.high, fig.worse) == (0.0, 0.0, 0.0, False)


def test_a_clear_loss_is_worse_and_a_small_one_is_not():
    n = 1000
    ref = outcome([i % 10 != 0 for i in range(n)], [True] * n)  # 90% right
    clear = outcome([i % 10 > 1 for i in range(n)], [True] * n)  # 80%: loses 100 reviews, wins none
    small = outcome([i % 10 != 0 and i % 500 != 1 for i in range(n)], [True] * n)  # loses 2 reviews
    rng = np.random.default_rng(0)
    loss = compare(ref, clear, "accuracy", "reviews, original", rng, 500)
    assert loss.worse and loss.high < 0 and abs(loss.diff + 0.1) < 1e-9
    slight = compare(ref, small, "accuracy", "reviews, original", rng, 500)
    assert not slight.worse and slight.diff < 0 <= slight.high


def test_more_hints_on_neutral_prose_is_worse():
    n = 1000
    ref = outcome([False] * n, [i % 10 == 0 for i in range(n)])  # hints on 10%
    louder = outcome([False] * n, [i % 10 < 3 for i in range(n)])  # on 30%
    rng = np.random.default_rng(0)
    assert compare(ref, louder, "shown_share", SETS_NEUTRAL, rng, 500).worse
    assert not compare(louder, ref, "shown_share", SETS_NEUTRAL, rng, 500).worse


def test_a_more_confident_model_is_judged_at_the_reference_share_of_hints():
    """The candidate shows twice the hints (its confidence sits higher) and so more wrong ones,
    but ranks them as well: at the reference's share its precision is the reference's."""
    n = 1000
    correct = [i % 10 != 0 for i in range(n)]  # 90% right
    rank = [0.5 + 0.4 * (i % 10 != 0) + 0.0001 * (i % 100) for i in range(n)]  # right hints first
    ref = outcome(correct, [r >= 0.9 and i % 2 == 0 for i, r in enumerate(rank)], rank)  # half the right ones
    cand = outcome(correct, [True] * n, rank)  # every text
    rng = np.random.default_rng(0)
    assert compare(ref, cand, "shown_precision", "reviews, original", rng, 300).worse
    matched = compare(ref, cand, "precision_at_reference_share", "reviews, original", rng, 300)
    assert matched.value == 1.0 and matched.diff == 0.0 and not matched.worse


def test_a_model_against_itself_end_to_end(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["bundled", "bundled", "--label", "a", "b", "--reviews", "12", "--skip", "0", "--neutral", "0"]
    argv += ["--resamples", "50", "--data", str(DATA), "--out", str(out), "--name", "t", "--cache", str(cache)]
    assert paired_tone.main(argv) == 0
    assert len(list(cache.glob("*.npz"))) == 1  # one model's weights, read once
    results = json.loads((out / "t.json").read_text())
    styles = ("original", "lowercase", "respaced", "lower_respaced", "first_sentence", "truncated")
    assert results["texts"] == {f"reviews, {s}": 12 for s in styles}
    for per_figure in results["figures"].values():
        for cells in per_figure.values():
            assert cells["b"]["diff"] in (0.0, None) or np.isnan(cells["b"]["diff"])
            assert not cells["b"]["worse"]
    assert "| set (texts) | figure | a | b |" in (out / "t.md").read_text()
    first = (out / "t.json").read_text()
    assert paired_tone.main(argv) == 0  # from the cache
    assert (out / "t.json").read_text() == first


def test_a_candidates_intervals_do_not_depend_on_the_other_candidates(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    n, readings = 300, {}
    for name in ("ref", "a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        readings[name] = {"reviews, original": outcome(list(rng.random(n) < 0.8), list(rng.random(n) < 0.6))}
    monkeypatch.setattr(paired_tone, "texts", lambda args: {"reviews, original": [("text", 1)] * n})
    monkeypatch.setattr(paired_tone, "cached_read", lambda folder, sets, cache: readings[folder.name])

    def figures_of_a(*names: str) -> dict:
        models = [str(tmp_path / m) for m in names]
        args = paired_tone.parse([*models, "--resamples", "200"])
        return {fig: cells["a"] for fig, cells in paired_tone.run(args)["figures"]["reviews, original"].items()}

    assert figures_of_a("ref", "b", "a") == figures_of_a("ref", "a")
