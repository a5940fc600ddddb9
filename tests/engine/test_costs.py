"""The MAC formulas against a count done by hand on a one-layer, d=8 model."""

import pytest
import torch

import inference
from inference import Splice
from inference.costs import dense_macs


def _model(layout: str = "full"):
    cfg = inference.VQOPTConfig(
        vocab_size=5,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=8,
        max_position_embeddings=8,
        position_pool=800,
        position_repeat=100,
        window_tokens=8,
        vq_heads=2,
        vq_codes=2,
        attention_scale=0.5,
    )
    torch.manual_seed(0)
    net = inference.VQOPT(cfg)
    with torch.no_grad():  # code 0 at the origin, code 1 far away: nothing can flip
        net.layers[0].vq.codebook.zero_()
        net.layers[0].vq.codebook[:, 1] = 1e3
    return inference.LoadedModel.from_net(net, layout=layout)


def test_dense_macs_by_hand():
    cfg = _model().config
    n, d, f, K, V = 3, 8, 8, 2, 5
    per_row = 3 * d * d + d * d + 2 * d * f  # q, k, v, out projections and the FFN
    attention = 2 * d * (1 + 2 + 3)  # causal pairs: row i sees i + 1 keys; q.k and w v
    vq = n * K * d
    heads = n * d * (V + 2)
    assert dense_macs(cfg, n) == n * per_row + attention + vq + heads == 1464


LAYOUTS = pytest.mark.parametrize("layout, recomputed", [("full", 0), ("lean", 1)])


@LAYOUTS
def test_replace_last_token_by_hand(layout, recomputed):
    doc = inference.IncrementalDocument(_model(layout), [1, 2])
    cost = doc.apply([Splice(1, 2, [3])]).cost
    d, f, K, V = 8, 8, 2, 5
    expected = (
        3 * d * d  # q, k, v of the dirty row; nothing is moved: the only affected row is the dirty one
        + 3 * 2 * d  # its full attention row over BOS, token 0 and itself
        + K * d  # its code distances
        + d * d
        + 2 * d * f  # out projection and FFN
        + d * (V + 2)  # LM and classification heads
        + d * (V + 2)  # token 0's heads: the new token's surprise
        + recomputed * (d * d + 2 * d * f)
    )  # lean: token 0's output from its code (out projection, FFN)
    assert cost.incremental_macs == expected == {"full": 560, "lean": 752}[layout]
    assert cost.dirty_per_layer == [1]
    assert cost.dense_macs == 1464


@LAYOUTS
def test_replace_first_token_by_hand(layout, recomputed):
    doc = inference.IncrementalDocument(_model(layout), [1, 2])
    cost = doc.apply([Splice(0, 1, [4])]).cost
    d, f, K, V, G = 8, 8, 2, 5, 2
    expected = (
        3 * d * d
        + 2 * d * K  # dirty row: q, k, v; vc of its new and its old key
        + 2 * (2 * d + G * K)  # the clean later row: remove the old key, add the new one (s and proj)
        + 2 * 2 * d
        + K * d  # the dirty row's full attention (BOS and itself) and its distances
        + d * d
        + 2 * d * f  # out projection and FFN of the dirty row (the clean one cannot flip)
        + d * (V + 2)
        + d * (V + 2)  # BOS's heads: the new token's surprise
        + recomputed * (d * d + 2 * d * f)
    )  # lean: BOS's output from its code
    assert cost.incremental_macs == expected == {"full": 616, "lean": 808}[layout]
    assert doc.verify().codes_equal
