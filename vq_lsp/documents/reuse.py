"""A live engine state with the same tokens serves instead of a new build (the state a document
had before it was opened again is a `state.Reusable`).

A build is a dense pass per window (about a second per 2,048-token window on one CPU core). An
editor that opens the same text again (a document opened twice without a close, the same file
under two names, a storm of identical opens) had it built every time: a dozen opens of a
20,000-word document kept the server busy long after the last message. Now:
- a document opened again without a close takes over its previous state, or its half-built
  state, when the new text has the same tokens (nobody else owns it: nothing to copy);
- a document whose tokens equal those of another open document's built state gets a copy of
  that state (a memory copy of its tensors) instead of a build.
Neither is used for a state in doubt: those are rebuilt from the text (builder.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import inference

from .state import DocumentState


def live_twin(
    states: Iterable[DocumentState], st: DocumentState, model: inference.LoadedModel | None
) -> DocumentState | None:
    """Another open document whose built state has exactly `st`'s tokens, or None."""
    if model is None or st.in_doubt or st.tracked is None:
        return None
    ids = st.tracked.ids
    for other in states:
        if (
            other is not st
            and other.doc is not None
            and other.doc.model is model
            and not other.in_doubt
            and other.tracked is not None
            and len(other.tracked.ids) == len(ids)
            and other.tracked.ids == ids
        ):
            return other
    return None


def copy_state(doc: inference.IncrementalDocument) -> tuple[inference.IncrementalDocument, dict]:
    """A copy of `doc` for another document, and what it cost (the document's `last_cost`)."""
    t0 = time.perf_counter()
    out = inference.copy_document(doc)
    return out, {"copy_seconds": time.perf_counter() - t0, "tokens": out.n_tokens}
