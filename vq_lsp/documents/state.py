"""One open document's state, and what processing a batch of its events returns to the server.

A document always keeps its text (the editor's truth, needed to apply the next change). When
the model is loaded and the document is eligible it also keeps its tokens (`TrackedText`), an
`IncrementalDocument` (the expensive part, dropped and rebuilt under the memory budget) and
the hint material of its last hints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import inference

from ..hints.material import HintMaterial
from .problems import Problem
from .textsync import TrackedText

if TYPE_CHECKING:
    from .reuse import Reusable

Level = Literal["error", "warning", "info"]


@dataclass
class Message:
    """A message for the user (the server shows it and logs it)."""

    level: Level
    text: str


@dataclass
class Outcome:
    """What a batch of events produced, for the server to send."""

    version: int | None = None
    diagnostics: list | None = None  # None: publish nothing; []: clear
    messages: list[Message] = field(default_factory=list)
    needs_build: bool = False  # the document wants a state it lacks: run build_step until it has one
    closed: bool = False


@dataclass
class DocumentState:
    uri: str
    language_id: str
    version: int | None
    text: str
    tracked: TrackedText | None = None
    doc: inference.IncrementalDocument | None = None
    builder: inference.DocumentBuilder | None = None  # a state being built window by window
    material: HintMaterial | None = None  # what the last hints were chosen from
    problem: Problem | None = None  # why the document gets no hints (reported once per change of problem)
    out_of_sync: str | None = None  # a rejected change: ignore incremental changes until full text
    last_cost: dict | None = None
    updates: int = 0
    rebuilds: int = 0
    evictions: int = 0
    restores: int = 0  # states read back from a snapshot instead of rebuilt
    snapshot_ids: list[int] | None = None  # tokens of the snapshot its evicted state left (restore, then edit)
    in_doubt: bool = False  # the next build is a dense pass from the text, never a snapshot
    last_touch: float = 0.0  # time.monotonic() of its last use (an open, an edit, a request, a build)
    last_edit: float = float("-inf")  # time.monotonic() of its last edit
    build_started: float = 0.0
    tokens_at_least: int | None = None  # too long: a lower bound of its token count (its tokens are not kept)
    counted_all: bool = True  # tokens_at_least was, when counted, all of its tokens (else counting stopped)
    text_lines: list[int] | None = None  # line starts of `text` while it has no tracked tokens (edits stay cheap)
    thrash_reported: bool = False  # said once that the budget keeps dropping and rebuilding it
    unhinted_version: int | None = None  # given a state at this version with no hints for it (memory.py)
    previous: Reusable | None = None  # its state before it was opened again, until its tokens are known
    settling: bool = False  # a Settle was processed: the next hints are chosen from exact scores
    settled: bool = False  # at rest, and its hints chosen from exact scores, since its last edit
    published: list | None = None  # the diagnostics of its last hints for its own version

    def bytes(self) -> int:
        """Memory its engine state holds: the built state, or the windows built so far."""
        if self.doc is not None:
            return self.doc.state_bytes()
        if self.builder is not None:
            return sum(w.state_bytes() for w in self.builder.windows)
        return 0

    def handed_over(self) -> None:
        """It was just given a state (built, restored, copied or kept): until hints are chosen
        from it, the memory budget spares it."""
        current = self.material is not None and self.material.version == self.version
        self.unhinted_version = None if current else self.version

    def mark_in_doubt(self, *, tokens_too: bool = False) -> None:
        """Its engine state can no longer be trusted (the engine refused an edit, its tokens disagree
        with the text's, verify() failed, processing it failed): dropped and counted as a rebuild; the
        next build is a dense pass from the text, never a snapshot. tokens_too: its tokens are in doubt
        as well, and are taken from the text again."""
        self.doc, self.in_doubt = None, True
        if tokens_too:
            self.tracked = None
        self.rebuilds += 1

    def pause(self, why: str) -> None:
        """A change was lost: its text is in doubt, so everything built from it goes, and incremental
        changes are ignored until the editor sends the full text (`out_of_sync` says why)."""
        self.out_of_sync, self.in_doubt = why, True
        self.tracked, self.doc, self.problem, self.material = None, None, None, None

    def forget_state(self) -> None:
        """Drop tokens, engine state, build and hint material (the text stays): rebuilt on next use."""
        self.tracked, self.doc, self.problem, self.builder, self.material = None, None, None, None, None
        self.tokens_at_least = None
