"""Server settings: nested keyword-only dataclasses, read from a client's JSON.

Clients send camelCase (`modelPath`, `diagnostics.sentimentThreshold`); snake_case is accepted
too. Settings may come bare or under a `vqLsp` key (VS Code's section). A value of the wrong
type or out of range falls back to its default, and `parse` returns one warning per such
value for the server to show the user. Unknown keys are reported the same way.

The fields are in fields.py, reading a client's JSON in parsing.py, the documentation written
from the fields in table.py.
"""

from .fields import (
    NON_WORD_THRESHOLD,
    REAL_WORD_THRESHOLD,
    SECTION,
    SEVERITIES,
    DiagnosticSettings,
    GrammarSettings,
    Settings,
    load_options,
)
from .parsing import parse
from .table import describe, settings_table_markdown

__all__ = [
    "NON_WORD_THRESHOLD",
    "REAL_WORD_THRESHOLD",
    "SECTION",
    "SEVERITIES",
    "DiagnosticSettings",
    "GrammarSettings",
    "Settings",
    "describe",
    "load_options",
    "parse",
    "settings_table_markdown",
]
