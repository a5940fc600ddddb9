"""Multiply-accumulate accounting: what an update cost, next to what a dense pass would cost.

Both sides count the same operations the same way, so their ratio is the speedup in
arithmetic. Counted: the q/k/v and output projections, the FFN, attention over causal
(query, key) pairs only (q.k and the weighted sum of v, d each), the VQ distance work
(64 codes x d per quantized row, or the per-key code projections of the delta path) and the
two heads (LM over the vocabulary, classification). LayerNorms, GELU, embedding lookups and
argmins are not multiply-accumulates and are left out on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import VQOPTConfig


def causal_pairs(n: int) -> int:
    """(query, key) pairs with pos_key <= pos_query among n rows at distinct positions."""
    return n * (n + 1) // 2


def row_macs(cfg: VQOPTConfig) -> int:
    """Per-row work of one layer outside attention: q, k, v, out projections and the FFN."""
    return 3 * cfg.hidden_size**2 + finish_row_macs(cfg)


def vq_row_macs(cfg: VQOPTConfig) -> int:
    """Distances of one row's s to every code of every VQ head: K x d."""
    return cfg.vq_codes * cfg.hidden_size if cfg.vq else 0


def head_row_macs(cfg: VQOPTConfig) -> int:
    """LM head (for surprise) plus classification head, per row."""
    return cfg.hidden_size * (cfg.vocab_size + cfg.num_labels)


def finish_row_macs(cfg: VQOPTConfig) -> int:
    """A layer's output projection and FFN, per row: what a row's layer output costs given its code."""
    return cfg.hidden_size * cfg.hidden_size + 2 * cfg.hidden_size * cfg.ffn_dim


def dense_macs(cfg: VQOPTConfig, n: int) -> int:
    """A dense forward pass over n rows (BOS included)."""
    per_layer = n * (row_macs(cfg) + vq_row_macs(cfg)) + 2 * causal_pairs(n) * cfg.hidden_size
    return cfg.num_hidden_layers * per_layer + n * head_row_macs(cfg)


def speedup(dense: int, incremental: int) -> float:
    """How many times fewer MACs the incremental work took than dense passes over the same texts."""
    return dense / max(1, incremental)


@dataclass
class Cost:
    """What one update cost. `dense_macs` is a dense pass over the windows the update touched."""

    incremental_macs: int = 0
    dense_macs: int = 0
    dirty_per_layer: list[int] = field(default_factory=list)  # rows recomputed in each layer
    relabelled: int = 0  # tokens that got a new position (each one made dirty)
    full_respreads: int = 0  # relabellings that had to re-spread a whole window
    near_ties: int = 0  # rows recomputed in full because two codes were nearly tied
    whole_layers: int = 0  # layers that recomputed every affected row in full (cheaper than moving them)
    seconds: float = 0.0

    @property
    def speedup(self) -> float:
        return speedup(self.dense_macs, self.incremental_macs)

    def add(self, other: Cost) -> None:
        self.incremental_macs += other.incremental_macs
        self.dense_macs += other.dense_macs
        if len(self.dirty_per_layer) < len(other.dirty_per_layer):
            self.dirty_per_layer += [0] * (len(other.dirty_per_layer) - len(self.dirty_per_layer))
        for i, n in enumerate(other.dirty_per_layer):
            self.dirty_per_layer[i] += n
        self.relabelled += other.relabelled
        self.full_respreads += other.full_respreads
        self.near_ties += other.near_ties
        self.whole_layers += other.whole_layers
        self.seconds += other.seconds

    def as_dict(self) -> dict:
        return {
            "incremental_macs": self.incremental_macs,
            "dense_macs": self.dense_macs,
            "speedup": self.speedup,
            "dirty_per_layer": list(self.dirty_per_layer),
            "relabelled": self.relabelled,
            "full_respreads": self.full_respreads,
            "near_ties": self.near_ties,
            "whole_layers": self.whole_layers,
            "seconds": self.seconds,
        }
