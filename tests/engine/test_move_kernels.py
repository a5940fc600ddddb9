"""The block-diagonal move of the code projections: the same sums as the flat product it replaces,
and the flat product still exact where an attention head spans several VQ heads."""

from __future__ import annotations

import random

import pytest
import torch

from inference.engine import rows

from .helpers import tiny_model
from .test_exactness import _run


@pytest.mark.parametrize("vq_heads", [1, 2, 4])
def test_block_diagonal_move_equals_the_flat_product(vq_heads):
    model = tiny_model(vq_heads=vq_heads)  # four attention heads of 8 dims, float64
    consts, cfg = model.consts, model.config
    H, d, m, a = cfg.num_attention_heads, cfg.hidden_size, 3, 7
    g = torch.Generator().manual_seed(vq_heads)
    values = torch.randn(m, d, generator=g, dtype=torch.float64)
    weights = torch.randn(a, H * m, generator=g, dtype=torch.float64)
    sums = torch.randn(a, consts.sum_width, generator=g, dtype=torch.float64)
    flat = sums + weights @ ((values * consts.head_mask).view(H * m, d) @ consts.sum_map[1])
    by_head = values.view(m, H, -1).transpose(0, 1)
    moved = sums.clone()
    rows.move_projections(consts, 1, moved[:, : consts.proj_width].view(a, vq_heads, -1), weights, by_head)
    assert torch.allclose(moved, flat, rtol=0, atol=1e-12)
    assert torch.equal(moved[:, consts.proj_width :], sums[:, consts.proj_width :])  # the bounds are not touched
    norms = rows.key_norms(cfg, (values * consts.head_mask).view(H * m, d))
    assert torch.allclose(rows.head_key_norms(consts, by_head), norms, rtol=0, atol=1e-12)


def test_an_attention_head_across_vq_heads_moves_by_the_flat_product_and_stays_exact():
    model = tiny_model(2, num_attention_heads=2, vq_heads=4)
    assert model.consts.head_vq is None  # each attention head spans two VQ heads
    rng = random.Random(2)
    kinds = ["insert", "delete", "replace", "storm", "multi"]
    edits = [(rng.choice(kinds), rng.random(), rng.randint(1, 4), rng.randrange(2**31)) for _ in range(60)]
    _, stats = _run(model, edits)
    assert stats["edits"] >= 60
