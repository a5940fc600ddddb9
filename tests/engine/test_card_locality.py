"""Locality is a property of the model card: a bundled model flips no more codes than its card says.

The engine's saving after an edit comes from codes that do not change; the card records, per
layer, the share of later positions whose code flips after a one-token edit of held-out text
(`vq-train evaluate`). Every model folder shipped in the package is measured again exactly as its
card was (same held-out text, sequences, length and seed, one thread), so a model replaced without
re-evaluating it, or an engine or quantiser change that moves code choices, fails here. About 5
seconds per model with the full data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import inference
from training.evaluate import VALID_TOKENS, edit_sequences, flip_report
from training.teacher import load_or_collect_tokens
from training.tokenizer import load_tokenizer

PACKAGE = Path(inference.__file__).resolve().parent
BUNDLED = sorted(p.parent for p in PACKAGE.glob("*/card.json") if (p.parent / "model.safetensors").is_file())
# one flipped position per layer in the card's 8 x 1,023 later positions is about 1.3e-4: a
# different BLAS summation order may move a code that sits on a cell boundary, nothing more
SLACK = 5e-4


def test_the_package_bundles_a_model_with_a_card():
    assert inference.DEFAULT_MODEL_DIR.resolve() in BUNDLED


@pytest.mark.parametrize("folder", BUNDLED, ids=lambda p: p.name)
def test_bundled_model_flips_no_more_than_its_card_says(folder, full_data_dir):
    torch.set_num_threads(1)
    net, card = inference.load_model_folder(folder)
    recorded = (card.get("evaluation") or {}).get("single_token_edits")
    assert recorded, f"{folder.name}: its card records no flip rates (vq-train evaluate's single_token_edits)"
    seed = recorded.get("seed", 0)  # evaluate's --seed default; cards written before it was recorded used it
    valid = load_or_collect_tokens(
        load_tokenizer(folder / "tokenizer.json"), full_data_dir, "valid", VALID_TOKENS, None, seed
    )
    ids = edit_sequences(valid, recorded["sequences"], recorded["tokens"], seed)
    measured = flip_report(net, ids, seed)["flip_rate_per_layer"]
    for layer, (now, said) in enumerate(zip(measured, recorded["flip_rate_per_layer"], strict=True)):
        assert now <= said + SLACK, f"{folder.name} layer {layer}: {now:.4%} of codes flip, its card says {said:.4%}"
