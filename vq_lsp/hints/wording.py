"""What each hint says, in one place: the server's diagnostics (lsp.py), `vq-lsp check` (which
prints those) and `vq-lsp score`'s listing (scoring/output.py) word a hint with these functions,
so a writer reads the same message wherever the hint is shown."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .typos import WordFinding as Finding


def tone(label: str, probability: float) -> str:
    return f"{label} tone ({probability:.2f})"


def typo(finding: Finding) -> str:
    return f"possible typo: {finding.explain()}"


def surprise(word: str, nats: float) -> str:
    return f"unexpected {word!r} (surprise {nats:.1f}): possible typo or awkward wording"
