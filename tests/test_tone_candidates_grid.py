"""benchmarks/tone_candidates.py's grid: the first point meets the limits and shows tone on the most
reviews; a lower threshold that lets a neutral paragraph through is ranked after it."""

from __future__ import annotations

from benchmarks import tone_candidates as tc
from vq_lsp.hints import tone


def scored(set_name: str, label: str | None, probs: list[float], narration: bool = True, words: int = 80) -> tc.Scored:
    """A document of one-label paragraphs, each `p` sure of "positive", of `words` words and as many tokens."""
    blocks = tuple(tone.Block({"negative": 1 - p, "positive": p}, words, words) for p in probs)
    doc = tc.Doc("", "plain", set_name, label)
    return tc.Scored(doc, blocks, (narration,) * len(blocks), "positive", words * len(blocks), 0.0, 0)


def test_the_grid_ranks_the_most_reviews_within_the_limits_first():
    # a neutral technical document whose paragraphs read 0.62: shown at a threshold up to 0.62
    neutral = [scored("technical", None, [0.62] * 10)]
    sets = {
        "technical": neutral,
        "encyclopedic": [scored("encyclopedic", None, [0.5] * 10)],
        "narration": [scored("narration", None, [0.5] * 10)],
        # one review at 0.9, one at 0.66: a threshold above 0.66 shows one review, at most 0.66 both
        "reviews": [scored("reviews", "positive", [0.9]), scored("reviews", "positive", [0.66])],
    }
    points = tc.grid(sets)
    best = points[0]
    assert best.meets_limits and best.reviews_with_tone == 1.0
    assert 0.62 < best.threshold <= 0.66 and best.technical == 0.0
    low = next(p for p in points if p.threshold == 0.6 and p.gate == 0.6)
    assert low.technical == 1.0 and not low.meets_limits
    assert points.index(low) > points.index(best)
    assert all(p.gate <= p.threshold for p in points)


def test_the_short_grid_shows_a_sentences_tone_only_above_the_short_threshold():
    sentences = [scored("short", "positive", [p], words=20) for p in (0.92, 0.96, 0.99)]
    sentences.append(scored("short", "negative", [0.94], words=20))  # a sentence that reads against its review
    sets = {"short": sentences, "reviews": [scored("reviews", "positive", [0.9])]}
    rows = {p["short_threshold"]: p for p in tc.short_grid(sets)}
    assert rows[0.0]["short_shown"] == 1.0 and rows[0.0]["short_right"] == 3 / 4
    assert rows[0.93]["short_shown"] == 3 / 4 and rows[0.93]["short_right"] == 2 / 3
    assert rows[0.95]["short_shown"] == 2 / 4 and rows[0.95]["short_right"] == 1.0
    assert all(p["reviews_with_tone"] == 1.0 for p in rows.values())  # 80 words: not a short text
    assert [p["short_threshold"] for p in rows.values() if p["default"]] == [0.95]


def test_a_candidate_model_is_named_in_its_report_and_results_file():
    args = tc.parse(["--part", "test", "--model", "runs/candidate", "--name", "tone_candidates_test_candidate"])
    assert args.model == "runs/candidate" and args.name == "tone_candidates_test_candidate"
    results = {
        "command": "c",
        "hardware": "h",
        "part": "test",
        "model": args.model,
        "figures": [],
        "grid": [],
        "costs": {},
    }
    assert "Model: `runs/candidate`." in tc.report(results)
    assert tc.parse(["--part", "test"]).model is None  # the bundled model
