"""Snapshots of engine state (inference/snapshot.py): a restored document is the same state bit for
bit, keeps editing exactly, and anything that cannot be trusted (corrupt, cut short, another
model, other tokens, another format, a window attribute outside its record, a record with an
unknown or a missing field or a value of another kind) raises SnapshotError."""

from __future__ import annotations

import copy
import random
import zlib

import msgpack
import numpy as np
import pytest
import torch

import inference
from inference import snapshot
from inference.snapshot import SnapshotError, SnapshotFormatError

from .helpers import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model(5)


def edited_document(model, n=300, seed=0) -> inference.IncrementalDocument:
    """A several-window document that has been edited (slots out of order, free slots, relabels)."""
    rng = random.Random(seed)
    vocab = model.config.vocab_size
    doc = inference.IncrementalDocument(model, [rng.randrange(vocab) for _ in range(n)])
    for _ in range(6):
        a = rng.randrange(doc.n_tokens - 3)
        doc.apply([inference.Splice(a, a + rng.randrange(3), [rng.randrange(vocab) for _ in range(rng.randrange(4))])])
    return doc


def write(doc, path):
    key = snapshot.document_key(doc.model, doc.token_ids)
    snapshot.write_document(doc, path, key)
    return key


# a window's views and host reads, remade on restore or on first read (a revision counts updates since then)
REMADE = ("layer_views", "revision", "_rows_of", "_rows_array", "_host_reads")


def assert_same_state(a: inference.IncrementalDocument, b: inference.IncrementalDocument) -> None:
    assert len(a.windows) == len(b.windows)
    for wa, wb in zip(a.windows, b.windows):
        va, vb = vars(wa), vars(wb)
        assert va.keys() == vb.keys()
        for name, x in va.items():
            y = vb[name]
            if name in REMADE:
                continue
            if isinstance(x, torch.Tensor):
                assert x.dtype == y.dtype and torch.equal(x, y), name
            elif isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and np.array_equal(x, y), name
            elif isinstance(x, list) and x and isinstance(x[0], torch.Tensor):
                assert all(torch.equal(p, q) for p, q in zip(x, y)), name
            elif name in ("net", "cfg", "consts"):
                assert x is y, name
            else:
                assert x == y, name


def test_restore_is_exact_and_keeps_editing_exactly(model, tmp_path):
    doc = edited_document(model)
    assert len(doc.windows) >= 3
    key = write(doc, tmp_path / "s")
    back = snapshot.read_document(model, tmp_path / "s", key, doc.token_ids)
    assert_same_state(doc, back)
    check = back.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-9
    assert back.scores == doc.scores
    assert back.surprise(0, back.n_tokens) == doc.surprise(0, doc.n_tokens)
    assert back.span_scores(10, 90) == doc.span_scores(10, 90)
    assert back.positions == doc.positions
    rng = random.Random(1)
    for _ in range(8):  # the same edits on both: the same results, and still exact
        a = rng.randrange(back.n_tokens - 3)
        edit = [
            inference.Splice(a, a + 1, [rng.randrange(model.config.vocab_size) for _ in range(rng.randrange(1, 40))])
        ]
        assert back.apply(edit).scores == doc.apply(edit).scores
    assert back.verify().codes_equal and back.token_ids == doc.token_ids
    assert_same_state(doc, back)


def big_tensor(w) -> torch.Tensor:
    """Some multi-dimensional state tensor of a window, whatever the engine's field names."""
    return next(v for v in vars(w).values() if isinstance(v, torch.Tensor) and v.dim() >= 3)


def test_views_are_remade_not_written(model, tmp_path):
    doc = edited_document(model, n=60)
    key = write(doc, tmp_path / "s")
    back = snapshot.read_document(model, tmp_path / "s", key).windows[0]
    # the per-layer views point into the restored tensors, not into copies or the original's
    own = {t.untyped_storage().data_ptr() for t in vars(back).values() if isinstance(t, torch.Tensor)}
    views = [t for v in back.layer_views for t in vars(v).values() if isinstance(t, torch.Tensor)]
    assert views and all(t.untyped_storage().data_ptr() in own for t in views)
    original = {t.untyped_storage().data_ptr() for t in vars(doc.windows[0]).values() if isinstance(t, torch.Tensor)}
    assert not own & original


def refused_at_write(doc, folder, match: str) -> None:
    """Writing `doc` into `folder` raises a SnapshotError that matches `match`."""
    with pytest.raises(SnapshotError, match=match):
        write(doc, folder / "s")


def test_a_window_attribute_outside_its_record_is_refused(model, tmp_path):
    """A window attribute that is neither a field of WindowRecord nor the model's would be dropped
    silently: refused at write time, whatever it holds, and no partial file is left."""
    doc = edited_document(model, n=200)
    doc.windows[1].handle = object()
    refused_at_write(doc, tmp_path, r"windows\[1\]\.handle: not a snapshot field")
    del doc.windows[1].handle
    doc.windows[0].cached_q = big_tensor(doc.windows[0])[0, :, :4]  # a view the restore would not remake
    refused_at_write(doc, tmp_path, r"windows\[0\]\.cached_q: not a snapshot field")
    assert list(tmp_path.iterdir()) == []


