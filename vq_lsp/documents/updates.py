"""Engine updates of a built state: an edit's token splices, and bringing an idle state to rest.

Each either succeeds, and the document's cost is recorded, or leaves the state in doubt (dropped,
rebuilt from the text by the next build) with a message saying why: an engine that cannot follow
an edit must never leave hints computed from tokens other than the text's.
"""

from __future__ import annotations

import logging
import time

import inference

from .state import DocumentState, Message

log = logging.getLogger(__name__)


def apply_splices(st: DocumentState, splices: list[inference.Splice], full_recompute: bool) -> Message | None:
    """Bring `st`'s state through an edit's splices; a warning when it could not (then it is in doubt)."""
    try:
        res = recompute(st) if full_recompute else st.doc.apply(splices)
        st.updated(res.cost.as_dict() | {"splices": len(splices)})
        if st.doc.n_tokens != len(st.tracked.ids) or st.doc.token_ids != st.tracked.ids:
            raise ValueError("engine tokens disagree with the text's tokens")
    except Exception as e:  # a state in doubt is rebuilt from its text
        log.warning("rebuilding %s: %s", st.uri, e)
        st.mark_in_doubt()
        # recovered, but the user should know why an update was slow
        return Message(
            "warning",
            f"vq-lsp: the engine could not update {st.uri} ({type(e).__name__}: {e}); rebuilt its state from the text",
        )
    return None


def recompute(st: DocumentState) -> inference.EditResult:
    """The fullRecompute setting: rebuild the state from scratch over the new tokens (a dense pass).

    It exists so that benchmarks can compare the engine with full recomputation on the same
    server, protocol and coalescing (and for debugging); it is counted as an update, not a rebuild.
    """
    t0 = time.perf_counter()
    model = st.doc.model
    doc = inference.IncrementalDocument(model, st.tracked.ids)
    st.recomputed(doc)
    macs = doc.dense_macs()
    rows = [doc.n_tokens + doc.window_count] * model.config.num_hidden_layers  # BOS row per window
    seconds = time.perf_counter() - t0
    cost = inference.Cost(incremental_macs=macs, dense_macs=macs, dirty_per_layer=rows, seconds=seconds)
    return inference.EditResult(scores=doc.scores, cost=cost)


def settle(st: DocumentState) -> Message | None:
    """An idle document: its state brought to rest, its next hints chosen from exact scores.

    A warning when settling failed: the state, in doubt, is dropped and must be rebuilt from the
    text at once (the caller asks for the build). A fresh build is at rest, so the hints chosen from
    it are still the settled ones, republished where they changed; only an edit starts the next
    settle, so a failing settle never repeats by itself."""
    if st.doc is None or st.problem is not None:
        return None
    cost = None
    if not st.doc.at_rest():
        try:
            res = st.doc.settle()
        except Exception as e:  # a state in doubt is rebuilt from its text
            log.exception("settling %s failed", st.uri)
            st.mark_in_doubt()
            st.settle_requested()
            return Message(
                "warning",
                f"vq-lsp: could not settle {st.uri} ({type(e).__name__}: {e}); rebuilding its state from the text",
            )
        cost = res.cost.as_dict() | {"splices": 0, "settle": True}
    st.settle_requested(cost)
    return None
