"""The memory budget of engine states: least recently used states are dropped first.

Engine states are the expensive part of an open document (tens of MiB for a few thousand
tokens). A dropped state's hint material stays, so its hints are re-chosen from it until the
document is edited; its state goes to the snapshot cache (`save`) and is read back or rebuilt
from the text when needed.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any, Callable

from .state import DocumentState

log = logging.getLogger(__name__)


def touch(states: OrderedDict[str, DocumentState], st: DocumentState, budget_bytes: float,
          save: Callable[[DocumentState], None]) -> None:
    """`st` was just used: it becomes the most recently used, and others make room for it."""
    st.last_touch = time.monotonic()
    states.move_to_end(st.uri)
    evict_over_budget(states, budget_bytes, save, keep=st)


def evict_over_budget(states: OrderedDict[str, DocumentState], budget_bytes: float,
                      save: Callable[[DocumentState], None], keep: DocumentState | None = None) -> None:
    """Drop the least recently used states (never `keep`) until the rest fit the budget; `save`
    leaves each dropped state in the snapshot cache first."""
    sizes = {u: s.bytes() for u, s in states.items()}
    total = sum(sizes.values())
    for uri, other in list(states.items()):
        if total <= budget_bytes:
            break
        if other is keep or other.doc is None:
            continue
        total -= sizes[uri]
        save(other)
        other.doc = None
        other.evictions += 1
        log.info("dropped the engine state of %s (memory budget)", uri)


def report(states: OrderedDict[str, DocumentState], budget_bytes: float, snapshots: dict) -> dict[str, Any]:
    """What the scores request says about memory: state bytes against the budget, and the snapshot cache."""
    return {"bytes": sum(s.bytes() for s in states.values()),
            "budget_bytes": int(budget_bytes),
            "live_states": sum(s.doc is not None for s in states.values()),
            "open_documents": len(states), "snapshots": snapshots}
