"""The memory budget of engine states: layer outputs go first, then the least recently used states.

With the "auto" state layout (the server's default) states are built full, with every layer's
output, and the budget drops those outputs (about a fifth of a state) from the least recently used
documents before it drops any document's state: a document that loses them stays live and exact,
its edits a little slower (the lean layout's recomputations).

Engine states are the expensive part of an open document (tens of MiB for a few thousand
tokens). A dropped state's hint material stays, so its hints are re-chosen from it until the
document is edited; its state goes to the snapshot cache (`save`) and is read back or rebuilt
from the text when needed.

What counts and what is spared:
- a state being built counts with the windows built so far: documents that take turns building
  would otherwise hold several uncounted half-built states at once;
- a document the user is in is never dropped: one with a request or an edit waiting for it
  (`in_use`), or edited in the last RECENT_EDIT_S seconds; nor a state built whose hints are
  not chosen yet. Edits count as use: a note typed into without hovers would otherwise be dropped
  when a long document finishes building, and its next keystroke would wait for every build
  queued behind;
- among the rest, the least recently used goes first, but when one state alone frees enough,
  the least recently used of those that do is dropped instead of several small ones.

The server's own working memory beside the states (Harper's second linter, the open documents'
texts, tokens and hint material, what working out a long document's first hints leaves) comes
out of the budget too (`WorkingMemory`): it is hundreds of MiB once a long document has been
hinted. The hints' kept results are counted as they report themselves (HintCaches.bytes), taken
whenever room is made for a new state, so that they count wherever the store is used; the rest
is measured, not estimated: resident memory above the server's baseline less the states' and
the hints' bytes, taken before each build, once the states dropped for it are released.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .snapshots import save_state
from .state import DocumentState

if TYPE_CHECKING:
    from .shared import Shared

log = logging.getLogger(__name__)

RECENT_EDIT_S = 5.0  # a document edited this recently is never dropped for the budget
MIN_STATE_SHARE = 0.5  # the working memory never leaves the states less than this share of the budget
WORKING_MARGIN = 1 / 32  # a share of the budget: a smaller move of the working memory makes no room again

InUse = Callable[[str], bool]


@dataclass
class WorkingMemory:
    """The server's memory beside its engine states: the hints' kept results as they last reported
    their size (`hints`), and the rest as last measured (`observe`). Without a baseline (the
    document store used outside the server: tests, scripts) the rest counts nothing."""

    baseline: int | None = None  # resident bytes once the model is loaded, before any document
    bytes: int = 0  # resident bytes above the baseline that are neither engine states nor `hints`, last measured
    hints: int = 0  # bytes of the hints' kept results (HintCaches.bytes), last reported

    def observe(self, resident: int, state_bytes: int, margin: float) -> bool:
        """Take a measurement (resident memory now, the states' bytes now); True when it moved
        by more than `margin` bytes (the caller then makes room again)."""
        if self.baseline is None or resident <= 0:
            return False
        before, self.bytes = self.bytes, max(0, resident - self.baseline - state_bytes - self.hints)
        return abs(self.bytes - before) > margin

    def state_budget(self, budget: float, need: float = 0.0) -> float:
        """The room for engine states: the budget less the working memory and the hints', but never
        less than MIN_STATE_SHARE of it, nor than `need` (a state that fits the budget alone is still
        built, alone: the budget refuses only a document whose state alone is over it)."""
        return max(budget - self.bytes - self.hints, budget * MIN_STATE_SHARE, min(budget, need))


def never_in_use(uri: str) -> bool:
    """No document is in use (the store used outside the server: tests, scripts)."""
    return False


def spared(st: DocumentState, in_use: InUse, now: float) -> bool:
    """Whether the budget must leave this document's state alone."""
    return in_use(st.uri) or now - st.last_edit < RECENT_EDIT_S or awaiting_hints(st)


def awaiting_hints(st: DocumentState) -> bool:
    """A state given to a document without hints for its version, whose hints are not chosen yet.
    Dropped before that (to make room for the next build, which starts as soon as this one ends)
    the document had no hints at all until its next edit."""
    return st.unhinted_version is not None and st.unhinted_version == st.version and not st.material_current()


def drop_outputs_over_budget(order: list[DocumentState], over: float) -> int:
    """Drop the layer outputs of states in this order (the "auto" layout's full states) until
    `over` bytes are freed; the bytes freed. A state that loses them stays exact and live, its
    edits a little slower: far cheaper for the writer than a state dropped and rebuilt."""
    freed = 0
    for st in order:
        if freed >= over:
            break
        n = st.drop_outputs()
        if n:
            freed += n
            log.info("dropped the layer outputs of %s's engine state (memory budget)", st.uri)
    return freed


def evict_over_budget(
    states: OrderedDict[str, DocumentState],
    budget_bytes: float,
    save: Callable[[DocumentState], None],
    keep: DocumentState | None = None,
    in_use: InUse = never_in_use,
    need_bytes: float = 0.0,
    thin: bool = False,
) -> int:
    """Make the states, plus `need_bytes` about to be allocated, fit the budget: first, with `thin`
    (the "auto" layout), drop layer outputs (least recently used first, never those of `keep` or
    one in use), then drop least recently used states (never those), `save` leaving each in the
    snapshot cache first; with `thin`, when the states spared are still over, their outputs go too
    (`keep`'s last). Returns the bytes of layer outputs dropped (the heap trimmer counts them:
    nothing else sees them go). The "full" layout is what a user chose: its outputs are never dropped."""
    total = sum(s.bytes() for s in states.values()) + need_bytes
    if total <= budget_bytes:
        return 0
    now = time.monotonic()
    candidates = [s for s in states.values() if s is not keep and s.doc is not None and not spared(s, in_use, now)]
    freed = drop_outputs_over_budget(candidates, total - budget_bytes) if thin else 0
    total -= freed
    sizes = {u: s.bytes() for u, s in states.items()}
    while total > budget_bytes and candidates:
        over = total - budget_bytes
        victim = next((s for s in candidates if sizes[s.uri] >= over), candidates[0])
        candidates.remove(victim)
        total -= sizes[victim.uri]
        save(victim)
        victim.evict()
        log.info("dropped the engine state of %s (memory budget)", victim.uri)
    if thin and total > budget_bytes:
        rest = [s for s in states.values() if s is not keep and s.doc is not None]
        freed += drop_outputs_over_budget([*rest, *([keep] if keep is not None else [])], total - budget_bytes)
    return freed


def report(
    states: OrderedDict[str, DocumentState], budget_bytes: float, snapshots: dict, working: WorkingMemory | None = None
) -> dict[str, Any]:
    """What the scores request says about memory: state bytes against the budget, the server's
    working memory and the hints' kept results counted in it, and the snapshot cache."""
    return {
        "bytes": sum(s.bytes() for s in states.values()),
        "budget_bytes": int(budget_bytes),
        "working_bytes": working.bytes if working is not None else 0,
        "hint_bytes": working.hints if working is not None else 0,
        "live_states": sum(s.doc is not None for s in states.values()),
        "lean_states": sum(s.doc is not None and not s.doc.keeps_outputs for s in states.values()),
        "open_documents": len(states),
        "snapshots": snapshots,
    }


class Budget:
    """Keeps the open documents' engine states within the memory budget: every part that adds a
    state (a build, a copy, a restore) or uses one asks here for room first, so the budget is
    enforced in one place. `in_use` says whether a request or an edit waits for a document (the
    server's): its state is never dropped."""

    def __init__(self, shared: Shared, in_use: InUse = never_in_use) -> None:
        self.shared = shared
        self.in_use = in_use
        self.working = WorkingMemory()  # the server's memory beside the states (given a baseline by the server)
        self.outputs_freed = 0  # bytes of layer outputs dropped since the server's heap trimmer last took them

    def state_budget_bytes(self, need: float = 0.0) -> float:
        """What the budget leaves the engine states once the server's working memory is counted
        (WorkingMemory.state_budget)."""
        return self.working.state_budget(self.shared.budget_bytes(), need)

    def observe_working_memory(self, resident: int) -> bool:
        """Measure the server's working memory (resident bytes now, taken while no dropped state
        waits to be released); True when it moved enough that room should be made again."""
        budget = self.shared.budget_bytes()
        states = sum(s.bytes() for s in self.shared.states.values())
        moved = self.working.observe(resident, states, WORKING_MARGIN * budget)
        if moved:
            log.info(
                "working memory beside the engine states: %.0f MiB; the states have %.0f of the %.0f MiB budget",
                self.working.bytes / 2**20,
                self.state_budget_bytes() / 2**20,
                budget / 2**20,
            )
        return moved

    def touch(self, st: DocumentState) -> None:
        """`st` was just used: it becomes the most recently used, and others make room for it."""
        st.touched()
        self.shared.states.move_to_end(st.uri)
        self.make_room(keep=st)

    def make_room(self, keep: DocumentState | None = None, need: float = 0.0, spare: str | None = None) -> None:
        """Drop least recently used states until the rest, and `need` bytes about to be allocated, fit what
        the budget leaves the states; never `keep`, a document in use, or the document `spare`. Room
        for a new state (`need`) takes the hints' size anew first: a build or a copy costs far more."""
        in_use = self.in_use if spare is None else (lambda uri: uri == spare or self.in_use(uri))
        shared = self.shared
        if need > 0:
            self.working.hints = shared.hint_caches.bytes()
        self.outputs_freed += evict_over_budget(
            shared.states,
            self.state_budget_bytes(need),
            lambda st: save_state(shared.snapshots, st, shared.settings),
            keep=keep,
            in_use=in_use,
            need_bytes=need,
            thin=shared.model is not None and shared.model.layout == "auto",
        )

    def waits_for_hints(self, st: DocumentState, need: float) -> bool:
        """After making room for `need` bytes of `st`: True when room is still missing only because
        a state just built waits for its hints (spared until then)."""
        states = self.shared.states.values()
        if sum(s.bytes() for s in states) + need <= self.state_budget_bytes(need):
            return False
        return any(s is not st and s.doc is not None and awaiting_hints(s) for s in states)

    def report(self) -> dict[str, Any]:
        shared = self.shared
        return report(shared.states, shared.budget_bytes(), shared.snapshots.stats(), self.working)
