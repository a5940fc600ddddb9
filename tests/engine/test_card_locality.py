"""Locality is a property of the model card: a bundled model flips no more codes than its card says.

The engine's saving after an edit comes from codes that do not change; the card records, per
layer, the share of later positions whose code flips after a one-token edit of held-out text
(`vq-train evaluate`). Measuring it again on the same held-out sequences must not find more.
"""

from __future__ import annotations

import pytest

import inference


@pytest.mark.slow
def test_the_bundled_model_flips_no_more_than_its_card_says(full_data_dir, tmp_path):
    from training.evaluate import edit_sequences, flip_report
    from training.teacher import load_or_collect_tokens
    from training.tokenizer import load_tokenizer

    model = inference.load_model()
    card = model.card["evaluation"]["single_token_edits"]
    tok = load_tokenizer(model.path / "tokenizer.json")
    valid = load_or_collect_tokens(tok, full_data_dir, "valid", 200_000, tmp_path / "tokens_valid.pt", seed=0)
    ids = edit_sequences(valid, card["sequences"], card["tokens"], seed=0)
    measured = flip_report(model.net, ids, seed=0)["flip_rate_per_layer"]
    assert len(measured) == len(card["flip_rate_per_layer"])
    for layer, (now, said) in enumerate(zip(measured, card["flip_rate_per_layer"])):
        assert now <= said * 1.05 + 1e-3, f"layer {layer}: {now:.4f} of codes flip, the card says {said:.4f}"