def test_a_field_holding_another_kind_is_refused_at_write_time(model, tmp_path):
    doc = edited_document(model, n=60)
    w = doc.windows[0]
    order = w.order
    w.order = np.asarray(order)  # the record holds a list of ints
    refused_at_write(doc, tmp_path, r"windows\[0\]\.order: a ndarray where the schema holds ints")
    w.order = order
    w.qkv = [w.qkv]  # the record holds a tensor
    refused_at_write(doc, tmp_path, r"windows\[0\]\.qkv: a list where the schema holds a tensor")
    assert list(tmp_path.iterdir()) == []


def test_a_field_sharing_memory_with_another_is_refused(model, tmp_path):
    """Written as data, a view of another field would come back as a copy, no longer tied to it."""
    doc = edited_document(model, n=60)
    w = doc.windows[0]
    w.nll = w.cls_logp[:, 0]
    refused_at_write(doc, tmp_path, r"windows\[0\]\.nll: shares memory with cls_logp")


@pytest.fixture(scope="module")
def stored(model, tmp_path_factory):
    doc = edited_document(model, n=200)
    path = tmp_path_factory.mktemp("snap") / "s"
    key = write(doc, path)
    return doc, path, key, path.read_bytes()


@pytest.mark.parametrize("cut", [0, 5, 17, 100, 0.5, 0.99, -1])
def test_truncated_files_are_refused(model, stored, tmp_path, cut):
    doc, _, key, data = stored
    n = int(len(data) * cut) if isinstance(cut, float) else (len(data) + cut if cut < 0 else cut)
    (tmp_path / "t").write_bytes(data[:n])
    with pytest.raises(SnapshotError):
        snapshot.read_document(model, tmp_path / "t", key)


@pytest.mark.parametrize("where", [0, 9, 20, 60, 0.3, 0.6, 0.999])
def test_corrupted_bytes_are_refused(model, stored, tmp_path, where):
    """One flipped bit anywhere (header, metadata, tensor bytes) is caught by a check."""
    doc, _, key, data = stored
    i = int(len(data) * where) if isinstance(where, float) else where
    bad = bytearray(data)
    bad[i] ^= 0x10
    (tmp_path / "c").write_bytes(bytes(bad))
    with pytest.raises(SnapshotError):
        snapshot.read_document(model, tmp_path / "c", key)


def test_padding_and_garbage_are_refused(model, stored, tmp_path):
    doc, _, key, data = stored
    (tmp_path / "p").write_bytes(data + b"\0")
    with pytest.raises(SnapshotError, match="padded"):
        snapshot.read_document(model, tmp_path / "p", key)
    (tmp_path / "g").write_bytes(b"not a snapshot at all" * 50)
    with pytest.raises(SnapshotError, match="bad header"):
        snapshot.read_document(model, tmp_path / "g", key)


def test_another_model_or_other_tokens_do_not_match(model, stored):
    doc, path, key, _ = stored
    other = tiny_model(6)  # same shapes, other weights
    assert snapshot.fingerprint(other) != snapshot.fingerprint(model)
    assert snapshot.document_key(other, doc.token_ids) != key
    with pytest.raises(SnapshotError, match="different model"):
        snapshot.read_document(other, path, key)
    as_f32 = inference.LoadedModel.from_net(copy.deepcopy(model.net), dtype=torch.float32)  # same weights, other dtype
    assert snapshot.fingerprint(as_f32) != snapshot.fingerprint(model)
    full = inference.LoadedModel.from_net(copy.deepcopy(model.net), dtype=model.dtype, layout="full")  # other layout
    assert model.layout == "lean" and snapshot.fingerprint(full) != snapshot.fingerprint(model)
    with pytest.raises(SnapshotError, match="different model"):
        snapshot.read_document(full, path, key)
    with pytest.raises(SnapshotError, match="key mismatch"):
        snapshot.read_document(model, path, snapshot.document_key(model, doc.token_ids[1:]))
    with pytest.raises(SnapshotError, match="tokens differ"):
        snapshot.read_document(model, path, key, doc.token_ids[:-1])


def test_fingerprint_is_computed_once_per_model_and_context(model, monkeypatch):
    attributes, context = set(vars(model)), model.context
    first = snapshot.fingerprint(model)
    assert set(vars(model)) == attributes  # kept in the model's own store: nothing hung on it from outside
    monkeypatch.setattr(model, "context", "paragraph" if context == "window" else "window")  # switched in place
    other = snapshot.fingerprint(model)
    assert other != first
    monkeypatch.setattr(snapshot, "_raw", lambda t: pytest.fail("hashed the weights again"))
    assert snapshot.fingerprint(model) == other
    monkeypatch.setattr(model, "context", context)
    assert snapshot.fingerprint(model) == first


