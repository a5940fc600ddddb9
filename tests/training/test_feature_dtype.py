"""Cached post-VQ features keep float16 where it holds them and go to bfloat16 where a residual
exceeds float16's range (a briefly trained student's can): no infinities reach the tail's training."""

from __future__ import annotations

import torch

from training import post_vq


def shard(x: torch.Tensor) -> post_vq.Features:
    x = x.to(post_vq.feature_dtype(x))
    n = x.shape[0]
    return post_vq.Features(x, torch.zeros(n, dtype=torch.int32), torch.tensor([0, n]), torch.tensor([1]))


def test_float16_where_it_holds_bfloat16_beyond_its_range():
    assert post_vq.feature_dtype(torch.full((3, 4), 60000.0)) == torch.float16
    assert post_vq.feature_dtype(torch.full((3, 4), -70000.0)) == torch.bfloat16
    assert post_vq.feature_dtype(torch.zeros(0, 4)) == torch.float16


def test_joined_shards_of_both_kinds_are_wide_and_finite():
    small, large = shard(torch.randn(5, 4)), shard(torch.randn(6, 4) * 1e6)
    assert (small.x.dtype, large.x.dtype) == (torch.float16, torch.bfloat16)
    joined = post_vq.join([small, large])
    assert joined.x.dtype == torch.bfloat16 and torch.isfinite(joined.x.float()).all()
    assert joined.x.shape == (11, 4) and joined.offsets.tolist() == [0, 5, 11]
    assert post_vq.join([small, small]).x.dtype == torch.float16
