"""Model folders on disk: our own format, and conversion of Hugging Face OPT checkpoints.

Our folder: config.json (VQOPTConfig), model.safetensors, tokenizer.json, card.json (what the
model was trained on and how well it did). Loading lists the keys, checks every name and
shape, and fails loudly with the folder and the first problems found.

OPT conversion (the paper's): keep every weight, switch attention as asked, and fill the
position pool by repeating each OPT position row (stored factorised: OPT's table is the coarse
table, the fine table starts at zero, which equals the repeated pool).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import VQOPTConfig
from .model import VQOPT

FOLDER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "card.json")
NEW_IN_VQOPT = ("embed_positions_fine", ".vq.codebook", "score_head.")


class ModelLoadError(ValueError):
    """A model folder is missing, incomplete or does not match its config."""


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: file missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from None


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """model.safetensors, or the shards its index lists (as `save_pretrained` writes big models), or a
    pytorch_model.bin; every failure names the file."""
    st, bin_ = folder / "model.safetensors", folder / "pytorch_model.bin"
    for name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if not st.exists() and (folder / name).exists():
            return _read_shards(folder / name)
    if st.exists():
        return _read_file(st)
    if bin_.exists():
        return _read_file(bin_)
    raise ModelLoadError(
        f"{folder}: no model.safetensors (nor model.safetensors.index.json with its shards, nor pytorch_model.bin)"
    )


def _read_file(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (SafetensorError, OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as e:
        raise ModelLoadError(f"{path}: weights file is corrupt or truncated ({e})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelLoadError(f"{path}: not a state dict of tensors")
    return state


def _read_shards(index: Path) -> dict[str, torch.Tensor]:
    """Every shard the index's weight_map names, checked against it: a shard missing, or one that lacks
    a tensor the index puts there, is an error rather than a silently partial model."""
    raw = _read_json(index)
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if (
        not isinstance(weight_map, dict)
        or not weight_map
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items())
    ):
        raise ModelLoadError(f'{index}: no "weight_map" object of tensor name -> shard file')
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        path = index.parent / shard
        if Path(shard).is_absolute() or ".." in Path(shard).parts:
            raise ModelLoadError(f"{index}: shard {shard!r} is not a file inside the model folder")
        if not path.is_file():
            raise ModelLoadError(f"{path}: shard listed in {index.name} is missing")
        part = _read_file(path)
        lacking = [k for k, v in weight_map.items() if v == shard and k not in part]
        if lacking:
            raise ModelLoadError(
                f"{path}: lacks {len(lacking)} tensors that {index.name} puts there, e.g. {lacking[:3]}"
            )
        state.update({k: t for k, t in part.items() if weight_map.get(k) == shard})
    return state


def _strip_prefix(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Accept keys with or without Hugging Face's `model.` prefix; drop the tied LM head."""
    out = {}
    for key, value in state.items():
        if key == "lm_head.weight":
            continue
        out[key.removeprefix("model.")] = value
    return out


def _load_state(net: VQOPT, state: dict[str, torch.Tensor], source: Path, allow_missing=()) -> None:
    expected = net.state_dict()
    missing = [k for k in expected if k not in state and not any(m in k for m in allow_missing)]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k}: {tuple(state[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    problems = [f"missing {missing[:5]}"] * bool(missing) + [f"unexpected {unexpected[:5]}"] * bool(unexpected)
    problems += [f"shape {w}" for w in wrong[:5]]
    if problems:
        raise ModelLoadError(f"{source}: weights do not match the config: " + "; ".join(problems))
    for key, value in state.items():
        if expected[key].is_floating_point() and not value.is_floating_point():
            raise ModelLoadError(f"{source}: weight {key} holds {value.dtype} values, not floats")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ModelLoadError(f"{source}: weight {key} contains NaN or infinite values")
    net.load_state_dict({k: v for k, v in state.items()}, strict=False)


def save_model_folder(net: VQOPT, tokenizer, folder: str | Path, card: dict | None = None) -> Path:
    """Write config.json, model.safetensors, tokenizer.json and card.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    net.config.save(folder / "config.json")
    save_file(
        {k: v.detach().float().contiguous().cpu() for k, v in net.state_dict().items()},
        str(folder / "model.safetensors"),
    )
    tokenizer.save(folder / "tokenizer.json")
    (folder / "card.json").write_text(json.dumps(card or {}, indent=2, sort_keys=True) + "\n")
    return folder


def load_model_folder(folder: str | Path) -> tuple[VQOPT, dict]:
    """Our own folder -> (net in fp32 on CPU, card)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"{folder}: model folder not found")
    raw = _read_json(folder / "config.json")
    try:
        cfg = VQOPTConfig.from_dict(raw)
    except (TypeError, ValueError) as e:  # ConfigError names the field
        raise ModelLoadError(f"{folder / 'config.json'}: invalid config: {e}") from None
    net = VQOPT(cfg)
    _load_state(net, _read_weights(folder), folder)
    card = _read_json(folder / "card.json") if (folder / "card.json").exists() else {}
    return net.eval(), card


def opt_config(hf: dict, **overrides) -> VQOPTConfig:
    """Our config from an OPT config.json, with the paper's additions (overridable)."""
    if (
        not hf.get("do_layer_norm_before", True)
        or hf.get("word_embed_proj_dim", hf["hidden_size"]) != hf["hidden_size"]
    ):
        raise ModelLoadError("only pre-LayerNorm OPT models without an embedding projection are supported")
    if hf.get("activation_function", "relu") != "relu":
        raise ModelLoadError("only ReLU OPT models are supported")
    max_pos = hf["max_position_embeddings"]
    fields = dict(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_hidden_layers=hf["num_hidden_layers"],
        num_attention_heads=hf["num_attention_heads"],
        ffn_dim=hf["ffn_dim"],
        max_position_embeddings=max_pos,
        pad_token_id=hf.get("pad_token_id", 1),
        bos_token_id=hf.get("bos_token_id", 2),
        eos_token_id=hf.get("eos_token_id", 2),
        enable_bias=hf.get("enable_bias", True),
        window_tokens=max_pos,
        position_pool=100 * max_pos,
        position_repeat=100,
        attention_scale=1.0 / max_pos,
    )
    fields.update(overrides)
    return VQOPTConfig(**fields)


def load_hf_opt(folder: str | Path, **overrides) -> VQOPT:
    """Convert a Hugging Face OPT checkpoint folder (config.json + weights) into a VQOPT."""
    folder = Path(folder)
    cfg = opt_config(_read_json(folder / "config.json"), **overrides)
    state = _strip_prefix(_read_weights(folder))
    table = state.get("decoder.embed_positions.weight")
    if table is not None:
        if table.shape[0] != cfg.max_position_embeddings + 2:
            raise ModelLoadError(f"{folder}: position table has {table.shape[0]} rows, expected max_positions + 2")
        per_row, rem = divmod(cfg.position_pool // cfg.position_repeat, cfg.max_position_embeddings)
        if rem:
            raise ModelLoadError("position_pool / position_repeat must be a multiple of OPT's max_position_embeddings")
        state["decoder.embed_positions.weight"] = torch.cat([table[:2], table[2:].repeat_interleave(per_row, 0)])
    net = VQOPT(cfg)
    _load_state(net, state, folder, allow_missing=NEW_IN_VQOPT)
    return net.eval()
