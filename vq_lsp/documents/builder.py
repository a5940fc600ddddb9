"""Giving a document the engine state it lacks: kept, copied, restored or built window by window.

In order of cost: a document opened again without a close takes over its previous state when
its tokens agree (reuse.py); a document with the tokens of another open document's built state
gets a copy of it; a document whose tokens (or those its evicted state had) are in the snapshot
cache has its state read back (snapshots.py); only then is a state built, a dense pass per
window. A state in doubt is always built from the text. Each step is one short job on the
server's engine thread, and a window's pass runs on a thread of its own (server/language_server.py),
so documents take turns. Before anything is added, the memory budget makes room (memory.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import inference

from . import reuse
from .eligibility import Eligibility
from .memory import Budget
from .problems import Reason
from .shared import Shared
from .snapshots import restore_state
from .state import DocumentState, Message, Outcome

log = logging.getLogger(__name__)

THRASH_EVICTIONS = 3  # a document dropped for the budget this often, then rebuilt, is reported (once)


@dataclass(frozen=True)
class BuildNeed:
    """What a build takes from the budget at its peak, and whether its state is built lean: decided
    once, so that the room made and the state built agree."""

    bytes: int
    lean: bool


class StateBuilder:
    """Builds, copies, restores and hands over engine states, and counts how each was come by.
    `notify` takes what a build has to tell the user (the server shows it after the step)."""

    def __init__(
        self, shared: Shared, eligibility: Eligibility, budget: Budget, notify: Callable[[Message], None]
    ) -> None:
        self.shared = shared
        self.eligibility = eligibility
        self.budget = budget
        self.notify = notify
        self.builds = 0  # states built with a dense pass (windows in turn) since start
        self.reused = 0  # states taken over or copied from a live state with the same tokens instead

    def take_over(self, st: DocumentState) -> None:
        """A document opened again without a close, its tokens known now: it keeps its previous
        state (or half-built state) if the tokens agree."""
        previous = st.take_previous()
        if previous is not None and st.problem is None and st.doc is None and previous.take_over(st):
            self.reused += 1
            log.info("kept the state of %s: opened again with the same tokens", st.uri)

    def build_step(self, uri: str) -> tuple[int, int]:
        """Build one more window of a document's missing state; (windows built, windows in all).
        Done when both are equal (also when there is nothing to build)."""
        builder = self.next_window(uri)
        if isinstance(builder, tuple):
            return builder
        builder.step()
        return self.finish_window(uri, builder)

    def next_window(self, uri: str) -> inference.DocumentBuilder | tuple[int, int]:
        """The builder whose next window is to be built, or (windows built, windows in all) when
        nothing is left to build (copied, restored from a snapshot, or no state wanted).

        The server builds the window itself on a thread of its own (`DocumentBuilder.step` only
        reads the model and writes the builder), then hands it to `finish_window` here."""
        model = self.shared.model
        st = self.shared.states.get(uri)
        if st is None or st.doc is not None or st.problem is not None or st.tracked is None or model is None:
            if st is not None:
                st.finish_build()
            return 1, 1
        if st.builder is None and self._copy_live_state(st):
            return 1, 1
        if st.builder is None and restore_state(self.shared.snapshots, model, st, self.shared.settings):
            self.budget.touch(st)
            return 1, 1
        if st.builder is None or st.builder.model is not model:
            # room for the whole state before its first window: half-built states count too
            need = self._build_need(st)
            self.budget.make_room(keep=st, need=need.bytes)
            self._report_thrashing(st)
            st.start_build(inference.DocumentBuilder(model, st.tracked.ids, lean=need.lean))
            self.builds += 1
            log.info("building the state of %s (%d tokens)", uri, len(st.tracked.ids))
        return st.builder

    def finish_window(self, uri: str, b: inference.DocumentBuilder) -> tuple[int, int]:
        """After a window of `b` was built: hand the state over when it is complete."""
        st = self.shared.states.get(uri)
        if st is None or st.builder is not b:  # closed, dropped or edited into a problem meanwhile
            return b.progress if st is not None and st.builder is not None else (1, 1)
        if not b.done:
            return b.progress
        st.finish_build()
        doc = b.document()
        if b.ids != st.tracked.ids:  # edited while it was being built: catch up incrementally
            doc.apply(inference.diff(b.ids, st.tracked.ids))
        cost = {"rebuild_seconds": time.perf_counter() - st.build_started, "tokens": len(st.tracked.ids)}
        st.hand_over(doc, cost=cost)
        self.budget.touch(st)
        return len(b.bounds), len(b.bounds)

    def make_room(self, uri: str) -> bool:
        """Before a document's build or restore starts: drop least recently used states until its
        whole estimated state fits the budget. The server then waits for their snapshots to be
        written (which releases them) before the first window, so the dropped states and the new
        one are never in memory together (RSS peaked a whole long document over the budget).
        True when room is still missing only because a state just built waits for its hints
        (spared until then): the server waits for them, then asks again."""
        st = self.shared.states.get(uri)
        if st is None or st.doc is not None or st.builder is not None or st.problem is not None:
            return False
        if st.tracked is None or self.shared.model is None:
            return False
        need = self._build_need(st).bytes
        self.budget.make_room(keep=st, need=need)
        return self.budget.waits_for_hints(st, need)

    def _build_need(self, st: DocumentState) -> BuildNeed:
        """The room a build takes: its whole state, and its largest window's pass temporaries
        (without them, the resident memory rose about 120 MiB over the budget while a long
        document was built beside other states). Under the "auto" layout a build whose full state
        would not fit what the budget leaves the states even alone leaves out the layer outputs."""
        model, ids = self.shared.model, st.tracked.ids
        full = inference.estimate_build_bytes(model, ids)
        if model.layout != "auto" or full <= self.budget.state_budget_bytes():
            return BuildNeed(full, lean=False)
        return BuildNeed(inference.estimate_build_bytes(model, ids, lean=True), lean=True)

    def _copy_live_state(self, st: DocumentState) -> bool:
        """Give `st` a copy of another open document's state with exactly its tokens (the same
        text open under two names) instead of building one: a copy costs a memory copy, a build
        a dense pass per window."""
        source = reuse.live_twin(self.shared.states.values(), st, self.shared.model)
        if source is None:
            return False
        self.budget.make_room(keep=st, need=source.doc.state_bytes(), spare=source.uri)
        doc, cost = reuse.copy_state(source.doc)
        st.hand_over(doc, cost=cost)
        self.reused += 1
        self.budget.touch(st)
        log.info("copied the state of %s for %s: the same tokens", source.uri, st.uri)
        return True

    def _report_thrashing(self, st: DocumentState) -> None:
        """Say once that the budget keeps dropping a document that is then rebuilt."""
        if st.evictions >= THRASH_EVICTIONS and st.report_thrashing_once():
            budget_mb = self.shared.settings.memory_budget_mb
            self.notify(
                Message(
                    "warning",
                    (
                        f"vq-lsp: {st.uri} was dropped for the memory budget and rebuilt {st.evictions} times; raise "
                        f"memoryBudgetMb (now {budget_mb:g}) to keep the open documents' states"
                    ),
                )
            )

    def ensure(self, st: DocumentState, out: Outcome) -> None:
        """Build what the document lacks in one go (requests; the server usually builds it
        beforehand, window by window, with build_step)."""
        self.eligibility.check(st, out)
        if st.problem:
            return
        while st.doc is None:
            self.build_step(st.uri)
        self.budget.touch(st)

    def ready(self, uri: str) -> DocumentState:
        """The state of an open document with its engine state built (rebuilt if it was dropped)."""
        st = self.shared.states.get(uri)
        if st is None:
            raise KeyError(f"{uri} is not open")
        self.ensure(st, Outcome())
        if st.doc is None:
            no_model = st.problem is not None and st.problem.reason is Reason.NO_MODEL
            reason = self.shared.model_error if no_model else (st.out_of_sync or st.problem)
            raise LookupError(f"no scores for {uri}: {reason}")
        return st

    def drop(self, uri: str) -> None:
        """Forget a document's tokens and engine state (kept: its text); rebuilt on next use."""
        st = self.shared.states.get(uri)
        if st is not None:
            st.forget_state()
            st.mark_in_doubt()
