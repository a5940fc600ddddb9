"""The table of open documents: the events the server queues for a document, applied to its text.

A document always keeps its text (the editor's truth, needed to apply the next change); a
document with tokens has them kept in step with every edit, and one with a built state has the
state brought through the edit by the engine (updates.py) in the same job. Consecutive edits
become one text update and one engine update. After its events, a document is judged again
(eligibility.py), and the table says whether it now wants a state it lacks: the server then
builds one (builder.py) before choosing its hints (publisher.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from . import updates
from .eligibility import Eligibility
from .events import ChangeLost, Closed, Edited, Event, Opened, Refresh, SettingsChanged, Settle, merge_edits
from .memory import Budget
from .problems import text_problem
from .shared import Shared
from .snapshots import save_state
from .state import DocumentState, Message, Outcome, Reusable
from .textsync import Change, TextSyncError, apply_changes, tokens_lost_at_most

log = logging.getLogger(__name__)


class DocumentTable:
    """Applies each document's events to its text (and its state, when it has one), in order.

    `take_over(st)` gives a document opened again its previous state once its tokens are known
    (the builder's: it counts what was reused instead of built)."""

    def __init__(
        self,
        shared: Shared,
        eligibility: Eligibility,
        budget: Budget,
        take_over: Callable[[DocumentState], None],
    ) -> None:
        self.shared = shared
        self.eligibility = eligibility
        self.budget = budget
        self.take_over = take_over
        # bytes of whole-text copies made for documents kept as text alone (each edit of a text over
        # the token limit copies all of it): the server returns them to the OS (documents/heap.py)
        self.text_churn = 0

    def process(self, uri: str, events: Sequence[Event]) -> Outcome:
        """Apply events in order.

        `needs_build` says whether the document now wants a state it lacks; a SettingsChanged
        event alone asks for none when the hints can be re-chosen from the material of the
        current version.
        """
        out = Outcome()
        eager = False
        for ev in merge_edits(events):
            if isinstance(ev, Closed):
                self._close(uri)
                return Outcome(diagnostics=[], messages=out.messages, closed=True)
            eager = self._apply(uri, ev, out) or eager
        st = self.shared.states.get(uri)
        if st is None:
            return out
        out.version = st.version
        self.eligibility.check(st, out)
        if st.previous is not None:  # tokens are known now: take the previous state over if they agree
            self.take_over(st)
        if st.problem is None and st.doc is None:
            out.needs_build = eager or not st.material_current()
        return out

    def _apply(self, uri: str, ev: Event, out: Outcome) -> bool:
        """One event other than a close; True when it asks for a missing state at once."""
        states = self.shared.states
        st = states.get(uri)
        if isinstance(ev, Opened):
            self._open(uri, ev)
            return True
        if isinstance(ev, Edited):
            if st is None:
                out.messages.append(Message("error", f"vq-lsp: change for {uri}, which is not open; ignored"))
                return False
            st.edited(ev.version)
            self._change(st, ev.changes, out)
            states.move_to_end(uri)
            return True
        if isinstance(ev, ChangeLost):  # a change the server could not even read: the text is in doubt
            if st is not None:
                self._pause(st, ev.reason, out, ev.version)
        elif isinstance(ev, Refresh):
            return True
        elif isinstance(ev, Settle):
            if st is not None and st.version == ev.version and not st.settled:
                if (m := updates.settle(st)) is not None:
                    out.messages.append(m)
                    return True  # a state that failed to settle is rebuilt now
        elif isinstance(ev, SettingsChanged):
            self.budget.make_room()
        else:
            raise TypeError(f"unknown event {ev!r}")
        return False

    def _open(self, uri: str, ev: Opened) -> None:
        states = self.shared.states
        previous = states.get(uri)  # opened again without a close: its state may serve
        reusable = Reusable.of(previous, self.shared.model) if previous is not None else None
        states[uri] = DocumentState(
            uri, ev.language_id, ev.version, ev.text, last_touch=time.monotonic(), previous=reusable
        )

    def _close(self, uri: str) -> None:
        """Forget the document; its state goes to the snapshot cache."""
        self.eligibility.forget(uri)
        closed = self.shared.states.pop(uri, None)
        if closed is not None:
            self.shared.hint_caches.forget(closed.doc)
            save_state(self.shared.snapshots, closed, self.shared.settings)

    def _change(self, st: DocumentState, changes: list[Change], out: Outcome) -> None:
        if st.out_of_sync and all(c.range is not None for c in changes):
            return
        first_full = max((i for i, c in enumerate(changes) if c.range is None), default=None)
        if first_full is not None:  # a full replacement makes earlier changes moot and resyncs
            st.resync()
            changes = changes[first_full:]
        if any(text_problem(c.text) for c in changes):
            st.forget_tokens()  # checked in full (and refused) by Eligibility.check
        try:
            if st.tracked is not None:
                res = st.tracked.apply(changes)
                st.set_text(st.tracked.text, None)
                if st.doc is not None and res.splices:
                    m = updates.apply_splices(st, res.splices, self.shared.settings.full_recompute)
                    if m is not None:
                        out.messages.append(m)
            else:
                self._change_text(st, changes)
        except Exception as e:  # TextSyncError: bad input; anything else: a bug. Either way the text is in doubt
            what = str(e) if isinstance(e, TextSyncError) else f"internal error ({type(e).__name__}: {e})"
            if not isinstance(e, TextSyncError):
                log.exception("change to %s failed", st.uri)
            self._pause(st, what, out)

    def _change_text(self, st: DocumentState, changes: list[Change]) -> None:
        """No tokens kept (too long, or none yet): the text alone, with its line starts."""
        text, lines = st.text, st.text_lines
        lost = 0
        for text, lines, a, b, _ in apply_changes(text, changes, lines):  # noqa: B007, B020 (a fold)
            lost += tokens_lost_at_most(b - a)
            self.text_churn += len(text) + 8 * len(lines)  # a str of ASCII, its line starts
        st.set_text(text, lines, tokens_lost=lost)

    def _pause(self, st: DocumentState, what: str, out: Outcome, version: int | None = None) -> None:
        """A change was lost: ignore incremental changes until the editor sends the full text."""
        st.pause(what, version)
        out.messages.append(
            Message(
                "error",
                (
                    f"vq-lsp: rejected a change to {st.uri} (version {st.version}): {what}. "
                    "Hints for this document are "
                    "paused until the editor sends its full text (close and reopen it)."
                ),
            )
        )
