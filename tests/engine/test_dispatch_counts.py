"""Per-edit dispatch counts: ops and host syncs grow with layers, not with length or windows.

Counted on the CPU with TorchDispatchMode (benchmarks.common.DispatchCounter), as the GPU
budget of an update is checked (each dispatched op is about one kernel launch, each sync a
round trip that stalls the device). Both sizings: "bucketed", the CUDA path (one read per pass),
and "exact", the CPU path (one read per layer, two when codes flipped: free on a CPU, where padded
rows are not)."""

import random

import pytest
import torch

import inference
from benchmarks.common import DispatchCounter
from inference import Splice

from .helpers import tiny_model

BLOCK = 50  # tokens per window: windows of a repeated block hold identical states
# graphed sizing dispatches a bucketed pass's ops when it captures; on a CPU its emulated replays
# dispatch them again with the copies, so its counts say nothing about a GPU's launches
COUNTED = ("bucketed", "exact")


def _count(doc, splices):
    with DispatchCounter() as c:
        doc.apply(splices)
    return c.ops, c.syncs


def _doc(model, blocks: int, seed: int = 0) -> inference.IncrementalDocument:
    rng = random.Random(seed)
    block = [rng.randrange(4, model.config.vocab_size) for _ in range(BLOCK)]
    doc = inference.IncrementalDocument(model, block * blocks)
    assert len(doc.windows) == blocks and all(w.token_ids() == block for w in doc.windows)
    return doc


def _sync_budget(model, passes: int, flips: bool = True) -> int:
    """Reads per edit: per pass (bucketed), or per layer (exact: the layer's flags, then, when codes
    flipped, those rows' near-tie counts), plus the one of the scores apply returns."""
    layers = model.config.num_hidden_layers
    if model.consts.sizing.reads_each_layer:
        return layers * (2 if flips else 1) + 1
    return passes + 1


@pytest.mark.parametrize("sizing", COUNTED)
def test_ops_and_syncs_do_not_grow_with_windows(sizing):
    model = tiny_model(11, window_tokens=64, sizing=sizing)
    counts = {}
    for blocks in (2, 4):
        doc = _doc(model, blocks)
        for where in (0, blocks - 1):  # the first window and the last
            ops, syncs = _count(doc, [Splice(where * BLOCK + 20, where * BLOCK + 21, [7])])
            counts[blocks, where] = ops
            assert syncs <= _sync_budget(model, passes=3)
        assert doc.verify().codes_equal
    assert len(set(counts.values())) == 1, counts


def _no_flip_model(sizing: str):
    """Code 0 at the origin, every other code far away: no code ever flips, so the dirty set is
    exactly the edited rows and an update is one pass."""
    model = tiny_model(12, window_tokens=64)
    with torch.no_grad():
        for layer in model.net.layers:
            layer.vq.codebook.zero_()
            layer.vq.codebook[:, 1:] = 1e3
    model = inference.LoadedModel.from_net(model.net, sizing=sizing)
    return model


@pytest.mark.parametrize("sizing", COUNTED)
def test_one_pass_and_the_same_ops_at_every_length_and_window_count(sizing):
    model = _no_flip_model(sizing)
    counts = set()
    for n in (12, 30, 60, 200):
        rng = random.Random(n)
        doc = inference.IncrementalDocument(model, [rng.randrange(4, 101) for _ in range(n)])
        for p in (0, n // 2):  # (near a window's end fewer rows follow: smaller buckets, fewer ops)
            ops, syncs = _count(doc, [Splice(p, p + 1, [rng.randrange(4, 101)])])
            counts.add(ops)
            assert syncs == _sync_budget(model, passes=1, flips=False)
        assert doc.verify().codes_equal
    assert len(counts) == 1, counts
