"""A layer trained with fewer codes than the config's K keeps the rest parked far away
(``vq-train finetune --refit-codes``): the engine stays exact on such a model, and its tie guard,
whose code term is the largest |c|^2, reads only the codes a sum can pick."""

from __future__ import annotations

import random

import pytest
import torch

import inference
from inference import Splice, kernels

from .helpers import seed_codebooks, tiny_config

LIVE = 6  # of tiny_config's 16 codes per VQ head


def parked_model(dtype) -> inference.LoadedModel:
    torch.manual_seed(3)
    net = seed_codebooks(inference.VQOPT(tiny_config()), 3)
    with torch.no_grad():
        net.layers[0].vq.codebook[:, LIVE:] = kernels.PARKED_CODE
    return inference.LoadedModel.from_net(net, device="cpu", dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_model_with_parked_codes_stays_exact_and_never_picks_one(dtype):
    model = parked_model(dtype)
    rng = random.Random(0)
    doc = inference.IncrementalDocument(model, [rng.randrange(101) for _ in range(90)])
    near_ties = 0
    for _ in range(60):
        at = rng.randrange(doc.n_tokens)
        cost = doc.apply([Splice(at, at + rng.randrange(2), [rng.randrange(101)])]).cost
        near_ties += cost.near_ties
        check = doc.verify()
        assert check.codes_equal, check
    (win,) = doc.windows
    ids, pos = (torch.from_numpy(a[win.order])[None] for a in (win.ids_host, win.pos_host))
    with torch.no_grad():
        codes = model.net(ids, pos, vq=True).codes[0]
    assert codes.max() < LIVE and len(codes.unique()) > 1
    book = model.net.layers[0].vq.codebook
    live_max = book[:, :LIVE].pow(2).sum(-1).max(-1).values
    torch.testing.assert_close(model.consts.code_sq_max[0], live_max)  # the guard's code term: live codes only
    assert near_ties < 60  # a guard scaled by a parked code's 1e8 per coordinate would tie every row
