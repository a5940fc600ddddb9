"""Whether an open document can have an engine state, and why not (problems.py names the reasons).

A document gets a state when the model is loaded, its file type is wanted, its text is readable
and not empty, and its tokens fit maxDocumentTokens and its state the memory budget. Telling
may need its tokens, so this is also where a document's text is tokenized, and where a long text
tokenized beside the engine thread before its open (`pretokenize`) is picked up.
"""

from __future__ import annotations

import inference

from .problems import KEEPS_TOKENS, QUIET, Problem, Reason, describe, least_state_bytes, text_problem
from .shared import Shared
from .state import DocumentState, Message, Outcome
from .textsync import TrackedText, count_tokens

PRETOKENIZE_CHARS = 20_000  # a text this long is tokenized beside the engine thread when opened
PRETOKENIZE_MAX_CHARS_PER_TOKEN = 8  # a longer text than this many chars per token allowed is counted instead
COUNT_UP_TO = 3  # a text over the token limit is counted up to this many times the limit, then "over N"


class Eligibility:
    """Judges each document against the model, the settings and the budget, and says why once."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.pretokenized_texts: dict[str, tuple[inference.LoadedModel, str, TrackedText]] = {}  # pretokenize

    def check(self, st: DocumentState, out: Outcome) -> None:
        """Record why the document cannot have a state (tokenizing it if needed), and say so
        once per change of problem."""
        problem = self._problem(st)
        keep_tokens = problem is None or problem.reason in KEEPS_TOKENS
        if st.refuse(problem, keep_tokens=keep_tokens) and problem and problem.reason not in QUIET:
            counted = (st.tokens_at_least, st.counted_all) if st.tokens_at_least is not None else None
            shared = self.shared
            ids = st.tracked.ids if st.tracked else None
            detail = describe(problem, ids, shared.model, shared.settings, counted)
            out.messages.append(Message("warning", f"vq-lsp: no hints for {st.uri}: {detail}"))

    def _problem(self, st: DocumentState) -> Problem | None:
        """Why `st` cannot have an engine state now, or None; tokenizes its text when that is needed to tell."""
        model, settings = self.shared.model, self.shared.settings
        if st.out_of_sync:
            return Problem(Reason.OUT_OF_SYNC)
        if model is None:
            return Problem(Reason.NO_MODEL)
        if not settings.wants(st.language_id) or self.shared.conventions.excludes(st.uri, settings.exclude):
            return Problem(Reason.FILE_TYPE)
        limit = settings.max_document_tokens
        if st.tokens_at_least is not None and st.tokens_at_least > limit:
            return Problem(Reason.TOO_LONG)  # still too long whatever the edits since it was counted did
        if st.tracked is None or st.problem is not None:
            bad = text_problem(st.text)
            if bad:
                return bad
            if st.tracked is None and (found := self._pretokenized(st)) is not None:
                st.tokenized(found)
            if st.tracked is None and len(st.text) > limit:  # likely too long: count before keeping tokens
                n, counted_all = count_tokens(model.tokenizer, st.text, COUNT_UP_TO * limit)
                if n > limit:
                    st.counted(n, counted_all)
                    return Problem(Reason.TOO_LONG)
            if st.tracked is None:
                st.tokenized(TrackedText(model.tokenizer, st.text))
        if not st.tracked.ids:
            return Problem(Reason.EMPTY)
        if len(st.tracked.ids) > limit:
            st.counted(len(st.tracked.ids), True)
            return Problem(Reason.TOO_LONG)
        if st.doc is None and least_state_bytes(model, st.tracked.ids) > self.shared.budget_bytes():
            return Problem(Reason.OVER_BUDGET)
        return None

    def pretokenize(self, uri: str, text: str) -> None:
        """Tokenize a long text about to be opened, beside the engine thread (the server runs this
        on a worker thread before the open is processed): a 20,000-word book took the engine thread
        0.4-0.8 s, twice (counted against maxDocumentTokens, then tokenized to keep its tokens), and
        every keystroke and hover of other documents waited behind the books an editor opened at
        once. A text far over the limit is left to the counting in `_problem`."""
        model = self.shared.model
        if model is None or len(text) > PRETOKENIZE_MAX_CHARS_PER_TOKEN * self.shared.settings.max_document_tokens:
            return
        if text_problem(text):
            return
        self.pretokenized_texts[uri] = (model, text, TrackedText(model.tokenizer, text))

    def _pretokenized(self, st: DocumentState) -> TrackedText | None:
        """The tokens `pretokenize` found for exactly this text under this model, once."""
        found = self.pretokenized_texts.pop(st.uri, None)
        if found is None:
            return None
        model, text, tracked = found
        return tracked if model is self.shared.model and text is st.text else None

    def forget(self, uri: str) -> None:
        """The document was closed: tokens found for its text are of no use."""
        self.pretokenized_texts.pop(uri, None)

    def unavailable(self, uri: str) -> str | None:
        """Why a request on this open document cannot get a state, judged from what its last
        processing found, without engine work (None: a build can give it one, or it has one)."""
        shared = self.shared
        st = shared.states.get(uri)
        if st is None or st.doc is not None:
            return None
        if st.out_of_sync:
            return (
                f"hints for this document are paused: {st.out_of_sync}. They resume when the editor "
                "sends its full text (close and reopen it)"
            )
        if shared.model is None:
            return shared.model_error or "no model"
        if not shared.settings.wants(st.language_id):
            return f"no hints for the file type {st.language_id!r} (see fileTypes)"
        if st.problem is not None:
            return str(st.problem)
        return None
