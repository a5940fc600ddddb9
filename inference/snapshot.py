"""A document's engine state on disk: msgpack metadata plus the raw bytes of its tensors.

Restoring a state is a read of its bytes; rebuilding it is a dense pass over every window. What
is written is explicit: each window's WindowState.SNAPSHOT_FIELDS, under the version numbers
FORMAT_VERSION (this file layout) and engine.STATE_FORMAT (that field list and its tensors'
layouts). The model's own objects a state refers to (network, config, constants, tie guard) are
re-attached from the model on restore, and the per-layer views are remade. A window holding an
attribute outside its field list is refused at write time, so a new field cannot be dropped
silently. Values a field may hold:
  - torch tensors (any dtype, shape, device) and numpy arrays: raw bytes, dtype and shape in
    the metadata; lists, tuples, dicts, plain scalars, dtypes and devices: inline in the
    metadata; objects of this package's classes (small records): their attributes, the same way;
  - references to the model's objects (its modules, parameters, constants' tensors): a name.
A tensor sharing memory with another of the window's tensors would come back as a copy, no longer
tied to it, and is refused.

File: MAGIC, the metadata's length (8 bytes) and CRC-32 (4 bytes), the metadata, then the
tensor bytes in metadata order. The metadata holds both versions, the field list, the key
(model fingerprint + token ids), the window layout (field kinds, dtypes) and a CRC-32 of the
tensor bytes. A file of another version raises SnapshotFormatError; one that disagrees with
anything else, or is cut short or too long, raises SnapshotError (its base class), so that the
caller can drop it and rebuild from the text.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import math
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import torch

from .document import IncrementalDocument
from .engine import STATE_FORMAT, WindowState
from .windowing import new_window

if TYPE_CHECKING:
    from .loading import LoadedModel

FORMAT_VERSION = 4  # 2: sums rows hold code projections and bounds; 3: no inner layer outputs; 4: explicit fields
MAGIC = b"VQSNAP\r\n"
_HEADER = struct.Struct("<QI")  # metadata length, metadata CRC-32
MAX_META_BYTES = 256 * 2**20
_SCALARS = (type(None), bool, int, float, str, bytes)
# a window's attributes that are the model's (re-attached on restore) or remade (make_views; the
# host reads WindowState keeps per revision, made again on first use)
_ATTACHED = (
    *("net", "cfg", "consts", "tie_rel", "tie_growth", "tie_code_term", "layer_views"),
    *("revision", "_rows_of", "_rows_array", "_host_reads"),
)
_DOCUMENT_FIELDS = ("model", "windows")
# the constants' tensors a field may refer to by name (LayerConstants)
_CONSTANT_TABLES = (
    "code_sq",
    "code_sq_max",
    "sum_map",
    "sum_map_scaled",
    "qkv_weight",
    "qkv_bias",
    "finish",
    "embed_table",
    "head_mask",
)


class SnapshotError(ValueError):
    """A snapshot that cannot be written, or cannot be trusted when read: drop it and rebuild."""


class SnapshotFormatError(SnapshotError):
    """A snapshot written in another format (an older or newer engine): never read, rebuild instead."""


def _shared(model: LoadedModel) -> dict[str, Any]:
    """The model's objects a state may refer to, by name: the model, its network, config and
    constants, every module, parameter and buffer of the network, and the constants' tensors.
    Never written: re-attached from the model on restore. Once per model."""

    def make() -> dict[str, Any]:
        out: dict[str, Any] = {"model": model, "net": model.net, "config": model.net.config, "consts": model.consts}
        for name, module in model.net.named_modules():
            out.setdefault(f"net.{name}", module)
        for name, t in [*model.net.named_parameters(), *model.net.named_buffers()]:
            out.setdefault(f"net.{name}", t)

        def walk(v: Any, name: str, depth: int) -> None:
            if isinstance(v, torch.Tensor):
                out.setdefault(name, v)
            elif isinstance(v, (list, tuple)) and depth < 3:
                for i, x in enumerate(v):
                    walk(x, f"{name}[{i}]", depth + 1)

        for name in _CONSTANT_TABLES:
            walk(getattr(model.consts, name), f"consts.{name}", 0)
        return out

    return model.cached("snapshot_shared", make)


# ----------------------------------------------------------------- keys
def _layout(window: WindowState) -> dict[str, list]:
    """Field name -> (kind, dtype, ndim): what a window of this engine stores."""
    out = {}
    for name in WindowState.SNAPSHOT_FIELDS:
        value = getattr(window, name)
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


def fingerprint(model: LoadedModel) -> str:
    """Hash of what a state depends on: weights, config, dtype, device type, context (how windows are
    cut), engine layout and snapshot format. Computed once per loaded model (hashing the weights takes a moment)."""
    cached = model.__dict__.get("_snapshot_fingerprint")
    if cached is not None and cached[0] == model.context:
        return cached[1]
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
    model._snapshot_fingerprint = (model.context, h.hexdigest())
    return model._snapshot_fingerprint[1]


def document_key(model: LoadedModel, ids: Sequence[int]) -> str:
    """The name a state is stored under: the model's fingerprint and the token ids."""
    h = hashlib.sha256(fingerprint(model).encode())
    h.update(np.asarray(ids, dtype=np.int64).tobytes())
    return h.hexdigest()


