"""The slow tier's list (tests/conftest.py SLOW) names tests that exist, so a renamed or moved test
cannot drop out of it silently and slow the fast tier down."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SLOW

ROOT = Path(__file__).resolve().parents[1]


def test_every_slow_entry_names_an_existing_test_file_or_test():
    missing = []
    for entry in SLOW:
        path, _, name = entry.partition("::")
        file = ROOT / path
        if not file.is_file():
            missing.append(entry)
        elif name and not re.search(rf"^(async )?def {re.escape(name)}\(", file.read_text(), re.MULTILINE):
            missing.append(entry)
    assert not missing, missing
