"""The row `vq-lsp score` writes for one revision, as typed records.

A row holds the document's scores, each prose paragraph's, and the hints an editor would show
under the writer's conventions (tones, typos, grammar and, when asked for, unlikely words), with
the revision's size and cost. Scorers make
them (scorer.py, and the same rows from Ray workers), writers read their fields (output.py), and
`as_json` gives the JSONL form: field order, names and the optional `verified` as the format has
always had them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def mac_ratio(incremental_macs: int, dense_macs: int) -> str:
    """The MACs of scoring incrementally against scoring from scratch, worded the way it went: "2.0x
    fewer", or "1.1x more" when each revision replaced most of the one before (a folder of unrelated
    files is read as the versions of one document)."""
    if incremental_macs <= dense_macs:
        return f"{dense_macs / max(1, incremental_macs):.1f}x fewer"
    return f"{incremental_macs / max(1, dense_macs):.1f}x more"


@dataclass(frozen=True)
class ParagraphRow:
    """A prose paragraph's scores: its first line (0-based), tokens, words, class probabilities."""

    line: int
    tokens: int
    words: int
    scores: dict[str, float]


@dataclass(frozen=True)
class WordRow:
    """An unlikely word (a surprise hint) where it starts (0-based line and column)."""

    line: int
    column: int
    text: str
    surprise: float
    message: str  # as the server words it (hints/wording.py)


@dataclass(frozen=True)
class TypoRow:
    """A typo or confused-word hint where it starts, with the likelier words the server offers."""

    line: int
    column: int
    text: str
    kind: str
    surprise: float
    gain: float
    fixes: list[str]
    message: str  # as the server words it (hints/wording.py)


@dataclass(frozen=True)
class ToneRow:
    """A paragraph's tone as the server shows it (its first line, 0-based)."""

    line: int
    label: str
    message: str


@dataclass(frozen=True)
class GrammarRow:
    """A grammar lint the server shows (Harper's, under the writer's rules), where it starts."""

    line: int
    column: int
    text: str
    message: str


@dataclass(frozen=True)
class RevisionRow:
    """One revision scored as an edit of its document's previous one; `scores` is None for an
    empty revision (nothing to score: the next one opens afresh)."""

    doc: str
    revision: str
    index: int
    tokens: int
    changed_tokens: int = 0
    scores: dict[str, float] | None = None
    paragraphs: list[ParagraphRow] = field(default_factory=list)
    surprises: list[WordRow] = field(default_factory=list)
    typos: list[TypoRow] = field(default_factory=list)
    tones: list[ToneRow] = field(default_factory=list)  # the tone hints shown (paragraphs: every score)
    grammar: list[GrammarRow] = field(default_factory=list)
    incremental_macs: int = 0
    dense_macs: int = 0
    seconds: float = 0.0
    verified: bool | None = None  # with --verify: the codes equal a dense pass

    def as_json(self) -> dict:
        """The JSONL record: `type` first, `verified` only when the run verified."""
        out = {"type": "revision", **asdict(self)}
        if self.verified is None:
            del out["verified"]
        return out