def _raw(t: torch.Tensor) -> np.ndarray:
    """A tensor's bytes (a uint8 array sharing memory with a contiguous CPU copy)."""
    return t.detach().reshape(-1).contiguous().cpu().view(torch.uint8).numpy()


# ----------------------------------------------------------------- writing
class _Writer:
    def __init__(self, model: LoadedModel) -> None:
        self.shared = {id(v): k for k, v in _shared(model).items()}
        self.chunks: list[np.ndarray] = []
        self.crc = 0
        self.own: set[int] = set()  # ids of the tensors of the window being written

    def blob(self, data: np.ndarray) -> int:
        self.chunks.append(data)
        self.crc = zlib.crc32(data, self.crc)
        return data.nbytes

    def value(self, v: Any, where: str, nested: bool = True) -> Any:
        if id(v) in self.shared:
            return {"t": "S", "ref": self.shared[id(v)]}
        if isinstance(v, torch.Tensor):
            if v.requires_grad:
                raise SnapshotError(f"{where}: a tensor that requires grad")
            if (nested and id(v) in self.own) or (v._base is not None and id(v._base) in self.own):
                raise SnapshotError(
                    f"{where}: shares memory with a window tensor; written as data it would come back as a copy"
                )
            return {
                "t": "T",
                "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape),
                "n": self.blob(_raw(v)),
            }
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                raise SnapshotError(f"{where}: a numpy array of Python objects")
            data = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
            return {"t": "A", "dtype": v.dtype.str, "shape": list(v.shape), "n": self.blob(data)}
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, _SCALARS):
            return v
        if isinstance(v, list) and all(type(x) in _SCALARS for x in v):
            return v  # bare: token orders and free lists are long lists of ints
        if isinstance(v, (list, tuple)):
            items = [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)]
            return {"t": "L" if isinstance(v, list) else "U", "v": items}
        if isinstance(v, dict) and all(isinstance(k, (str, int)) for k in v):
            return {"t": "D", "v": [[k, self.value(x, f"{where}[{k!r}]")] for k, x in v.items()]}
        if isinstance(v, torch.dtype):
            return {"t": "dtype", "v": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"t": "device"}  # restored as the model's device (the fingerprint holds its type)
        cls = type(v)
        if cls.__module__.split(".")[0] == __package__ and hasattr(v, "__dict__") and not hasattr(cls, "__slots__"):
            return {
                "t": "O",
                "cls": f"{cls.__module__}:{cls.__qualname__}",
                "v": {name: self.value(x, f"{where}.{name}") for name, x in vars(v).items()},
            }
        raise SnapshotError(f"{where}: cannot snapshot a {type(v).__name__}")

    def window(self, w: WindowState, where: str) -> dict:
        fields = WindowState.SNAPSHOT_FIELDS
        unknown = sorted(set(vars(w)) - set(fields) - set(_ATTACHED))
        if unknown:
            raise SnapshotError(
                f"{where}.{unknown[0]}: not a snapshot field of the window "
                f"(WindowState.SNAPSHOT_FIELDS); add it there and raise STATE_FORMAT"
            )
        missing = [name for name in fields if not hasattr(w, name)]
        if missing:
            raise SnapshotError(f"{where}.{missing[0]}: a snapshot field the window does not hold")
        values = {name: getattr(w, name) for name in fields}
        self.own = {id(t) for t in values.values() if isinstance(t, torch.Tensor)}
        try:
            return {name: self.value(v, f"{where}.{name}", nested=False) for name, v in values.items()}
        finally:
            self.own = set()


