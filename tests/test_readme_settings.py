"""The README's configuration table is the one the settings' own descriptions generate.

The table sits between two marker comments in README.md; vq_lsp.settings.settings_table_markdown
writes it from the dataclass fields' metadata, so a setting added, renamed or re-described in code
fails here until the README is regenerated.
"""

from __future__ import annotations

from pathlib import Path

from vq_lsp import settings

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"
REGENERATE = "python -c \"from vq_lsp.settings import settings_table_markdown as t; print(t(), end='')\""


def readme_table() -> str:
    text = README.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1, f"README.md needs one {START} ... {END} block"
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def test_readme_table_equals_the_generated_one():
    assert readme_table() == settings.settings_table_markdown(), (
        f"README.md's settings table is out of date: put the output of {REGENERATE} between the markers"
    )


def test_every_setting_has_a_row():
    names = [line.split("`")[1] for line in settings.settings_table_markdown().splitlines()[2:]]
    groups = {"diagnostics", "grammar"}  # nested groups, whose settings have rows of their own
    assert names == [name for name in settings.describe() if name not in groups]
    assert len(names) == len(set(names))
