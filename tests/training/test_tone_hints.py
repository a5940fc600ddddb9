"""The tone-hint figures of ``vq-train evaluate``: what a writer would see under the server's rule.

Each figure is checked on hand-made scores where the right answer is known, so a change to the
rule (threshold, word gate, which hints count as right) or to the calibration error fails here."""

from __future__ import annotations

import pytest
import torch

from training.reviews import NEUTRAL
from training.tone_hints import (
    DEFAULTS,
    expected_calibration_error,
    hint_figures,
    hint_report,
    scaled,
    word_count,
)
from vq_lsp.hints import markup
from vq_lsp.settings import DiagnosticSettings


def probs_of(positive: list[float]) -> torch.Tensor:
    p = torch.tensor(positive)
    return torch.stack([1 - p, p], -1)


def test_the_rule_is_the_servers_default():
    assert DEFAULTS.sentiment_threshold == DiagnosticSettings().sentiment_threshold == 0.7
    assert DEFAULTS.tone_min_words == DiagnosticSettings().tone_min_words == 12
    assert DEFAULTS.tone_short_threshold == DiagnosticSettings().tone_short_threshold == 0.95


def test_shown_share_and_precision_follow_threshold_and_word_gate():
    #            right+shown  wrong+shown  right,too short  right,below  exactly at threshold (shown, right)
    probs = probs_of([0.9, 0.8, 0.95, 0.6, 0.75])
    labels = torch.tensor([1, 0, 1, 1, 1])
    words = [70, 70, 11, 70, 60]
    f = hint_figures(probs, labels, words)
    assert f.n == 5
    assert f.shown_share == pytest.approx(3 / 5)  # the 11-word text and the 0.6 one get no hint
    assert f.shown_precision == pytest.approx(2 / 3)
    assert f.accuracy == pytest.approx(4 / 5)
    assert f.positive_rate == pytest.approx(1.0)
    assert f.mean_confidence == pytest.approx((0.9 + 0.8 + 0.95 + 0.6 + 0.75) / 5)


def test_a_short_text_needs_the_short_threshold():
    # fewer than 60 words: 0.9 hides, 0.96 shows; 60 words: 0.9 shows
    f = hint_figures(probs_of([0.9, 0.96, 0.9]), torch.tensor([1, 1, 1]), [20, 20, 60])
    assert f.shown_share == pytest.approx(2 / 3) and f.shown_precision == 1.0


def test_no_hint_shown_leaves_precision_undefined_not_zero():
    f = hint_figures(probs_of([0.6, 0.35]), torch.tensor([1, 0]), [40, 40])
    assert f.shown_share == 0 and f.shown_precision is None and f.accuracy == 1.0


def test_neutral_texts_have_no_accuracy_only_a_shown_share():
    f = hint_figures(probs_of([0.5, 0.9, 0.1, 0.65]), torch.full((4,), NEUTRAL), [70, 70, 70, 70])
    assert f.accuracy is None and f.shown_precision is None and f.ece is None
    assert f.shown_share == pytest.approx(2 / 4)  # 0.9 positive and 0.9 negative are hints on neutral text
    assert f.positive_rate == pytest.approx(2 / 4)


def test_expected_calibration_error_is_zero_when_confidence_matches_accuracy():
    # 10 texts at 0.8 confidence, 8 right: calibrated; 10 at 1.0 of which 5 right: off by 0.5.
    probs = probs_of([0.8] * 10)
    labels = torch.tensor([1] * 8 + [0] * 2)
    assert expected_calibration_error(probs, labels) == pytest.approx(0.0, abs=1e-6)
    over = probs_of([0.999] * 10)
    assert expected_calibration_error(over, torch.tensor([1] * 5 + [0] * 5)) == pytest.approx(0.499, abs=1e-4)
    mixed = torch.cat([probs, over])
    assert expected_calibration_error(mixed, torch.cat([labels, torch.tensor([1] * 5 + [0] * 5)])) == pytest.approx(
        0.2495, abs=1e-4
    )  # bins weighted by their share of texts


def test_word_count_is_the_servers_tone_gate_count():
    text = "The `cargo build` command (see https://doc.rust-lang.org) compiles it, doesn't it? Yes: 3 times."
    lay = markup.layout(text, markup.PLAIN)
    assert word_count(text) >= lay.tone[0][2] > 0
    plain = "Rust's ownership rules keep memory safe without a garbage collector, and they do so at compile time."
    assert word_count(plain) == markup.layout(plain, markup.PLAIN).tone[0][2] == 17


def test_hint_report_names_every_set_and_skips_empty_ones():
    sets = {"a": [("good " * 70, 1), ("bad " * 70, 0)], "empty": [], "neutral": [("plain words " * 35, NEUTRAL)]}
    scores = {"good " * 70: 0.9, "bad " * 70: 0.2, "plain words " * 35: 0.55}
    report = hint_report(lambda _name, texts: probs_of([scores[t] for t in texts]), sets)
    assert set(report) == {"a", "neutral", "rule"}
    assert report["a"]["shown_share"] == 1.0 and report["a"]["shown_precision"] == 1.0
    assert report["neutral"]["shown_share"] == 0.0 and report["neutral"]["accuracy"] is None
    assert "ece_before_calibration" not in report["a"]


def test_hint_report_recovers_the_calibration_error_before_a_folded_temperature():
    raw = probs_of([0.999] * 10)  # over-confident: 5 of 10 right
    labels = torch.tensor([1] * 5 + [0] * 5)
    folded = scaled(raw, 4.0)
    sets = {"a": [(f"text {i} " * 8, int(y)) for i, y in enumerate(labels.tolist())]}
    report = hint_report(lambda _name, texts: folded, sets, temperature=4.0)
    assert report["a"]["ece_before_calibration"] == pytest.approx(expected_calibration_error(raw, labels), abs=1e-5)
    assert report["a"]["ece"] < report["a"]["ece_before_calibration"]