def write_document(doc: IncrementalDocument, path: str | os.PathLike, key: str) -> int:
    """Write `doc` under `key` to `path` atomically (a temporary file, then a rename); returns bytes written."""
    unknown = sorted(set(vars(doc)) - set(_DOCUMENT_FIELDS))
    if unknown:
        raise SnapshotError(f"document.{unknown[0]}: not a snapshot field of the document")
    wr = _Writer(doc.model)
    windows = [wr.window(w, f"document.windows[{i}]") for i, w in enumerate(doc.windows)]
    meta = msgpack.packb(
        {
            "format": FORMAT_VERSION,
            "state_format": STATE_FORMAT,
            "fields": list(WindowState.SNAPSHOT_FIELDS),
            "key": key,
            "fingerprint": fingerprint(doc.model),
            "layout": reference_layout(doc.model),
            "windows": windows,
            "blob_bytes": sum(c.nbytes for c in wr.chunks),
            "crc": wr.crc,
        },
        use_bin_type=True,
    )
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + _HEADER.pack(len(meta), zlib.crc32(meta)))
            f.write(meta)
            for c in wr.chunks:
                f.write(memoryview(c))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(MAGIC) + _HEADER.size + len(meta) + sum(c.nbytes for c in wr.chunks)


# ----------------------------------------------------------------- reading
class _Reader:
    def __init__(self, model: LoadedModel, f, blob_bytes: int) -> None:
        self.model, self.f = model, f
        self.shared = _shared(model)
        self.crc = 0
        self.left = blob_bytes

    def expect(self, nbytes: int, v: dict, where: str) -> None:
        """Check an entry's size before allocating it: its shape must match its byte count, and
        every entry together must fit in the bytes the file holds."""
        if nbytes != v["n"] or min(v["shape"], default=0) < 0:
            raise SnapshotError(f"{where}: {v['n']} bytes do not hold a {v['dtype']} of shape {v['shape']}")
        self.left -= nbytes
        if self.left < 0:
            raise SnapshotError(f"{where}: more tensor bytes announced than the file holds")

    def read_into(self, data: np.ndarray, where: str) -> None:
        view = memoryview(data).cast("B")
        got = self.f.readinto(view)
        if got != len(view):
            raise SnapshotError(f"truncated in {where}: {got} of {len(view)} bytes")
        self.crc = zlib.crc32(view, self.crc)

    def value(self, v: Any, where: str) -> Any:
        if not isinstance(v, dict):
            return v
        tag = v.get("t")
        if tag == "S":
            return self.shared[v["ref"]]
        if tag == "T":
            dtype = getattr(torch, v["dtype"], None)
            if not isinstance(dtype, torch.dtype):
                raise SnapshotError(f"{where}: unknown dtype {v['dtype']!r}")
            self.expect(math.prod(v["shape"]) * torch.empty(0, dtype=dtype).element_size(), v, where)
            t = torch.empty(v["shape"], dtype=dtype)
            self.read_into(t.view(-1).view(torch.uint8).numpy(), where)
            return t if self.model.device.type == "cpu" else t.to(self.model.device)
        if tag == "A":
            dtype = np.dtype(v["dtype"])
            self.expect(math.prod(v["shape"]) * dtype.itemsize, v, where)
            arr = np.empty(v["shape"], dtype=dtype)
            self.read_into(arr.reshape(-1).view(np.uint8), where)
            return arr
        if tag in ("L", "U"):
            items = [self.value(x, f"{where}[{i}]") for i, x in enumerate(v["v"])]
            return items if tag == "L" else tuple(items)
        if tag == "D":
            return {k: self.value(x, f"{where}[{k!r}]") for k, x in v["v"]}
        if tag == "dtype":
            dtype = getattr(torch, v["v"], None)
            if not isinstance(dtype, torch.dtype):
                raise SnapshotError(f"{where}: unknown dtype {v['v']!r}")
            return dtype
        if tag == "device":
            return self.model.device
        if tag == "O":
            return self.instance(v, where)
        raise SnapshotError(f"{where}: unknown entry {tag!r}")

    def instance(self, v: dict, where: str) -> Any:
        """An object of a class of this package (a small record a window may hold), attributes restored."""
        module, _, qualname = v["cls"].partition(":")
        if module.split(".")[0] != __package__:
            raise SnapshotError(f"{where}: refusing a class outside {__package__}: {v['cls']!r}")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not isinstance(cls, type):
            raise SnapshotError(f"{where}: {v['cls']!r} is not a class")
        obj = cls.__new__(cls)
        for name, x in v["v"].items():
            object.__setattr__(obj, name, self.value(x, f"{where}.{name}"))
        return obj

    def window(self, fields: dict, where: str) -> WindowState:
        if not isinstance(fields, dict) or list(fields) != list(WindowState.SNAPSHOT_FIELDS):
            raise SnapshotError(f"{where}: its fields are not the window's snapshot fields")
        values = {name: self.value(v, f"{where}.{name}") for name, v in fields.items()}
        m = self.model
        return WindowState.restore(m.net, m.consts, m.tie_rel, m.tie_growth, values)


