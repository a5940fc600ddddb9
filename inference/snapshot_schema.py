"""The closed schema of a snapshot file: typed records, read and written field by field.

A file's metadata is a SnapshotMeta, and each of its windows the engine's WindowRecord
(engine/record.py); a tensor or array of a record is a BlobEntry in the metadata, its bytes after
it. Reading takes exactly the fields of those records: an unknown or a missing field, or a value
of another kind than its field's, raises SnapshotError naming it, so that a file is either read
as written by this engine or refused (the caller drops it and rebuilds from the text). Nothing
outside these records is ever written: a window's other attributes are the model's, re-attached
on restore, or remade from the record.
"""

from __future__ import annotations

import functools
import math
import types
import typing
import zlib
from dataclasses import dataclass, fields
from typing import Any, BinaryIO

import numpy as np
import torch

from .engine import RECORD_FIELDS, WindowRecord


class SnapshotError(ValueError):
    """A snapshot that cannot be written, or cannot be trusted when read: drop it and rebuild."""


class SnapshotFormatError(SnapshotError):
    """A snapshot written in another format (an older or newer engine): never read, rebuild instead."""


def _kind(tp: Any) -> tuple[str, bool]:
    """(kind, may be None) of a record field's type: "int", "str", "dict", a list of one of those
    ("ints", "strs", "dicts"), "tensor" or "array"."""
    args = typing.get_args(tp)
    optional = isinstance(tp, types.UnionType) and type(None) in args
    if optional:
        (tp,) = [a for a in args if a is not type(None)]
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp)
        return {int: "ints", str: "strs", dict: "dicts"}[item], optional
    kinds = {int: "int", str: "str", dict: "dict", torch.Tensor: "tensor", np.ndarray: "array"}
    return kinds[typing.get_origin(tp) or tp], optional


@functools.cache
def field_kinds(cls: type) -> dict[str, tuple[str, bool]]:
    """Field name -> (kind, may be None) of a record class, in field order."""
    hints = typing.get_type_hints(cls)
    return {f.name: _kind(hints[f.name]) for f in fields(cls)}


def closed(cls: type, data: Any, where: str) -> dict:
    """`data` as the fields of record class `cls`: exactly those, or SnapshotError naming the first
    unknown or missing one."""
    names = [f.name for f in fields(cls)]
    if not isinstance(data, dict):
        raise SnapshotError(f"{where}: a {type(data).__name__} where a {cls.__name__} record was expected")
    unknown = [k for k in data if k not in names]
    if unknown:
        raise SnapshotError(f"{where}: unknown field {unknown[0]!r} (a {cls.__name__} holds {', '.join(names)})")
    missing = [n for n in names if n not in data]
    if missing:
        raise SnapshotError(f"{where}: missing field {missing[0]!r} of a {cls.__name__}")
    return data


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def check_plain(kind: str, v: Any, where: str) -> Any:
    """A value of a plain kind (int, ints, str, strs, dict) as stored, or SnapshotError."""
    ok = {
        "int": lambda: _is_int(v),
        "ints": lambda: isinstance(v, list) and all(_is_int(x) for x in v),
        "str": lambda: isinstance(v, str),
        "strs": lambda: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "dicts": lambda: isinstance(v, list) and all(isinstance(x, dict) for x in v),
        "dict": lambda: isinstance(v, dict),
    }[kind]()
    if not ok:
        raise SnapshotError(f"{where}: a {type(v).__name__} where the schema holds {kind}")
    return int(v) if kind == "int" else [int(x) for x in v] if kind == "ints" else v


def parse_plain(cls: type, data: Any, where: str) -> Any:
    """A record of plain fields (no tensors) from its metadata: exactly its fields, each of its kind."""
    closed(cls, data, where)
    return cls(
        **{name: check_plain(kind, data[name], f"{where}.{name}") for name, (kind, _) in field_kinds(cls).items()}
    )


@dataclass(frozen=True)
class BlobEntry:
    """A tensor or an array of a record: what it is, and how many of the bytes after the metadata
    (in record order) are its."""

    kind: str  # "tensor" (torch) or "array" (numpy)
    dtype: str  # a torch dtype's name ("float64"), or a numpy dtype's str ("<i8")
    shape: list[int]
    nbytes: int


@dataclass(frozen=True)
class SnapshotMeta:
    """The metadata of a snapshot file (msgpack), a closed record of these fields."""

    format: int  # the file layout (snapshot.FORMAT_VERSION)
    state_format: int  # the window record's (engine.STATE_FORMAT)
    fields: list[str]  # the window record's fields, in order (engine.RECORD_FIELDS)
    key: str  # what the document is stored under: model fingerprint and token ids
    fingerprint: str  # the model's
    layout: dict  # field -> (kind, dtype, ndim) of a window this engine builds for the model
    windows: list[dict]  # each window's WindowRecord: plain values inline, BlobEntry fields for the rest
    blob_bytes: int  # the bytes after the metadata
    crc: int  # CRC-32 of those bytes

    @classmethod
    def parse(cls, data: Any, file_format: int, state_format: int) -> SnapshotMeta:
        """The metadata of a file of this format, checked field by field. SnapshotFormatError for a
        file of another format (its versions or its window record's fields differ), SnapshotError
        for anything else that is not this record."""
        if not isinstance(data, dict):
            raise SnapshotError("malformed metadata")
        if data.get("format") != file_format:
            raise SnapshotFormatError(f"format {data.get('format')!r}, this engine reads {file_format}")
        if data.get("state_format") != state_format or data.get("fields") != list(RECORD_FIELDS):
            raise SnapshotFormatError(
                f"state format {data.get('state_format')!r} with other fields, this engine reads {state_format}"
            )
        return parse_plain(cls, data, "metadata")


