"""The one config dataclass: every shape of a VQ-OPT model.

Field names follow Hugging Face's `OPTConfig` so that OPT checkpoints map onto it directly;
the remaining fields describe what the paper adds (VQ heads, a large position pool, a fixed
attention scale). The config round-trips to `config.json`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

ATTENTION_MODES = ("softmax", "gelu")
MODEL_TYPE = "vq-opt"


class ConfigError(ValueError):
    """A config value of the wrong type or out of range; `field` names it (None: the config as a whole)."""

    def __init__(self, field_name: str | None, message: str) -> None:
        super().__init__(f"field {field_name!r}: {message}" if field_name else message)
        self.field = field_name


def _describe(value) -> str:
    kind = {
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        list: "a list",
        dict: "an object",
        float: "a float",
    }.get(type(value), type(value).__name__)
    if isinstance(value, (str, bool, type(None), int, float)):
        return f"{json.dumps(value)} ({kind})"
    return kind


def _as_int(name: str, value, lo: int) -> int:
    """JSON has one number type: 256.0 is refused here rather than truncated to a shape silently."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(name, f"must be an integer >= {lo}, got {_describe(value)}")
    if value < lo:
        raise ConfigError(name, f"must be an integer >= {lo}, got {value}")
    return int(value)


def _as_float(name: str, value, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number, got {_describe(value)}")
    if positive and value <= 0:
        raise ConfigError(name, f"must be above 0, got {value}")
    return float(value)


def _as_bool(name: str, value) -> bool:
    """Only true and false: the string "false" would otherwise be truthy."""
    if not isinstance(value, bool):
        raise ConfigError(name, f"must be true or false, got {_describe(value)}")
    return value


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
        self._check_types()
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                "num_attention_heads", f"{self.num_attention_heads} does not divide hidden_size {self.hidden_size}"
            )
        if self.vq_heads not in (1, 2, 4) or self.hidden_size % self.vq_heads:
            raise ConfigError(
                "vq_heads", f"must be 1, 2 or 4 and divide hidden_size {self.hidden_size}, got {self.vq_heads}"
            )
        if self.attention not in ATTENTION_MODES:
            raise ConfigError("attention", f"must be one of {ATTENTION_MODES}, got {self.attention!r}")
        if self.position_repeat < 1 or self.position_pool % self.position_repeat:
            raise ConfigError(
                "position_repeat", f"{self.position_repeat} does not divide position_pool {self.position_pool}"
            )
        if self.window_tokens < 2 or self.window_tokens > self.position_pool:
            raise ConfigError(
                "window_tokens", f"must be in [2, position_pool {self.position_pool}], got {self.window_tokens}"
            )
        if len(self.labels) != self.num_labels:
            raise ConfigError("labels", f"has {len(self.labels)} entries, num_labels is {self.num_labels}")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            if getattr(self, name) >= self.vocab_size:
                raise ConfigError(name, f"{getattr(self, name)} is not below vocab_size {self.vocab_size}")

    def _check_types(self) -> None:
        """Every field's type and range, before any shape arithmetic can fail on a string or a float."""
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen dataclass)
        for name, lo in (
            ("vocab_size", 1),
            ("hidden_size", 1),
            ("num_hidden_layers", 1),
            ("num_attention_heads", 1),
            ("ffn_dim", 1),
            ("max_position_embeddings", 1),
            ("pad_token_id", 0),
            ("bos_token_id", 0),
            ("eos_token_id", 0),
            ("vq_heads", 1),
            ("vq_codes", 1),
            ("position_pool", 2),
            ("position_repeat", 1),
            ("window_tokens", 2),
            ("num_labels", 1),
        ):
            set_(name, _as_int(name, getattr(self, name), lo))
        set_("layer_norm_eps", _as_float("layer_norm_eps", self.layer_norm_eps, positive=True))
        set_("attention_scale", _as_float("attention_scale", self.attention_scale, positive=True))
        set_("enable_bias", _as_bool("enable_bias", self.enable_bias))
        set_("vq", _as_bool("vq", self.vq))
        if not isinstance(self.attention, str):
            raise ConfigError("attention", f"must be one of {ATTENTION_MODES}, got {_describe(self.attention)}")
        labels = self.labels
        if (
            isinstance(labels, str)
            or not isinstance(labels, (list, tuple))
            or not all(isinstance(x, str) and x for x in labels)
        ):
            raise ConfigError("labels", f"must be a list of non-empty strings, got {_describe(labels)}")
        set_("labels", tuple(labels))

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

    def replace(self, **changes) -> VQOPTConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["labels"] = list(self.labels)
        d["model_type"] = "vq-opt"
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> VQOPTConfig:
        """A config from config.json's object; ConfigError (a ValueError) names the field that is wrong."""
        if not isinstance(d, dict):
            raise ConfigError(None, f"must hold a JSON object, got {_describe(d)}")
        kind = d.get("model_type", MODEL_TYPE)
        if kind != MODEL_TYPE:
            hint = (
                " (a Hugging Face OPT checkpoint: convert it with `vq-train distill --teacher`)"
                if kind == "opt"
                else ""
            )
            raise ConfigError("model_type", f"this is a config for a {kind!r} model, not {MODEL_TYPE!r}{hint}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names - {"model_type"}
        if unknown:
            raise ConfigError(None, f"unknown config fields: {sorted(unknown)}")
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls, text: str) -> VQOPTConfig:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | Path) -> VQOPTConfig:
        return cls.from_json(Path(path).read_text())
