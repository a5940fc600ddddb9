"""A document's engine state on disk: msgpack metadata plus the raw bytes of its tensors.

Restoring a state is a read of its bytes; rebuilding it is a dense pass over every window. What
is written is a closed schema (snapshot_schema.py): the metadata is a SnapshotMeta, each window
the engine's WindowRecord, under the version numbers FORMAT_VERSION (this file layout) and
engine.STATE_FORMAT (the record's fields and its tensors' layouts). The model's own objects a
state refers to (network, config, constants, tie guard) are re-attached from the model on
restore, and the per-layer views are remade. A window holding an attribute that is neither a
field of its record nor one of those is refused at write time, so a new field cannot be dropped
silently; a file whose records hold an unknown or a missing field is refused when read.

File: MAGIC, the metadata's length (8 bytes) and CRC-32 (4 bytes), the metadata, then the
tensor bytes in record order. The metadata holds both versions, the record's fields, the key
(model fingerprint + token ids), the window layout (field kinds, dtypes) and a CRC-32 of the
tensor bytes. A file of another version raises SnapshotFormatError; one that disagrees with
anything else, or is cut short or too long, raises SnapshotError (its base class), so that the
caller can drop it and rebuild from the text.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgpack
import numpy as np
import torch

from .document import IncrementalDocument
from .engine import RECORD_FIELDS, STATE_FORMAT, WindowState
from .snapshot_schema import BlobReader, BlobWriter, SnapshotError, SnapshotFormatError, SnapshotMeta
from .snapshot_schema import raw_bytes as _raw
from .windowing import new_window

if TYPE_CHECKING:
    from .loading import LoadedModel

__all__ = [
    "SnapshotError",
    "SnapshotFormatError",
    "copy_document",
    "document_key",
    "fingerprint",
    "load_snapshot",
    "model_fingerprint",
    "read_document",
    "save_snapshot",
    "snapshot_key",
    "write_document",
]

# 2: sums rows hold code projections and bounds; 3: no inner layer outputs; 4: explicit fields;
# 5: a closed schema (typed records, no open-ended values)
FORMAT_VERSION = 5
MAGIC = b"VQSNAP\r\n"
_HEADER = struct.Struct("<QI")  # metadata length, metadata CRC-32
MAX_META_BYTES = 256 * 2**20
_DOCUMENT_FIELDS = ("model", "windows")


# ----------------------------------------------------------------- keys
def _layout(window: WindowState) -> dict[str, list]:
    """Field name -> (kind, dtype, ndim): what a window of this engine stores."""
    out = {}
    record = window.record()
    for name in RECORD_FIELDS:
        value = getattr(record, name)
        if isinstance(value, torch.Tensor):
            out[name] = ["tensor", str(value.dtype), value.dim()]
        elif isinstance(value, np.ndarray):
            out[name] = ["array", value.dtype.str, value.ndim]
        else:
            out[name] = [type(value).__name__, "", 0]
    return out


def reference_layout(model: LoadedModel) -> dict[str, list]:
    """The layout of a window this engine builds for this model (a one-token window, once per model)."""
    return model.cached("snapshot_layout", lambda: _layout(new_window(model, [model.config.bos_token_id])))


def accepted_layouts(model: LoadedModel) -> list[dict[str, list]]:
    """The window layouts a snapshot may hold for this model: the one its windows are built with,
    and under the "auto" layout the lean one too (a document whose outputs the memory budget dropped)."""
    if model.layout != "auto":
        return [reference_layout(model)]

    def lean_layout() -> dict[str, list]:
        window = new_window(model, [model.config.bos_token_id])
        window.drop_outputs()
        return _layout(window)

    return [reference_layout(model), model.cached("snapshot_lean_layout", lean_layout)]


def fingerprint(model: LoadedModel) -> str:
    """Hash of what a state depends on: weights, config, dtype, device type, context (how windows are
    cut), engine layout and snapshot format. Computed once per loaded model and context (hashing the
    weights takes a moment) and kept with the model."""
    return model.cached(f"snapshot_fingerprint:{model.context}", lambda: _fingerprint(model))


def _fingerprint(model: LoadedModel) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {
                "format": FORMAT_VERSION,
                "state_format": STATE_FORMAT,
                "config": model.config.to_dict(),
                "dtype": str(model.dtype),
                "device": model.device.type,
                "tie_rel": model.tie_rel,
                "tie_growth": model.tie_growth,
                "context": model.context,
                "layout": reference_layout(model),
            },
            sort_keys=True,
        ).encode()
    )
    for name, t in model.net.state_dict().items():
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(_raw(t))
    return h.hexdigest()


def document_key(model: LoadedModel, ids: Sequence[int]) -> str:
    """The name a state is stored under: the model's fingerprint and the token ids."""
    h = hashlib.sha256(fingerprint(model).encode())
    h.update(np.asarray(ids, dtype=np.int64).tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------- writing
def _window_record(w: WindowState, where: str):
    """A window's record, after checking it holds nothing else (an attribute that is neither a field
    of the record nor the model's would be dropped silently)."""
    unknown = sorted(set(vars(w)) - set(RECORD_FIELDS) - set(WindowState.ATTACHED))
    if unknown:
        raise SnapshotError(
            f"{where}.{unknown[0]}: not a snapshot field of the window "
            f"(engine.WindowRecord); add it there and raise STATE_FORMAT"
        )
    missing = [name for name in RECORD_FIELDS if not hasattr(w, name)]
    if missing:
        raise SnapshotError(f"{where}.{missing[0]}: a snapshot field the window does not hold")
    return w.record()


def write_document(doc: IncrementalDocument, path: str | os.PathLike, key: str) -> int:
    """Write `doc` under `key` to `path` atomically (a temporary file, then a rename); returns bytes written."""
    unknown = sorted(set(vars(doc)) - set(_DOCUMENT_FIELDS))
    if unknown:
        raise SnapshotError(f"document.{unknown[0]}: not a snapshot field of the document")
    wr = BlobWriter()
    windows = [
        wr.window(_window_record(w, f"document.windows[{i}]"), f"document.windows[{i}]")
        for i, w in enumerate(doc.windows)
    ]
    meta = SnapshotMeta(
        format=FORMAT_VERSION,
        state_format=STATE_FORMAT,
        fields=list(RECORD_FIELDS),
        key=key,
        fingerprint=fingerprint(doc.model),
        layout=_layout(doc.windows[0]),
        windows=windows,
        blob_bytes=wr.nbytes,
        crc=wr.crc,
    )
    raw = msgpack.packb(vars(meta), use_bin_type=True)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + _HEADER.pack(len(raw), zlib.crc32(raw)))
            f.write(raw)
            for c in wr.chunks:
                f.write(memoryview(c))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(MAGIC) + _HEADER.size + len(raw) + wr.nbytes


