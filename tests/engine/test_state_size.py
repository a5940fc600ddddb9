"""What an engine state holds: per slot, exactly the tensors the update reads and nothing that can
be recomputed cheaply (a changed key's vc, a layer's output: the embedding and the layers' code
outputs) and nothing the update does not read (s itself: codes decide a layer's output), in the
model's dtype; and room for at most SLACK times its rows."""

import pytest
import torch

import inference
from inference.engine import SLACK

from .helpers import tiny_model


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layout", inference.LAYOUTS)
def test_bytes_per_slot_follow_the_layout(dtype, layout):
    model = tiny_model(0, dtype=dtype, layout=layout)
    cfg = model.config
    L, d, h, K = cfg.num_hidden_layers, cfg.hidden_size, cfg.vq_heads, cfg.vq_codes
    doc = inference.IncrementalDocument(model, list(range(4, 100)))
    (win,) = doc.windows
    e = torch.empty((), dtype=dtype).element_size()
    floats = (
        L * (3 * d + h * K + h) + cfg.num_labels + 2
    )  # q|k|v, p and |s| bound per VQ head; class log-probs, surprise, key position
    floats += L * d if layout != "lean" else 0  # every layer's output ("auto" builds full)
    ints = L * h + 3 + 2  # codes, the three embedding rows on the device; token id and position on the host
    assert win.state_bytes() == (floats * e + ints * 8) * (win.cap + 1) + cfg.num_labels * e  # + the window total
    assert win.cap <= SLACK * len(win.order) + 1


def test_float32_state_is_half_of_float64_and_estimates_hold():
    sizes = {}
    for dtype in (torch.float64, torch.float32):
        model = tiny_model(1, dtype=dtype)
        doc = inference.IncrementalDocument(model, [4 + i % 90 for i in range(116)])
        sizes[dtype] = doc.state_bytes()
        est = inference.estimate_state_bytes(model, doc.n_tokens)
        assert 0.95 * sizes[dtype] <= est <= 1.05 * sizes[dtype]
    assert 0.5 <= sizes[torch.float32] / sizes[torch.float64] <= 0.56  # only the integer tables do not halve
