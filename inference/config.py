"""The one config dataclass: every shape of a VQ-OPT model.

Field names follow Hugging Face's `OPTConfig` so that OPT checkpoints map onto it directly;
the remaining fields describe what the paper adds (VQ heads, a large position pool, a fixed
attention scale). The config round-trips to `config.json`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

ATTENTION_MODES = ("softmax", "gelu")


@dataclass(frozen=True)
class VQOPTConfig:
    """Shapes and switches of a VQ-OPT model (OPT names first, then the paper's additions)."""

    vocab_size: int = 50272
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    ffn_dim: int = 3072
    max_position_embeddings: int = 2048  # OPT's own position count (before conversion)
    pad_token_id: int = 1
    bos_token_id: int = 2
    eos_token_id: int = 2
    enable_bias: bool = True
    layer_norm_eps: float = 1e-5

    vq_heads: int = 2  # h in {1, 2, 4}: the attention sum is split in h chunks, each quantized
    vq_codes: int = 64  # codes per VQ head, as in the paper
    position_pool: int = 204800  # P: positions are integers in [0, P); BOS sits at 0
    position_repeat: int = 100  # r: embedding(p) = coarse[p // r + 2] + fine[p % r]
    window_tokens: int = 2048  # most tokens (BOS included) one window state holds
    attention: str = "gelu"  # "softmax" (plain OPT) or "gelu" (no normalisation)
    attention_scale: float = 1.0 / 2048  # fixed c in s_n = c * sum_i gelu(q_n . k_i) v_i
    vq: bool = True  # quantize attention sums (VQ-OPT); False for a dense OPT
    num_labels: int = 2
    labels: tuple[str, ...] = field(default=("negative", "positive"))

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be divisible by num_attention_heads")
        if self.vq_heads not in (1, 2, 4) or self.hidden_size % self.vq_heads:
            raise ValueError("vq_heads must be 1, 2 or 4 and divide hidden_size")
        if self.attention not in ATTENTION_MODES:
            raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {self.attention!r}")
        if self.position_repeat < 1 or self.position_pool % self.position_repeat:
            raise ValueError("position_repeat must be >= 1 and divide position_pool")
        if self.window_tokens < 2 or self.window_tokens > self.position_pool:
            raise ValueError("window_tokens must be in [2, position_pool]")
        if len(self.labels) != self.num_labels:
            raise ValueError("labels must have num_labels entries")
        object.__setattr__(self, "labels", tuple(self.labels))

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def vq_dim(self) -> int:
        """Width of one VQ head's chunk of the attention sum."""
        return self.hidden_size // self.vq_heads

    @property
    def coarse_positions(self) -> int:
        """Rows of the coarse positional table (OPT's offset of 2 included)."""
        return self.position_pool // self.position_repeat + 2

    def replace(self, **changes) -> "VQOPTConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["labels"] = list(self.labels)
        d["model_type"] = "vq-opt"
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "VQOPTConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names - {"model_type"}
        if unknown:
            raise ValueError(f"unknown config fields: {sorted(unknown)}")
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls, text: str) -> "VQOPTConfig":
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "VQOPTConfig":
        return cls.from_json(Path(path).read_text())