def _check_format(meta: Any) -> None:
    """SnapshotFormatError unless the file is of this engine's file format, state format and fields."""
    if not isinstance(meta, dict):
        raise SnapshotError("malformed metadata")
    if meta.get("format") != FORMAT_VERSION:
        raise SnapshotFormatError(f"format {meta.get('format')!r}, this engine reads {FORMAT_VERSION}")
    if meta.get("state_format") != STATE_FORMAT or meta.get("fields") != list(WindowState.SNAPSHOT_FIELDS):
        raise SnapshotFormatError(
            f"state format {meta.get('state_format')!r} with other fields, this engine reads {STATE_FORMAT}"
        )


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
            meta = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack raises several types on bad input
            raise SnapshotError(f"unreadable metadata ({type(e).__name__}: {e})") from None
        _check_format(meta)
        if meta.get("fingerprint") != fingerprint(model):
            raise SnapshotError("written for a different model (fingerprint mismatch)")
        if meta.get("key") != key:
            raise SnapshotError("written for other tokens (key mismatch)")
        if meta.get("layout") != reference_layout(model):
            raise SnapshotError("written by an engine with another state layout")
        blob = meta.get("blob_bytes")
        if not isinstance(blob, int) or len(head) + meta_len + blob != size:
            raise SnapshotError(f"{size} bytes on disk, {len(head) + meta_len}+{blob} expected (truncated or padded)")
        rd = _Reader(model, f, blob)
        try:
            windows = [rd.window(w, f"document.windows[{i}]") for i, w in enumerate(meta["windows"])]
        except SnapshotError:
            raise
        except Exception as e:  # a malformed entry: wrong types, unknown references, shapes torch refuses
            raise SnapshotError(f"malformed state ({type(e).__name__}: {e})") from None
        if rd.crc != meta.get("crc"):
            raise SnapshotError("tensor data checksum mismatch (corrupt)")
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
    m, shared = doc.model, {id(v): v for v in _shared(doc.model).values()}
    fields = [{name: getattr(w, name) for name in WindowState.SNAPSHOT_FIELDS} for w in doc.windows]
    out = IncrementalDocument.__new__(IncrementalDocument)
    out.model = m
    out.windows = [
        WindowState.restore(m.net, m.consts, m.tie_rel, m.tie_growth, f) for f in copy.deepcopy(fields, shared)
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