RECORD_KINDS = field_kinds(WindowRecord)


def raw_bytes(t: torch.Tensor) -> np.ndarray:
    """A tensor's bytes (a uint8 array sharing memory with a contiguous CPU copy)."""
    return t.detach().reshape(-1).contiguous().cpu().view(torch.uint8).numpy()


class BlobWriter:
    """Turns WindowRecords into their metadata, collecting the bytes of their tensors and arrays."""

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.crc = 0

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.chunks)

    def _blob(self, kind: str, dtype: str, shape: list[int], data: np.ndarray) -> dict:
        self.chunks.append(data)
        self.crc = zlib.crc32(data, self.crc)
        return vars(BlobEntry(kind, dtype, shape, data.nbytes))

    def window(self, record: WindowRecord, where: str) -> dict:
        """A window's record as metadata; SnapshotError for a value of another kind than its field's,
        or a tensor sharing memory with another (it would come back as a copy, no longer tied to it)."""
        out, storages = {}, {}
        for name, (kind, optional) in RECORD_KINDS.items():
            v, at = getattr(record, name), f"{where}.{name}"
            if v is None and optional:
                out[name] = None
            elif kind == "tensor":
                out[name] = self._tensor(v, at, storages, name)
            elif kind == "array":
                if not isinstance(v, np.ndarray) or v.dtype.hasobject:
                    raise SnapshotError(f"{at}: a {type(v).__name__} where the schema holds a numpy array of numbers")
                data = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
                out[name] = self._blob("array", v.dtype.str, list(v.shape), data)
            else:
                out[name] = check_plain(kind, v, at)
        return out

    def _tensor(self, v: Any, where: str, storages: dict[int, str], name: str) -> dict:
        if not isinstance(v, torch.Tensor):
            raise SnapshotError(f"{where}: a {type(v).__name__} where the schema holds a tensor")
        if v.requires_grad:
            raise SnapshotError(f"{where}: a tensor that requires grad")
        if v.nelement():
            ptr = v.untyped_storage().data_ptr()
            if ptr in storages:
                raise SnapshotError(
                    f"{where}: shares memory with {storages[ptr]}; written as data it would come back as a copy"
                )
            storages[ptr] = name
        return self._blob("tensor", str(v.dtype).removeprefix("torch."), list(v.shape), raw_bytes(v))


class BlobReader:
    """Reads WindowRecords from their metadata and the bytes after it, checking sizes before
    allocating and a CRC-32 over every byte read."""

    def __init__(self, f: BinaryIO, blob_bytes: int, device: torch.device) -> None:
        self.f, self.left, self.device = f, blob_bytes, device
        self.crc = 0

    def window(self, data: Any, where: str) -> WindowRecord:
        closed(WindowRecord, data, where)
        values = {}
        for name, (kind, optional) in RECORD_KINDS.items():
            v, at = data[name], f"{where}.{name}"
            if v is None and optional:
                values[name] = None
            elif kind in ("tensor", "array"):
                values[name] = self._blob(kind, v, at)
            else:
                values[name] = check_plain(kind, v, at)
        return WindowRecord(**values)

    def _blob(self, kind: str, v: Any, where: str) -> torch.Tensor | np.ndarray:
        entry = parse_plain(BlobEntry, v, where)
        shape = entry.shape
        if entry.kind != kind or min(shape, default=0) < 0:
            raise SnapshotError(f"{where}: a {entry.kind!r} entry (shape {shape}) in a field of kind {kind!r}")
        if kind == "tensor":
            dtype = getattr(torch, entry.dtype, None)
            if not isinstance(dtype, torch.dtype):
                raise SnapshotError(f"{where}: unknown dtype {entry.dtype!r}")
            self._expect(math.prod(shape) * torch.empty(0, dtype=dtype).element_size(), entry, where)
            t = torch.empty(shape, dtype=dtype)
            self._read_into(t.view(-1).view(torch.uint8).numpy(), where)
            return t if self.device.type == "cpu" else t.to(self.device)
        try:
            np_dtype = np.dtype(entry.dtype)
        except TypeError:
            raise SnapshotError(f"{where}: unknown dtype {entry.dtype!r}") from None
        if np_dtype.hasobject:
            raise SnapshotError(f"{where}: an array of Python objects")
        self._expect(math.prod(shape) * np_dtype.itemsize, entry, where)
        arr = np.empty(shape, dtype=np_dtype)
        self._read_into(arr.reshape(-1).view(np.uint8), where)
        return arr

    def _expect(self, nbytes: int, entry: BlobEntry, where: str) -> None:
        """Check an entry's size before allocating it: its shape must match its byte count, and
        every entry together must fit in the bytes the file holds."""
        if nbytes != entry.nbytes:
            raise SnapshotError(f"{where}: {entry.nbytes} bytes do not hold a {entry.dtype} of shape {entry.shape}")
        self.left -= nbytes
        if self.left < 0:
            raise SnapshotError(f"{where}: more tensor bytes announced than the file holds")

    def _read_into(self, data: np.ndarray, where: str) -> None:
        view = memoryview(data).cast("B")
        got = self.f.readinto(view)
        if got != len(view):
            raise SnapshotError(f"truncated in {where}: {got} of {len(view)} bytes")
        self.crc = zlib.crc32(view, self.crc)
