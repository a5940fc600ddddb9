"""The tone rule (hints/tone.py): a paragraph's own threshold, the document gate that keeps a
neutral document's few confident paragraphs quiet while an opinion piece shows its tone, and the
higher threshold of a short text."""

from __future__ import annotations

import dataclasses
import math

from vq_lsp.hints import tone
from vq_lsp.hints.selection import shown_tone
from vq_lsp.settings import DiagnosticSettings


def block(positive: float, words: int = 80, tokens: int = 100) -> tone.Block:
    return tone.Block({"negative": 1.0 - positive, "positive": positive}, words, tokens)


GATED = DiagnosticSettings(sentiment_threshold=0.75, tone_gate=0.6, tone_min_words=12)
UNGATED = dataclasses.replace(GATED, tone_gate=0.0)


def test_joint_score_is_the_token_weighted_log_odds_mean():
    got = tone.document_scores([block(0.9, tokens=30), block(0.4, tokens=10)])
    log_odds = (30 * math.log(0.9 / 0.1) + 10 * math.log(0.4 / 0.6)) / 40
    assert math.isclose(got["positive"], 1 / (1 + math.exp(-log_odds)), rel_tol=1e-9)
    assert tone.document_scores([]) is None


def test_a_neutral_document_shows_no_tone_even_on_its_confident_paragraph():
    doc = [block(0.95), *[block(p) for p in (0.5, 0.45, 0.55, 0.5) * 2]]
    assert tone.shown(doc, UNGATED)[0] == ("positive", 0.95)  # the paragraph alone passes its threshold
    assert tone.shown(doc, GATED) == [None] * 9


def test_an_opinion_piece_shows_every_paragraph_that_passes():
    doc = [block(0.95), block(0.85), block(0.6), block(0.1, words=5)]
    assert tone.shown(doc, GATED) == [("positive", 0.95), ("positive", 0.85), None, None]


def test_a_single_paragraph_is_judged_by_its_threshold_alone():
    assert tone.shown([block(0.8)], GATED) == [("positive", 0.8)]
    assert tone.shown([block(0.2)], GATED) == [("negative", 0.8)]
    assert tone.shown([block(0.7)], GATED) == [None]
    assert shown_tone({"negative": 0.1, "positive": 0.9}, 60, GATED) == ("positive", 0.9)


def test_a_short_text_shows_a_tone_only_above_the_short_threshold():
    """Fewer than 60 words in all its tone blocks: a sentence, a note, a commit message."""
    assert tone.shown([block(0.9, words=59)], GATED) == [None]
    assert tone.shown([block(0.96, words=59)], GATED) == [("positive", 0.96)]
    assert tone.shown([block(0.04, words=20)], GATED) == [("negative", 0.96)]
    two_lines = [block(0.9, words=30), block(0.9, words=30)]  # 60 words together: not short
    assert tone.shown(two_lines, GATED) == [("positive", 0.9)] * 2
    assert shown_tone({"negative": 0.1, "positive": 0.9}, 12, GATED) is None
    assert shown_tone({"negative": 0.01, "positive": 0.99}, 12, GATED) == ("positive", 0.99)
    assert shown_tone({"negative": 0.01, "positive": 0.99}, 11, GATED) is None  # under toneMinWords


def test_the_short_threshold_is_a_floor_and_zero_turns_it_off():
    off = dataclasses.replace(GATED, tone_short_threshold=0.0)
    assert tone.shown([block(0.9, words=20)], off) == [("positive", 0.9)]
    strict = dataclasses.replace(GATED, sentiment_threshold=0.97)
    assert tone.shown([block(0.96, words=20)], strict) == [None]  # sentimentThreshold higher: it rules
    everything = dataclasses.replace(GATED, sentiment_threshold=0.0)
    assert tone.shown([block(0.6, words=20)], everything) == [("positive", 0.6)]


def test_a_zero_threshold_shows_every_tone_whatever_the_gate():
    doc = [block(0.95), block(0.5), block(0.45)]
    everything = dataclasses.replace(GATED, sentiment_threshold=0.0)
    assert all(s is not None for s in tone.shown(doc, everything))


def test_a_block_without_words_has_no_tone_whatever_the_minimum():
    every = dataclasses.replace(UNGATED, sentiment_threshold=0.0, tone_min_words=0)
    assert tone.shown([block(0.9, words=0), block(0.9, words=1)], every) == [None, ("positive", 0.9)]
    assert shown_tone({"negative": 0.0, "positive": 1.0}, 0, every) is None


def test_a_rounded_certain_paragraph_does_not_swamp_the_document():
    """`vq-lsp score` rounds scores to 6 decimals: a 1.0 must weigh as a very sure block, not an infinite one."""
    doc = [block(1.0, tokens=20), *[block(0.3, tokens=60) for _ in range(6)]]
    joint = tone.document_scores(doc)
    assert math.isfinite(math.log(joint["positive"])) and joint["negative"] > 0.5


def test_a_document_of_opposite_tones_in_equal_measure_shows_none():
    """The price of the gate: a good day and a bad day of the same length read as no opinion overall."""
    doc = [block(0.9), block(0.1)]
    assert tone.shown(doc, UNGATED) == [("positive", 0.9), ("negative", 0.9)]
    assert tone.shown(doc, GATED) == [None, None]


def test_a_paragraph_of_an_opinion_piece_shows_only_the_documents_tone():
    """A paragraph that reads against its review (a plot summary, a concession) shows no tone."""
    doc = [block(0.95), block(0.9), block(0.2), block(0.85)]
    assert tone.shown(doc, UNGATED)[2] == ("negative", 0.8)  # no gate: every paragraph its own label
    assert tone.shown(doc, GATED) == [("positive", 0.95), ("positive", 0.9), None, ("positive", 0.85)]
    assert tone.document_tone(doc, GATED) == "positive" and tone.document_tone(doc, UNGATED) == ""
