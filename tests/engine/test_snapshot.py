"""Snapshots of engine state (inference/snapshot.py): a restored document is the same state bit for
bit, keeps editing exactly, and anything that cannot be trusted (corrupt, cut short, another
model, other tokens, another format, an attribute outside the window's snapshot fields or one it
cannot write) raises SnapshotError."""

from __future__ import annotations

import contextlib
import copy
import random
import zlib

import msgpack
import numpy as np
import pytest
import torch

import inference
from inference import snapshot
from inference.engine import WindowState
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


@contextlib.contextmanager
def extra_fields(model, *names):
    """The window's snapshot fields plus `names`, as a new field of the engine would be declared."""
    snapshot.fingerprint(model)  # the reference layout (of the engine's own fields) is taken first
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WindowState, "SNAPSHOT_FIELDS", WindowState.SNAPSHOT_FIELDS + names)
        yield


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


EXTRA = (
    "extra_bf16",
    "extra_int8",
    "extra_bool",
    "extra_scalar",
    "extra_list",
    "extra_host",
    "extra_dict",
    "extra_dtype",
    "extra_device",
    "extra_record",
    "extra_refs",
)


def test_new_fields_of_any_dtype_round_trip(model, tmp_path):
    """A new window field of any kind (another dtype, a numpy array, a list of tensors, a dict, a
    record, references to the model's modules, weights and constants) comes back as it was once
    it is named in WindowState.SNAPSHOT_FIELDS, with no change to snapshot.py."""
    with extra_fields(model, *EXTRA):
        _round_trip_new_fields(model, tmp_path)


def _round_trip_new_fields(model, tmp_path):
    doc = edited_document(model, n=60)
    w = doc.windows[0]
    w.extra_bf16 = torch.randn(3, 5).to(torch.bfloat16)
    w.extra_int8 = torch.arange(-4, 4, dtype=torch.int8).reshape(2, 4)
    w.extra_bool = torch.tensor([True, False, True])
    w.extra_scalar = torch.tensor(2.5, dtype=torch.float32)
    w.extra_list = [torch.ones(2, dtype=torch.float16), torch.zeros(0, 3)]
    w.extra_host = np.arange(6, dtype=np.uint16).reshape(3, 2)
    w.extra_dict = {"a": (1, 2.5, None), "b": [np.int64(7)]}
    w.extra_dtype, w.extra_device = torch.bfloat16, torch.device("cpu")
    w.extra_record = inference.Cost(incremental_macs=3, dirty_per_layer=[1, 2])  # a dataclass of the package
    w.extra_refs = [model.net.layers[1], model.net.layers[0].fc1.weight, model.consts.code_sq[2]]  # the model's own
    key = write(doc, tmp_path / "s")
    back = snapshot.read_document(model, tmp_path / "s", key).windows[0]
    for name in ("extra_bf16", "extra_int8", "extra_bool", "extra_scalar"):
        assert getattr(back, name).dtype == getattr(w, name).dtype and torch.equal(
            getattr(back, name), getattr(w, name)
        )
    assert [t.dtype for t in back.extra_list] == [torch.float16, torch.float32] and back.extra_list[1].shape == (0, 3)
    assert back.extra_host.dtype == np.uint16 and np.array_equal(back.extra_host, w.extra_host)
    assert back.extra_dict == {"a": (1, 2.5, None), "b": [7]}
    assert back.extra_dtype is torch.bfloat16 and back.extra_device == model.device
    assert back.extra_record == w.extra_record and type(back.extra_record) is inference.Cost
    assert all(a is b for a, b in zip(back.extra_refs, w.extra_refs))  # re-attached, not copied


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


def test_a_view_that_views_do_not_remake_is_refused(model, tmp_path):
    doc = edited_document(model, n=60)
    doc.windows[0].cached_q = big_tensor(doc.windows[0])[0, :, :4]  # a view make_views() knows nothing about
    with pytest.raises(SnapshotError, match=r"windows\[0\]\.cached_q: not a snapshot field"):
        write(doc, tmp_path / "s")
    with extra_fields(model, "cached_q"), pytest.raises(SnapshotError, match=r"cached_q: shares memory"):
        write(doc, tmp_path / "s")  # declared a field, it would still come back as a copy
    assert list(tmp_path.iterdir()) == []


def test_data_sharing_memory_with_a_window_tensor_is_refused(model, tmp_path):
    """A view mixed into data the walk writes would come back as a copy, no longer tied to the
    tensor it views: refused at write time rather than restored subtly different."""
    doc = edited_document(model, n=60)
    w = doc.windows[0]
    w.mixed = [big_tensor(w)[0], torch.ones(2)]
    with extra_fields(model, "mixed"):
        with pytest.raises(SnapshotError, match=r"windows\[0\]\.mixed\[0\]: shares memory with a window tensor"):
            write(doc, tmp_path / "s")
        w.mixed = [w.nll, torch.ones(2)]  # the window's own tensor, aliased inside other data
        with pytest.raises(SnapshotError, match="shares memory"):
            write(doc, tmp_path / "s")


def test_an_attribute_it_cannot_write_is_refused(model, tmp_path):
    doc = edited_document(model, n=200)
    doc.windows[1].handle = object()
    with pytest.raises(SnapshotError, match=r"windows\[1\]\.handle: not a snapshot field"):
        write(doc, tmp_path / "s")  # an attribute outside the field list is never dropped silently
    doc.windows[0].handle = None  # (a declared field every window holds)
    cannot = r"windows\[1\]\.handle: cannot snapshot a object"
    with extra_fields(model, "handle"), pytest.raises(SnapshotError, match=cannot):
        write(doc, tmp_path / "s")
    assert not (tmp_path / "s").exists() and list(tmp_path.iterdir()) == []  # no partial file left


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


def test_fingerprint_is_computed_once_per_model(model, monkeypatch):
    first = snapshot.fingerprint(model)
    monkeypatch.setattr(snapshot, "_raw", lambda t: pytest.fail("hashed the weights again"))
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
