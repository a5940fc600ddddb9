"""One open document's state, and what processing a batch of its events returns to the server.

A document always keeps its text (the editor's truth, needed to apply the next change). When
the model is loaded and the document is eligible it also keeps its tokens (`TrackedText`), an
`IncrementalDocument` (the expensive part, dropped and rebuilt under the memory budget) and
the hint material of its last hints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import inference

from ..hints.material import HintMaterial
from .problems import Problem, Reason
from .textsync import TrackedText

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
    """One open document. Its fields are read anywhere in documents/, but changed through the
    methods below: each is one transition (an edit, a pause, a state handed over, hints chosen), so
    what goes together (a state in doubt is counted as a rebuild, an edit forgets the hints of the
    old text) cannot be half done from another module."""

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
    outputs_dropped: int = 0  # times the memory budget dropped its state's layer outputs ("auto" layout)
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

    # ----------------------------------------------------------------- its engine state
    def hand_over(
        self,
        doc: inference.IncrementalDocument | None = None,
        *,
        builder: inference.DocumentBuilder | None = None,
        cost: dict | None = None,
    ) -> None:
        """It was just given a state (built, restored, copied or kept) or a half-built one (kept): until
        hints are chosen from it, the memory budget spares it (memory.awaiting_hints)."""
        if doc is not None:
            self.doc, self.in_doubt = doc, False
        if builder is not None:
            self.builder, self.build_started = builder, time.perf_counter()
        if cost is not None:
            self.last_cost = cost
        self.unhinted_version = None if self.material_current() else self.version

    def recomputed(self, doc: inference.IncrementalDocument) -> None:
        """Its state was replaced by a dense pass over its new tokens (the fullRecompute setting)."""
        self.doc = doc

    def start_build(self, builder: inference.DocumentBuilder) -> None:
        """A build of its whole state begins, window by window."""
        self.builder, self.build_started = builder, time.perf_counter()

    def finish_build(self) -> inference.DocumentBuilder | None:
        """The build is over (done, or nothing to build): its builder, which it no longer holds."""
        builder, self.builder = self.builder, None
        return builder

    def restored(self, doc: inference.IncrementalDocument, cost: dict) -> None:
        """Its state was read back from a snapshot instead of rebuilt."""
        self.restores += 1
        self.hand_over(doc, cost=cost)

    def updated(self, cost: dict) -> None:
        """The engine brought its state through an edit."""
        self.last_cost = cost
        self.updates += 1

    def take_previous(self) -> Reusable | None:
        """Its state from before it was opened again, handed out once (reuse.py)."""
        previous, self.previous = self.previous, None
        return previous

    def report_thrashing_once(self) -> bool:
        """True the first time it is asked: that the budget keeps dropping it is said once."""
        first, self.thrash_reported = not self.thrash_reported, True
        return first

    def touched(self) -> None:
        """It was just used (a request, a build): the budget drops it after the less recently used."""
        self.last_touch = time.monotonic()

    def snapshot_left(self, ids: list[int] | None) -> None:
        """Its state was left in the snapshot cache with these tokens (None: none, or read back)."""
        self.snapshot_ids = ids

    def drop_outputs(self) -> int:
        """The memory budget dropped its state's layer outputs (its state stays, lean); the bytes freed."""
        freed = self.doc.drop_outputs() if self.doc is not None else 0
        self.outputs_dropped += bool(freed)
        return freed

    def evict(self) -> None:
        """The memory budget dropped its engine state (its snapshot was saved first)."""
        self.doc = None
        self.evictions += 1

    def refuse(self, problem: Problem | None, *, keep_tokens: bool) -> bool:
        """Record why it cannot have a state now (None: it can); its state and build go when it
        cannot, its tokens too unless `keep_tokens`. True when the problem changed (said once)."""
        if problem is not None:
            if not keep_tokens:
                self.tracked = None
            self.doc, self.builder = None, None
        if problem is None or problem.reason is not Reason.TOO_LONG:
            self.tokens_at_least = None
        changed, self.problem = problem != self.problem, problem
        return changed

    def mark_in_doubt(self, *, tokens_too: bool = False) -> None:
        """Its engine state can no longer be trusted (the engine refused an edit, its tokens disagree
        with the text's, verify() failed, processing it failed): dropped and counted as a rebuild; the
        next build is a dense pass from the text, never a snapshot. tokens_too: its tokens are in doubt
        as well, and are taken from the text again."""
        self.doc, self.in_doubt = None, True
        if tokens_too:
            self.tracked = None
        self.rebuilds += 1

    def forget_state(self) -> None:
        """Drop tokens, engine state, build and hint material (the text stays): rebuilt on next use."""
        self.tracked, self.doc, self.problem, self.builder, self.material = None, None, None, None, None
        self.tokens_at_least = None

    # ----------------------------------------------------------------- its text
    def edited(self, version: int | None) -> None:
        """An edit leads to `version`: its hints and their memory are for an older text now."""
        self.version, self.material, self.settled, self.published = version, None, False, None
        self.last_edit = self.last_touch = time.monotonic()  # an edit is use: the budget spares it

    def pause(self, why: str, version: int | None = None) -> None:
        """A change was lost (the one to `version`, when known): its text is in doubt, so everything
        built from it goes, and incremental changes are ignored until the editor sends the full text
        (`out_of_sync` says why)."""
        if version is not None:
            self.version = version
        self.out_of_sync, self.in_doubt = why, True
        self.tracked, self.doc, self.problem, self.material = None, None, None, None

    def resync(self) -> None:
        """The editor sent the full text: changes are taken again, and its tokens counted again."""
        self.out_of_sync, self.tokens_at_least = None, None

    def tokenized(self, tracked: TrackedText) -> None:
        """Its tokens are kept from now on (edits keep them in step with the text)."""
        self.tracked, self.text_lines = tracked, None

    def counted(self, tokens: int, counted_all: bool) -> None:
        """Too long: `tokens` is a lower bound of its token count (all of them when `counted_all`)."""
        self.tokens_at_least, self.counted_all = tokens, counted_all

    def forget_tokens(self) -> None:
        """Its new text is checked in full (an edit brought in what may be unreadable): its tokens,
        state and count go until then."""
        self.tracked, self.doc, self.tokens_at_least = None, None, None

    def set_text(self, text: str, lines: list[int] | None, tokens_lost: int = 0) -> None:
        """Its text after an edit, with the line starts of a text kept without tokens (else None);
        `tokens_lost`: at most this many tokens went (a too-long count stays a lower bound)."""
        self.text, self.text_lines = text, lines
        if self.tokens_at_least is not None:
            self.tokens_at_least -= tokens_lost

    # ----------------------------------------------------------------- its hints
    def settle_requested(self, cost: dict | None = None) -> None:
        """It is at rest (`cost`: what bringing its state to rest cost, if it was not already): its
        next hints are chosen from exact scores (events.Settle)."""
        if cost is not None:
            self.last_cost = cost
        self.settling = True

    def take_settling(self, pending: bool) -> bool:
        """Whether these hints settle it (exact scores, republished only where they changed): a
        Settle was processed and no edit waits. Asked once per choice of hints."""
        settling, self.settling = self.settling and not pending, False
        return settling

    def hinted(self, material: HintMaterial) -> None:
        """Hints are about to be chosen from `material` (what later hints are re-chosen from)."""
        self.material = material

    def material_current(self) -> bool:
        """Whether its hint material is that of its current version."""
        return self.material is not None and self.material.version == self.version

    def publish(self, diagnostics: list, *, settling: bool) -> list | None:
        """The diagnostics to publish for its own version, remembered; after settling, None when they
        are those published already (nothing changed at rest)."""
        if settling:
            self.settled = self.doc is not None
            if diagnostics == self.published:
                return None
        self.published = diagnostics
        return diagnostics


@dataclass
class Reusable:
    """The state (or half-built state) a document had before it was opened again."""

    ids: list[int]
    doc: inference.IncrementalDocument | None
    builder: inference.DocumentBuilder | None

    @classmethod
    def of(cls, st: DocumentState, model: inference.LoadedModel | None) -> Reusable | None:
        if model is None or st.in_doubt or st.problem is not None:
            return None
        if st.doc is not None and st.doc.model is model:
            return cls(st.doc.token_ids, st.doc, None)
        if st.builder is not None and st.builder.model is model:
            return cls(st.builder.ids, None, st.builder)
        return None

    def take_over(self, st: DocumentState) -> bool:
        """Give `st` this state if its tokens are the same; False otherwise (it is built as usual)."""
        if st.in_doubt or st.tracked is None or st.tracked.ids != self.ids:
            return False
        st.hand_over(self.doc, builder=self.builder)
        return True
