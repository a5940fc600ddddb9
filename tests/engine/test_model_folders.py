"""Broken model folders, generated: every one fails with a ModelLoadError that names the file (and the
config field), and a sharded checkpoint loads as the single file it was split from."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import typing
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

import inference
from inference import ModelLoadError, VQOPTConfig

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
HINTS = typing.get_type_hints(VQOPTConfig)
FIELDS = {f.name: HINTS[f.name] for f in dataclasses.fields(VQOPTConfig)}


def _folder_like(src: Path, dst: Path, **replace: bytes | None) -> Path:
    """A model folder that links to src's files, except those replaced (None: left out)."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for path in src.iterdir():
        if path.name in replace:
            if replace[path.name] is not None:
                (dst / path.name).write_bytes(replace[path.name])
        else:
            (dst / path.name).symlink_to(path)
    for name, data in replace.items():
        if data is not None and not (dst / name).exists():
            (dst / name).write_bytes(data)
    return dst


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _wrong_type(kind) -> st.SearchStrategy:
    """JSON values of a type other than the field's (the dataclass annotation is the oracle)."""
    junk = st.one_of(
        st.text(max_size=8),
        st.none(),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
    )
    if kind is int:
        return st.one_of(
            junk, st.booleans(), st.floats(allow_nan=True), st.integers(max_value=-1), st.integers(1, 4096).map(str)
        )
    if kind is float:
        return st.one_of(
            junk,
            st.booleans(),
            st.just(math.nan),
            st.just(math.inf),
            st.just(-math.inf),
            st.floats(0.001, 10).map(str),
            st.floats(max_value=0.0),
        )
    if kind is bool:
        return st.one_of(junk, st.sampled_from(["false", "true", "False", "0", "1"]), st.integers(0, 1))
    if kind is str:
        return st.one_of(
            st.none(), st.integers(), st.booleans(), st.text(max_size=8).filter(lambda s: s not in ("gelu", "softmax"))
        )
    return st.one_of(
        st.text(min_size=1, max_size=8), st.none(), st.integers(), st.lists(st.integers(), min_size=2, max_size=2)
    )


@st.composite
def broken_field(draw):
    name = draw(st.sampled_from(sorted(FIELDS)))
    return name, draw(_wrong_type(FIELDS[name]))


@SETTINGS
@given(broken_field())
def test_every_config_field_is_checked_and_named(tiny_model_dir, tmp_path, case):
    name, value = case
    cfg = _config(tiny_model_dir) | {name: value}
    folder = _folder_like(tiny_model_dir, tmp_path / "m", **{"config.json": json.dumps(cfg).encode()})
    with pytest.raises(ModelLoadError) as err:
        inference.load_model(folder)
    message = str(err.value)
    assert f"{folder / 'config.json'}: invalid config: field {name!r}" in message, message


