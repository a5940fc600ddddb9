"""Tiny VQ models for engine tests: random weights, but codebooks seeded from real attention sums.

A purely random codebook sits far from every s, so every row picks the same code and nothing
ever flips, which would make the exactness tests pass for the wrong reason. Seeding each
layer's codes from that layer's own s vectors (earlier layers already quantized), as k-means
initialisation does, gives varied codes that flip under edits like a trained model's.
"""

from __future__ import annotations

import torch

import inference
from inference.positions import spread_positions


def tiny_config(**overrides) -> inference.VQOPTConfig:
    fields = dict(
        vocab_size=101,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        ffn_dim=64,
        max_position_embeddings=128,
        position_pool=12800,
        position_repeat=100,
        window_tokens=128,
        attention_scale=1 / 32,
        vq_heads=2,
        vq_codes=16,
    )
    fields.update(overrides)
    return inference.VQOPTConfig(**fields)


def seed_codebooks(net: inference.VQOPT, seed: int = 0, rows: int = 96) -> inference.VQOPT:
    """Set each layer's codes to attention sums observed on random tokens, layer by layer."""
    cfg = net.config
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (4, rows), generator=g)
    pos = spread_positions(rows, cfg.position_pool).expand(4, rows)
    with torch.no_grad():
        for i, layer in enumerate(net.layers):
            out = net(ids, pos, vq=[True] * i + [False] * (cfg.num_hidden_layers - i))
            s = out.pre_vq[i].reshape(-1, cfg.vq_heads, cfg.vq_dim)  # (N, h, w)
            pick = torch.randperm(s.shape[0], generator=g)[: cfg.vq_codes]
            layer.vq.codebook.copy_(s[pick].transpose(0, 1))
    return net


def tiny_model(
    seed: int = 0, tokenizer=None, dtype=torch.float64, sizing: str | None = None, layout: str = "lean", **overrides
) -> inference.LoadedModel:
    """A small random VQ-OPT; `sizing` forces how updates size their row sets (inference.engine.SIZINGS):
    the CPU default is "exact", and "bucketed", the CUDA path, is tested on the CPU through it;
    `layout`: what a state keeps (inference.LAYOUTS)."""
    torch.manual_seed(seed)
    net = seed_codebooks(inference.VQOPT(tiny_config(**overrides)), seed)
    model = inference.LoadedModel.from_net(net, tokenizer, device="cpu", dtype=dtype, layout=layout)
    if sizing is not None:
        model.use_sizing(sizing)
    return model
