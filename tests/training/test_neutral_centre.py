"""calibrate --centre-neutral: one logit offset, folded into the head, centres paragraphs without an opinion."""

from __future__ import annotations

import copy

import torch

import inference
from inference.positions import spread_positions
from training.calibrate import centre_neutral, neutral_offset
from training.reviews import document_scores, encode_reviews
from training.tokenizer import load_tokenizer

NEUTRAL = [
    "The function returns a list of the keys in the order they were inserted into the map.",
    "Run the installer, then restart the editor so that the extension is loaded.",
    "The river rises in the northern hills and flows south for about two hundred kilometres.",
    "Each chapter ends with a short summary and a set of exercises.",
    "The committee meets on the first Tuesday of every month in the town hall.",
]
REVIEWS = [("A slow start, but the ending was wonderful and moving.", 1), ("Dull, long and badly acted.", 0)]


def logit_diff(probs: torch.Tensor) -> torch.Tensor:
    logits = probs.clamp(min=1e-12).log()
    return logits[:, 1] - logits[:, 0]


def test_the_offset_is_minus_the_median_lean():
    diffs = torch.tensor([0.1, 0.3, 0.5, 0.7, -0.2])
    probs = torch.softmax(torch.stack([torch.zeros(5), diffs], 1), -1)
    assert abs(neutral_offset(probs) + 0.3) < 1e-6


def test_folding_centres_the_paragraphs_and_moves_every_text_by_the_same_offset():
    torch.set_num_threads(1)
    net, _ = inference.load_model_folder(inference.DEFAULT_MODEL_DIR)
    tok = load_tokenizer(inference.DEFAULT_MODEL_DIR / "tokenizer.json")

    def spread(n: int):
        return spread_positions(n, net.config.position_pool)

    before = copy.deepcopy(net)
    centre = centre_neutral(net, tok, NEUTRAL, 512, spread, "five sentences")
    assert centre.paragraphs == 5 and centre.offset != 0
    neutral_after = logit_diff(document_scores(net, encode_reviews(tok, [(t, 0) for t in NEUTRAL], 512), spread))
    assert abs(float(neutral_after.median())) < 1e-4  # the middle paragraph now leans neither way
    assert centre.positive_rate_after == float((neutral_after > 1e-4).float().mean())
    examples = encode_reviews(tok, REVIEWS, 512)
    moved = logit_diff(document_scores(net, examples, spread)) - logit_diff(document_scores(before, examples, spread))
    torch.testing.assert_close(moved, torch.full((2,), centre.offset), atol=1e-4, rtol=0)