def _rewrite_metadata(data: bytes, change) -> bytes:
    """The same file with its metadata changed by `change(meta)` and its checksum made valid again."""
    head = len(snapshot.MAGIC) + snapshot._HEADER.size
    meta_len, _ = snapshot._HEADER.unpack(data[len(snapshot.MAGIC) : head])
    meta = msgpack.unpackb(data[head : head + meta_len], raw=False, strict_map_key=False)
    change(meta)
    raw = msgpack.packb(meta, use_bin_type=True)
    return snapshot.MAGIC + snapshot._HEADER.pack(len(raw), zlib.crc32(raw)) + raw + data[head + meta_len :]


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.update(format=3),  # written before the fields were explicit
        lambda m: m.update(format=snapshot.FORMAT_VERSION + 1),  # by a newer engine
        lambda m: m.update(state_format=m["state_format"] + 1),  # another state layout
        lambda m: m.update(fields=m["fields"][::-1]),  # other fields
        lambda m: m.pop("state_format"),
    ],
)
def test_snapshots_of_another_format_are_refused_cleanly(model, stored, tmp_path, change):
    """A file of another format (an older or newer engine) is refused with SnapshotFormatError, a
    SnapshotError the caller already catches to drop the file and rebuild, never read as this format."""
    doc, _, key, data = stored
    (tmp_path / "old").write_bytes(_rewrite_metadata(data, change))
    with pytest.raises(SnapshotFormatError):
        snapshot.read_document(model, tmp_path / "old", key)
    with pytest.raises(SnapshotError, match="format"):
        inference.load_snapshot(model, tmp_path / "old", doc.token_ids, key=key)
    (tmp_path / "same").write_bytes(_rewrite_metadata(data, lambda m: None))  # the rewrite itself is sound
    assert snapshot.read_document(model, tmp_path / "same", key).token_ids == doc.token_ids


def _window(meta, change):
    change(meta["windows"][0])


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.update(extra=1), r"metadata: unknown field 'extra'"),
        (lambda m: m.pop("crc"), r"metadata: missing field 'crc'"),
        (lambda m: m.update(key=7), r"metadata\.key: a int where the schema holds str"),
        (lambda m: _window(m, lambda w: w.update(extra=[1])), r"windows\[0\]: unknown field 'extra'"),
        (lambda m: _window(m, lambda w: w.pop("nll")), r"windows\[0\]: missing field 'nll'"),
        (lambda m: _window(m, lambda w: w.update(cap="16")), r"windows\[0\]\.cap: a str where the schema holds int"),
        (lambda m: _window(m, lambda w: w.update(codes=None)), r"windows\[0\]\.codes: a NoneType"),
        (lambda m: _window(m, lambda w: w["qkv"].update(extra=0)), r"windows\[0\]\.qkv: unknown field 'extra'"),
        (lambda m: _window(m, lambda w: w["qkv"].pop("dtype")), r"windows\[0\]\.qkv: missing field 'dtype'"),
        (
            lambda m: _window(m, lambda w: w["qkv"].update(kind="array")),
            r"windows\[0\]\.qkv: a 'array' entry .* of kind 'tensor'",
        ),
        (
            lambda m: _window(m, lambda w: w["ids_host"].update(kind="tensor")),
            r"ids_host: a 'tensor' entry .* of kind 'array'",
        ),
    ],
)
def test_unknown_missing_or_mistyped_fields_are_refused_when_read(model, stored, tmp_path, change, message):
    """The file's metadata and its window records are closed: a field this engine does not know,
    one it misses, or a value of another kind is refused with an error that names it."""
    doc, _, key, data = stored
    (tmp_path / "x").write_bytes(_rewrite_metadata(data, change))
    with pytest.raises(SnapshotError, match=message) as caught:
        snapshot.read_document(model, tmp_path / "x", key)
    assert not isinstance(caught.value, SnapshotFormatError)  # this format, written wrong


def test_public_save_and_load(model, tmp_path):
    doc = edited_document(model, n=120)
    assert inference.save_snapshot(doc, tmp_path / "p") == (tmp_path / "p").stat().st_size
    assert inference.snapshot_key(model, doc.token_ids) == snapshot.document_key(model, doc.token_ids)
    assert inference.model_fingerprint(model) == snapshot.fingerprint(model)
    back = inference.load_snapshot(model, tmp_path / "p", doc.token_ids)
    assert_same_state(doc, back)
    assert back.window_count == doc.window_count == len(doc.windows)
    with pytest.raises(SnapshotError, match="key mismatch"):
        inference.load_snapshot(model, tmp_path / "p", doc.token_ids[1:])
