"""The settings' documentation written from their fields' own metadata: `describe` for editor
manifests and the README's configuration table (tests/test_readme_settings.py)."""

from __future__ import annotations

import dataclasses
from typing import Any, get_type_hints

from .fields import DiagnosticSettings, GrammarSettings, Settings
from .parsing import camel


def describe() -> dict[str, str]:
    """camelCase setting name -> its documentation (for README/extension manifests)."""
    out = {}
    for f in dataclasses.fields(Settings):
        out[camel(f.name)] = f.metadata["doc"]
    for f in dataclasses.fields(DiagnosticSettings):
        out["diagnostics." + camel(f.name)] = f.metadata["doc"]
    for f in dataclasses.fields(GrammarSettings):
        out["grammar." + camel(f.name)] = f.metadata["doc"]
    return out


def _default_text(f: dataclasses.Field) -> str:
    """A field's default as a client writes it in JSON settings."""
    import json

    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    if isinstance(value, tuple):
        value = list(value)
    return "`" + json.dumps(value) + "`"


def _number_text(value: float) -> str:
    """A range bound as a reader reads it: 10,000,000 rather than 1e+07."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _allowed_text(typ: Any, meta: dict) -> str:
    """The values a field accepts: its choices (cuda:N for the numbered devices), its range, or its type."""
    import json

    if meta.get("choices") is not None:
        shown = [c for c in meta["choices"] if c is None or not c.startswith("cuda:")]
        if len(shown) < len(meta["choices"]):
            shown.append("cuda:N")
        return ", ".join("`" + json.dumps(c).strip('"') + "`" for c in shown)
    if meta.get("lo") is not None and meta.get("hi") is not None:
        return f"{_number_text(meta['lo'])} to {_number_text(meta['hi'])}"
    if typ is bool:
        return "`true`, `false`"
    if "tuple" in str(typ):
        return "list of strings"
    if "dict" in str(typ):
        return "table of names to `true`, `false`"
    return "string or `null`"


def settings_table_markdown() -> str:
    """The README's configuration table, one row per setting, written from the fields' own metadata.

    tests/test_readme_settings.py fails when the README's copy differs, so a new or changed setting
    reaches the documentation with the code."""
    rows = ["| setting | default | accepted | what it does |", "|---|---|---|---|"]
    for prefix, cls in (("", Settings), ("diagnostics.", DiagnosticSettings), ("grammar.", GrammarSettings)):
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                continue
            doc = f.metadata["doc"].replace("|", "\\|")
            accepted = _allowed_text(hints[f.name], f.metadata)
            rows.append(f"| `{prefix}{camel(f.name)}` | {_default_text(f)} | {accepted} | {doc} |")
    return "\n".join(rows) + "\n"