# ----------------------------------------------------------------- reading
def read_document(
    model: LoadedModel, path: str | os.PathLike, key: str, ids: Sequence[int] | None = None
) -> IncrementalDocument:
    """The document stored at `path`, exactly as it was written; SnapshotFormatError if it is of
    another format, SnapshotError if the file is not a complete, intact snapshot under `key` for
    this model and engine (or its tokens are not `ids`)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(len(MAGIC) + _HEADER.size)
        if len(head) < len(MAGIC) + _HEADER.size or head[: len(MAGIC)] != MAGIC:
            raise SnapshotError("not a snapshot file (bad header)")
        meta_len, meta_crc = _HEADER.unpack(head[len(MAGIC) :])
        if meta_len > min(MAX_META_BYTES, size - len(head)):
            raise SnapshotError(f"truncated: {meta_len} bytes of metadata announced, {size - len(head)} left")
        raw = f.read(meta_len)
        if zlib.crc32(raw) != meta_crc:
            raise SnapshotError("metadata checksum mismatch (corrupt)")
        try:
            data = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack raises several types on bad input
            raise SnapshotError(f"unreadable metadata ({type(e).__name__}: {e})") from None
        meta = SnapshotMeta.parse(data, FORMAT_VERSION, STATE_FORMAT)
        if meta.fingerprint != fingerprint(model):
            raise SnapshotError("written for a different model (fingerprint mismatch)")
        if meta.key != key:
            raise SnapshotError("written for other tokens (key mismatch)")
        if meta.layout not in accepted_layouts(model):
            raise SnapshotError("written by an engine with another state layout")
        if len(head) + meta_len + meta.blob_bytes != size:
            raise SnapshotError(
                f"{size} bytes on disk, {len(head) + meta_len}+{meta.blob_bytes} expected (truncated or padded)"
            )
        rd = BlobReader(f, meta.blob_bytes, model.device)
        try:
            records = [rd.window(w, f"document.windows[{i}]") for i, w in enumerate(meta.windows)]
        except SnapshotError:
            raise
        except Exception as e:  # a malformed entry: shapes torch refuses
            raise SnapshotError(f"malformed state ({type(e).__name__}: {e})") from None
        if rd.crc != meta.crc:
            raise SnapshotError("tensor data checksum mismatch (corrupt)")
    windows = [WindowState.restore(model.net, model.consts, model.tie_rel, model.tie_growth, r) for r in records]
    if not windows:
        raise SnapshotError("malformed state (no windows)")
    doc = IncrementalDocument.__new__(IncrementalDocument)
    doc.model, doc.windows = model, windows
    if ids is not None and doc.token_ids != list(ids):
        raise SnapshotError("its tokens differ from the text's")
    return doc


# ----------------------------------------------------------------- public names (exported by the package)
snapshot_key = document_key  # the key a document of these tokens is stored under for this model
model_fingerprint = fingerprint  # the hash of everything a stored state depends on


def save_snapshot(doc: IncrementalDocument, path: str | os.PathLike, key: str | None = None) -> int:
    """Write `doc`'s state to `path` atomically under `key` (default: snapshot_key of its tokens);
    returns the bytes written. SnapshotError if the state cannot be written."""
    return write_document(doc, path, snapshot_key(doc.model, doc.token_ids) if key is None else key)


def copy_document(doc: IncrementalDocument) -> IncrementalDocument:
    """An independent copy of `doc` (its windows' data copied, the model's objects shared): what a
    snapshot written and read back gives, without the disk or the bytes' round trip."""
    m = doc.model
    out = IncrementalDocument.__new__(IncrementalDocument)
    out.model = m
    out.windows = [
        WindowState.restore(m.net, m.consts, m.tie_rel, m.tie_growth, copy.deepcopy(w.record())) for w in doc.windows
    ]
    return out


def load_snapshot(
    model: LoadedModel, path: str | os.PathLike, ids: Sequence[int] | None = None, key: str | None = None
) -> IncrementalDocument:
    """The document stored at `path` for this model: its tokens must be `ids` (when given) and its key
    `key` (default: snapshot_key of `ids`). SnapshotFormatError for a file of another format,
    SnapshotError for anything else that cannot be trusted: the caller drops it and rebuilds."""
    if key is None:
        if ids is None:
            raise ValueError("load_snapshot needs the document's token ids or its key")
        key = snapshot_key(model, ids)
    return read_document(model, path, key, ids)
