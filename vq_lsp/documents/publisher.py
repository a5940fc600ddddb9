"""Choosing a document's hints: from its built state, else from the hint material of its version.

Hints are chosen on the engine thread after a document's events (and its build, if it needed
one), and published by the server. While edits still wait, the last hints are moved through them
(remap.py) and stated for the newest version. A freshly built state's first hints have their
heavy part (paragraph caches: typo material, Harper's lints) worked out beforehand on the build
worker (`warm_hints`), so the engine thread only picks from full caches.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import inference

from ..hints import conventions
from ..hints.material import HintMaterial
from . import remap
from .shared import Shared
from .state import Outcome
from .textsync import Change, TextSyncError, TrackedText, position_at

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HintInputs:
    """A document's text and tokens as a finished build saw them, for the build worker's first hints."""

    tracked: TrackedText  # a copy: the engine thread's edits do not reach it
    version: int | None
    language_id: str


class HintPublisher:
    """Chooses the diagnostics to publish for a document, and remembers them in its state."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def hints(self, uri: str, pending: Sequence[tuple[int, list[Change]]] = ()) -> Outcome:
        """Diagnostics for the document as it stands: from its state, else from the material of
        its current version; none (publish nothing) if it has neither. With `pending` changes
        (version, changes) not yet processed, the hints are moved through them (remap.py) and
        stated for the newest of those versions; None if they cannot be moved."""
        st = self.shared.states.get(uri)
        out = Outcome()
        if st is None:
            return out
        out.version = st.version
        if st.problem is not None:
            out.diagnostics = [] if not pending else None
            return out
        settling = st.take_settling(bool(pending))
        cfg = self.shared.settings.diagnostics
        if st.doc is not None:
            exact = {"tolerance": 0.0} if settling else {}  # scores read afresh, none reused (reuse.py)
            st.hinted(
                HintMaterial.of(
                    st.tracked, st.doc, st.version, st.language_id, cfg, **exact, caches=self.shared.hint_caches
                )
            )
        elif not (st.material_current() and st.tracked is not None):
            return out
        chosen = conventions.choose(
            st.tracked, st.material, cfg, self.shared.conventions, st.language_id, caches=self.shared.hint_caches
        )
        if not pending:
            out.diagnostics = st.publish([h.lsp(st.tracked.position, st.version) for h in chosen], settling=settling)
            return out
        try:
            moved = remap.move(st.tracked.text, st.tracked.lines, chosen, [c for _, cs in pending for c in cs])
        except TextSyncError:
            moved = None  # the change will be rejected when it is processed; publish then
        if moved is not None and moved[2]:  # with no hint left, the next result says more than an empty list
            text, starts, alive = moved
            out.version = pending[-1][0]
            out.diagnostics = [h.lsp(lambda off: position_at(text, starts, off), st.version) for h in alive]
        return out

    def hint_inputs(self, uri: str, b: inference.DocumentBuilder) -> HintInputs | None:
        """What `warm_hints` needs of a document `b` has just finished, copied on the engine thread
        (edits change the tracked text in place there); None when it was closed, dropped or edited
        meanwhile (the engine thread then chooses its hints as usual)."""
        st = self.shared.states.get(uri)
        if st is None or st.builder is not b or not b.done or st.tracked is None or st.tracked.ids != b.ids:
            return None
        return HintInputs(st.tracked.copy(), st.version, st.language_id)

    def warm_hints(self, inputs: HintInputs, b: inference.DocumentBuilder) -> None:
        """Work out the first hints of the state `b` has just finished, before it is handed over: the
        server runs this on its build worker, so the paragraph caches (typo material, Harper's lints)
        are full when the engine thread chooses the hints. Done on the engine thread, the first hints
        of a long document (tens of seconds for a book) held every other document's edits and
        requests. Reads only the finished builder and `inputs`; writes only those caches (both
        thread-safe)."""
        cfg, caches = self.shared.settings.diagnostics, self.shared.hint_caches
        try:
            HintMaterial.of(inputs.tracked, b.document(), inputs.version, inputs.language_id, cfg, caches=caches)
            conventions.warm_grammar(inputs.tracked, cfg, self.shared.conventions, inputs.language_id, caches=caches)
        except Exception as e:  # only caches are lost: the engine thread works the hints out (and reports)
            log.warning("working out the first hints beside the engine failed (%s: %s)", type(e).__name__, e)
