"""A client's JSON read into the settings: camelCase or snake_case names, a value of the wrong
type or out of range replaced by its default with a warning, unknown keys reported."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, get_type_hints

from .fields import SECTION, Settings


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _coerce(value: Any, typ: Any, meta: dict) -> Any:
    """The value as `typ`, or raise ValueError with a reason."""
    if dataclasses.is_dataclass(typ):
        raise AssertionError("nested dataclasses are parsed by _parse")
    if meta.get("choices") is not None and value not in meta["choices"]:
        raise ValueError(f"must be one of {[c for c in meta['choices'] if c is None or not c.startswith('cuda:')]}")
    text = str(typ)
    if typ is bool:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
    elif typ in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (typ is int and value != int(value)):
            raise ValueError(f"must be a{'n integer' if typ is int else ' number'}")
        value = typ(value)
        if (meta["lo"] is not None and value < meta["lo"]) or (meta["hi"] is not None and value > meta["hi"]):
            raise ValueError(f"must lie in [{meta['lo']}, {meta['hi']}]")
    elif "dict" in text:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, bool) for k, v in value.items()):
            raise ValueError("must be a table of names to true or false")
        value = dict(value)
    elif "tuple" in text:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError("must be a list of strings")
        value = tuple(value)
    elif "str" in text:
        if value is not None and not isinstance(value, str):
            raise ValueError("must be a string or null")
        if value == "":
            value = None
    return value


def _parse(cls, data: Any, prefix: str, warnings: list[str], base):
    if not isinstance(data, dict):
        warnings.append(f"{prefix or 'settings'}: expected an object, got {type(data).__name__}; using defaults")
        return base
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in data.items():
        name = snake(key) if key not in fields else key
        where = f"{prefix}{camel(name)}"
        if name not in fields:
            warnings.append(f"{prefix}{key}: unknown setting, ignored")
            continue
        typ, f = hints[name], fields[name]
        if dataclasses.is_dataclass(typ):
            values[name] = _parse(typ, value, where + ".", warnings, getattr(base, name))
            continue
        try:
            values[name] = _coerce(value, typ, f.metadata)
        except ValueError as e:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            warnings.append(f"{where} = {value!r} is invalid ({e}); using the default {default!r}")
            values[name] = default
    return dataclasses.replace(base, **values)


def parse(data: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's JSON (None or {} gives `base` or the defaults) and the warnings."""
    base = base if base is not None else Settings()
    warnings: list[str] = []
    if data is None:
        return base, warnings
    if isinstance(data, dict) and SECTION in data:
        data = data[SECTION]
        if data is None:
            return base, warnings
    return _parse(Settings, data, "", warnings, base), warnings