@pytest.mark.parametrize(
    "change, field",
    [
        ({"hidden_size": "256"}, "hidden_size"),
        ({"vq": "false"}, "vq"),
        ({"num_hidden_layers": 2.0}, "num_hidden_layers"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
        ({"bos_token_id": 10**6}, "bos_token_id"),
        ({"model_type": "opt"}, "model_type"),
        ({"model_type": "bert"}, "model_type"),
    ],
)
def test_issue_examples(tiny_model_dir, tmp_path, change, field):
    folder = _folder_like(
        tiny_model_dir, tmp_path / "m", **{"config.json": json.dumps(_config(tiny_model_dir) | change).encode()}
    )
    with pytest.raises(ModelLoadError, match=f"config.json: invalid config: field '{field}'"):
        inference.load_model(folder)


def test_another_architectures_config_says_what_it_is(tiny_model_dir, tmp_path):
    hf = {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": 768, "do_layer_norm_before": True}
    folder = _folder_like(tiny_model_dir, tmp_path / "m", **{"config.json": json.dumps(hf).encode()})
    with pytest.raises(ModelLoadError, match="a config for a 'opt' model, not 'vq-opt'.*vq-train distill"):
        inference.load_model(folder)


@SETTINGS
@given(st.data())
def test_truncated_weights_name_the_file(tiny_model_dir, tmp_path, data):
    blob = (tiny_model_dir / "model.safetensors").read_bytes()
    cut = data.draw(st.one_of(st.integers(0, 64), st.integers(0, len(blob) - 1)))
    folder = _folder_like(tiny_model_dir, tmp_path / "m", **{"model.safetensors": blob[:cut]})
    with pytest.raises(ModelLoadError, match="model.safetensors: weights file is corrupt or truncated"):
        inference.load_model(folder)


@SETTINGS
@given(st.data())
def test_wrong_shaped_or_missing_tensor_is_named(tiny_model_dir, tmp_path, data):
    state = load_file(str(tiny_model_dir / "model.safetensors"))
    key = data.draw(st.sampled_from(sorted(state)))
    how = data.draw(st.sampled_from(["drop", "grow", "nan", "int"]))
    t = state[key]
    if how == "drop":
        del state[key]
    elif how == "grow":
        state[key] = torch.cat([t, t[:1]]) if t.dim() else t.reshape(1)
    elif how == "nan":
        state[key] = t.clone().reshape(-1).index_fill(0, torch.tensor([0]), math.nan).reshape(t.shape)
    else:
        state[key] = torch.zeros(t.shape, dtype=torch.int32)
    path = tmp_path / "w.safetensors"
    save_file(state, str(path))
    folder = _folder_like(tiny_model_dir, tmp_path / "m", **{"model.safetensors": path.read_bytes()})
    with pytest.raises(ModelLoadError, match=str(folder)) as err:
        inference.load_model(folder)
    assert key in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "tokenizer, message",
    [
        (None, "tokenizer.json: file missing"),
        (b'{"not": "a tokenizer"}', "tokenizer.json: cannot be read"),
        (b"\xff\xfe", "tokenizer.json: cannot be read"),
    ],
)
def test_missing_or_broken_tokenizer(tiny_model_dir, tmp_path, tokenizer, message):
    folder = _folder_like(tiny_model_dir, tmp_path / "m", **{"tokenizer.json": tokenizer})
    with pytest.raises(ModelLoadError, match=message):
        inference.load_model(folder)


def _shard(src: Path, dst: Path, parts: int) -> dict:
    """Split src's weights into `parts` files with an index, as `save_pretrained(max_shard_size=...)` does."""
    state = load_file(str(src / "model.safetensors"))
    keys = sorted(state)
    names = [f"model-{i + 1:05d}-of-{parts:05d}.safetensors" for i in range(parts)]
    weight_map = {k: names[i % parts] for i, k in enumerate(keys)}
    _folder_like(src, dst, **{"model.safetensors": None})
    for name in names:
        save_file({k: state[k] for k in keys if weight_map[k] == name}, str(dst / name))
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
        "weight_map": weight_map,
    }
    (dst / "model.safetensors.index.json").write_text(json.dumps(index))
    return index


def test_sharded_checkpoint_loads_like_the_single_file(tiny_model_dir, tmp_path):
    _shard(tiny_model_dir, tmp_path / "sharded", 3)
    whole, sharded = inference.load_model(tiny_model_dir), inference.load_model(tmp_path / "sharded")
    for (ka, a), (kb, b) in zip(whole.net.state_dict().items(), sharded.net.state_dict().items()):
        assert ka == kb and torch.equal(a, b)
    ids = whole.tokenizer.encode("A sharded model scores the same text the same way.")
    assert inference.IncrementalDocument(whole, ids).scores == inference.IncrementalDocument(sharded, ids).scores


@pytest.mark.parametrize(
    "damage, message",
    [
        ("missing shard", "model-00002-of-00003.safetensors: shard listed in model.safetensors.index.json is missing"),
        ("key moved", "lacks 1 tensors"),
        ("no weight_map", 'no "weight_map"'),
        ("escape", "not a file inside the model folder"),
        ("truncated shard", "model-00001-of-00003.safetensors: weights file is corrupt or truncated"),
    ],
)
def test_broken_shards_are_named(tiny_model_dir, tmp_path, damage, message):
    folder = tmp_path / "sharded"
    index = _shard(tiny_model_dir, folder, 3)
    index_path = folder / "model.safetensors.index.json"
    if damage == "missing shard":
        (folder / "model-00002-of-00003.safetensors").unlink()
    elif damage == "key moved":
        key = next(k for k, v in index["weight_map"].items() if v.startswith("model-00001"))
        index["weight_map"][key] = "model-00002-of-00003.safetensors"
        index_path.write_text(json.dumps(index))
    elif damage == "no weight_map":
        index_path.write_text(json.dumps({"metadata": {}}))
    elif damage == "escape":
        index["weight_map"][next(iter(index["weight_map"]))] = "../elsewhere.safetensors"
        index_path.write_text(json.dumps(index))
    else:
        shard = folder / "model-00001-of-00003.safetensors"
        shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(ModelLoadError, match=message):
        inference.load_model(folder)
