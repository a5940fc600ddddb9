"""The engine's LM logits of a few rows (LayerConstants.lm_logits) are the model's tied LM head,
whatever form it takes for speed on this device: one row of logits per input row (pad rows
dropped), within rounding of VQOPT.lm_logits, and the surprise an update stores still matches a
dense pass."""

import random

import pytest
import torch

import inference
from inference import Splice

from .helpers import tiny_model


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 15, 16, 63, 64, 70])
def test_a_few_rows_logits_equal_the_models_head(dtype, rows):
    model = tiny_model(3, dtype=dtype)
    hidden = torch.randn(rows, model.config.hidden_size, dtype=dtype, generator=torch.Generator().manual_seed(rows))
    got = model.consts.lm_logits(hidden)
    want = model.net.lm_logits(hidden)
    assert got.shape == want.shape == (rows, model.config.vocab_size)
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    assert torch.allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_surprise_after_edits_matches_a_fresh_document(dtype):
    model = tiny_model(5, dtype=dtype, layout="full")
    rng = random.Random(1)
    ids = [rng.randrange(4, model.config.vocab_size) for _ in range(120)]
    doc = inference.IncrementalDocument(model, ids)
    for _ in range(12):  # edits whose changed rows reach the LM head in batches of varied sizes
        p = rng.randrange(len(ids))
        sp = Splice(p, p + 1, [rng.randrange(4, model.config.vocab_size)])
        doc.apply([sp])
        ids = inference.apply_splices(ids, [sp])
    fresh = inference.IncrementalDocument(model, ids)
    tol = 1e-9 if dtype == torch.float64 else 1e-3
    assert doc.surprise(0, len(ids)) == pytest.approx(fresh.surprise(0, len(ids)), abs=tol)
    assert doc.verify().codes_equal
