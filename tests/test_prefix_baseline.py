"""The prefix-KV baseline's twin reads the rows it cached: the continuation after a cached prefix
gives a full pass's logits, under the keyword the installed transformers uses, without a
deprecation warning."""

from __future__ import annotations

import warnings

import torch

import inference
from benchmarks.common import cached_call, softmax_twin


def test_a_cached_prefix_gives_the_full_pass_logits_without_a_deprecation_warning():
    from transformers import DynamicCache

    model = inference.load_model(device="cpu", dtype="float32")
    twin = softmax_twin(model.config, model.device, torch.float32)
    ids = torch.randint(4, model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        full = twin(input_ids=ids).logits
        cache = DynamicCache()
        cached_call(twin, ids[:, :25], cache)
        rest = cached_call(twin, ids[:, 25:], cache).logits
    assert cache.get_seq_length() == 40
    torch.testing.assert_close(rest, full[:, 25:], atol=1e-4, rtol=1e-4)
