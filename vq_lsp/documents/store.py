"""`Documents`: every open document, the model, and the engine-side work of the server.

A document always keeps its text; when the model is loaded and the document is eligible (a
wanted file type, readable text, not empty, not too long) it also keeps its tokens and an
engine state. Engine states are kept within a memory budget (memory.py) and rebuilt from the
text when the document is edited or a request needs them (never just to re-filter hints:
`HintMaterial` keeps what hints are chosen from). A dropped or closed state is left in the
snapshot cache (snapshots.py) and read back, instead of rebuilt, when the same tokens come
back. A document whose state alone would exceed the budget gets no state and one message. A
state in doubt (the engine refused an edit, its tokens disagree with the text's, verify()
failed) is rebuilt from the text, never from a snapshot; every rebuild is counted and logged.

Work is split so the server can interleave documents fairly (server/engine_thread.py):
`process` applies events and engine updates, `build_step` builds one window of a missing state,
and `hints` chooses diagnostics; each is one short job on the engine thread. Requests about a
built state are in requests.py.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

import inference

from ..hints import conventions
from ..hints.material import HintMaterial
from ..settings import Settings
from . import memory, remap, reuse
from .events import ChangeLost, Closed, Edited, Event, Opened, Refresh, SettingsChanged, Settle, merge_edits
from .problems import KEEPS_TOKENS, QUIET, Problem, Reason, describe, text_problem
from .snapshots import SnapshotStore, restore_state, save_state
from .state import DocumentState, Message, Outcome
from .textsync import Change, TextSyncError, TrackedText, apply_changes, count_tokens, position_at, tokens_lost_at_most

log = logging.getLogger(__name__)

THRASH_EVICTIONS = 3  # a document dropped for the budget this often, then rebuilt, is reported (once)
PRETOKENIZE_CHARS = 20_000  # a text this long is tokenized beside the engine thread when opened
PRETOKENIZE_MAX_CHARS_PER_TOKEN = 8  # a longer text than this many chars per token allowed is counted instead
COUNT_UP_TO = 3  # a text over the token limit is counted up to this many times the limit, then "over N"


@dataclass(frozen=True)
class HintInputs:
    """A document's text and tokens as a finished build saw them, for the build worker's first hints."""

    tracked: TrackedText  # a copy: the engine thread's edits do not reach it
    version: int | None
    language_id: str


class Documents:
    """Every open document, the model, and the LRU memory budget of engine states."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model: inference.LoadedModel | None = None
        self.model_error: str | None = "the model is not loaded yet"
        self.states: OrderedDict[str, DocumentState] = OrderedDict()  # least recently used first
        self.snapshots = SnapshotStore()
        self.conventions = conventions.Conventions()  # dictionaries and workspace root (server/workspace_files.py)
        # whether a request or an edit waits for a document (set by the server): its state is never dropped
        self.in_use: Callable[[str], bool] = lambda uri: False
        self.notices: list[Message] = []  # messages from build steps, for the server to show
        self.pretokenized_texts: dict[str, tuple[inference.LoadedModel, str, TrackedText]] = {}  # pretokenize
        self.builds = 0  # states built with a dense pass (windows in turn) since start
        self.reused = 0  # states taken over or copied from a live state with the same tokens instead
        # bytes of whole-text copies made for documents kept as text alone (each edit of a text over
        # the token limit copies all of it): the server returns them to the OS (documents/heap.py)
        self.text_churn = 0
        self.working = memory.WorkingMemory()  # the server's memory beside the states (given a baseline by the server)

    # ----------------------------------------------------------------- model
    def load_model(self) -> str:
        """Load the model the settings name; drop every state built with the old one."""
        s = self.settings
        torch.set_num_threads(s.threads)
        try:
            self.model = inference.load_model(
                s.model_path, device=s.device, dtype=s.precision, context=s.context, layout=s.state_layout
            )
        except (inference.ModelLoadError, RuntimeError, OSError, ValueError) as e:
            self.model, self.model_error = None, f"cannot load the model: {e}"
            raise inference.ModelLoadError(self.model_error) from None
        self.model_error = None
        if s.snapshots:
            self.snapshots.prepare(self.model)
        for st in self.states.values():
            st.forget_state()
        cfg = self.model.config
        return (
            f"loaded {self.model.path} ({cfg.num_hidden_layers} layers, d={cfg.hidden_size}, "
            f"{cfg.window_tokens}-token windows, {s.context} context) on {self.model.device} in {s.precision}"
        )

    # ----------------------------------------------------------------- events
    def process(self, uri: str, events: Sequence[Event]) -> Outcome:
        """Apply events in order.

        Consecutive edits become one text update and one engine update. `needs_build` says
        whether the document now wants a state it lacks; a SettingsChanged event alone asks for
        none when the hints can be re-chosen from the material of the current version.
        """
        out = Outcome()
        eager = False
        for ev in merge_edits(events):
            if isinstance(ev, Opened):
                previous = self.states.get(uri)  # opened again without a close: its state may serve
                self.states[uri] = DocumentState(uri, ev.language_id, ev.version, ev.text, last_touch=time.monotonic())
                if previous is not None:
                    self.states[uri].previous = reuse.Reusable.of(previous, self.model)
                eager = True
            elif isinstance(ev, Closed):
                self.pretokenized_texts.pop(uri, None)
                closed = self.states.pop(uri, None)
                if closed is not None:
                    save_state(self.snapshots, closed, self.settings)
                return Outcome(diagnostics=[], messages=out.messages, closed=True)
            elif isinstance(ev, Edited):
                st = self.states.get(uri)
                if st is None:
                    out.messages.append(Message("error", f"vq-lsp: change for {uri}, which is not open; ignored"))
                    continue
                self._change(st, ev.version, ev.changes, out)
                st.last_edit = st.last_touch = time.monotonic()  # an edit is use: the budget spares it
                self.states.move_to_end(uri)
                eager = True
            elif isinstance(ev, ChangeLost):  # a change the server could not even read: the text is in doubt
                st = self.states.get(uri)
                if st is not None:
                    st.version = ev.version if ev.version is not None else st.version
                    self._pause(st, ev.reason, out)
            elif isinstance(ev, Refresh):
                eager = True
            elif isinstance(ev, Settle):
                st = self.states.get(uri)
                if st is not None and st.version == ev.version and not st.settled:
                    eager |= not self._settle(st, out)  # a state that failed to settle is rebuilt now
            elif isinstance(ev, SettingsChanged):
                self._make_room()
            else:
                raise TypeError(f"unknown event {ev!r}")
        st = self.states.get(uri)
        if st is None:
            return out
        out.version = st.version
        self._check(st, out)
        if st.previous is not None:  # tokens are known now: take the previous state over if they agree
            st.previous, previous = None, st.previous
            if st.problem is None and st.doc is None and previous.take_over(st):
                st.handed_over()
                self.reused += 1
                log.info("kept the state of %s: opened again with the same tokens", uri)
        if st.problem is None and st.doc is None:
            out.needs_build = eager or not self._material_current(st)
        return out

    def _settle(self, st: DocumentState, out: Outcome) -> bool:
        """An idle document: its state brought to rest, its next hints chosen from exact scores.

        False when settling failed: the state, in doubt, is dropped and must be rebuilt from the text
        at once (the caller asks for the build). A fresh build is at rest, so the hints chosen from it
        are still the settled ones, and they are republished where they changed; an edit alone starts
        the next settle, so a failing settle never repeats by itself."""
        if st.doc is None or st.problem is not None:
            return True
        if not st.doc.at_rest():
            try:
                res = st.doc.settle()
            except Exception as e:  # a state in doubt is rebuilt from its text
                log.exception("settling %s failed", st.uri)
                out.messages.append(
                    Message(
                        "warning",
                        f"vq-lsp: could not settle {st.uri} ({type(e).__name__}: {e}); "
                        "rebuilding its state from the text",
                    )
                )
                st.mark_in_doubt()
                st.settling = True
                return False
            st.last_cost = res.cost.as_dict() | {"splices": 0, "settle": True}
        st.settling = True
        return True

    def process_now(self, uri: str, events: Sequence[Event]) -> Outcome:
        """`process`, the whole build and `hints` in one call (tests, scripts): the server runs
        these steps as separate engine jobs so that documents take turns."""
        out = self.process(uri, events)
        if out.closed:
            return out
        while out.needs_build:
            done, total = self.build_step(uri)
            out.needs_build = done < total
        hinted = self.hints(uri)
        out.version, out.diagnostics = hinted.version, hinted.diagnostics
        return out

    def _material_current(self, st: DocumentState) -> bool:
        return st.material is not None and st.material.version == st.version

    def hints(self, uri: str, pending: Sequence[tuple[int, list[Change]]] = ()) -> Outcome:
        """Diagnostics for the document as it stands: from its state, else from the material of
        its current version; none (publish nothing) if it has neither. With `pending` changes
        (version, changes) not yet processed, the hints are moved through them (remap.py) and
        stated for the newest of those versions; None if they cannot be moved."""
        st = self.states.get(uri)
        out = Outcome()
        if st is None:
            return out
        out.version = st.version
        if st.problem is not None:
            out.diagnostics = [] if not pending else None
            return out
        settling, st.settling = st.settling and not pending, False
        if st.doc is not None:
            exact = {"tolerance": 0.0} if settling else {}  # scores read afresh, none reused (reuse.py)
            st.material = HintMaterial.of(
                st.tracked, st.doc, st.version, st.language_id, self.settings.diagnostics, **exact
            )
        elif not (self._material_current(st) and st.tracked is not None):
            return out
        chosen = conventions.choose(
            st.tracked, st.material, self.settings.diagnostics, self.conventions, st.language_id
        )
        if not pending:
            out.diagnostics = [h.lsp(st.tracked.position, st.version) for h in chosen]
            if settling:  # published again only where settling changed them
                st.settled = st.doc is not None
                if out.diagnostics == st.published:
                    out.diagnostics = None
                    return out
            st.published = out.diagnostics
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
        nothing is left to build (restored from a snapshot, or no state wanted).

        The server builds the window itself on a thread of its own (`DocumentBuilder.step` only
        reads the model and writes the builder), then hands it to `finish_window` here."""
        st = self.states.get(uri)
        if st is None or st.doc is not None or st.problem is not None or st.tracked is None or self.model is None:
            if st is not None:
                st.builder = None
            return 1, 1
        if st.builder is None and self._copy_live_state(st):
            return 1, 1
        if st.builder is None and restore_state(self.snapshots, self.model, st, self.settings):
            st.handed_over()
            self.touch(st)
            return 1, 1
        if st.builder is None or st.builder.model is not self.model:
            # room for the whole state before its first window: half-built states count too
            need = self._build_need(st)
            self._make_room(keep=st, need=need)
            self._report_thrashing(st)
            st.builder = inference.DocumentBuilder(self.model, st.tracked.ids)
            st.build_started = time.perf_counter()
            self.builds += 1
            log.info("building the state of %s (%d tokens)", uri, len(st.tracked.ids))
        return st.builder

    def hint_inputs(self, uri: str, b: inference.DocumentBuilder) -> HintInputs | None:
        """What `warm_hints` needs of a document `b` has just finished, copied on the engine thread
        (edits change the tracked text in place there); None when it was closed, dropped or edited
        meanwhile (the engine thread then chooses its hints as usual)."""
        st = self.states.get(uri)
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
        cfg = self.settings.diagnostics
        try:
            HintMaterial.of(inputs.tracked, b.document(), inputs.version, inputs.language_id, cfg)
            conventions.warm_grammar(inputs.tracked, cfg, self.conventions, inputs.language_id)
        except Exception as e:  # only caches are lost: the engine thread works the hints out (and reports)
            log.warning("working out the first hints beside the engine failed (%s: %s)", type(e).__name__, e)

    def make_room(self, uri: str) -> bool:
        """Before a document's build or restore starts: drop least recently used states until its
        whole estimated state fits the budget. The server then waits for their snapshots to be
        written (which releases them) before the first window, so the dropped states and the new
        one are never in memory together (RSS peaked a whole long document over the budget).
        True when room is still missing only because a state just built waits for its hints
        (spared until then): the server waits for them, then asks again."""
        st = self.states.get(uri)
        if st is None or st.doc is not None or st.builder is not None or st.problem is not None:
            return False
        if st.tracked is None or self.model is None:
            return False
        need = self._build_need(st)
        self._make_room(keep=st, need=need)
        if sum(s.bytes() for s in self.states.values()) + need <= self.state_budget_bytes(need):
            return False
        return any(s is not st and s.doc is not None and memory.awaiting_hints(s) for s in self.states.values())

    def _build_need(self, st: DocumentState) -> int:
        """The room a build takes: its whole state, and its largest window's pass temporaries
        (without them, the resident memory rose about 120 MiB over the budget while a long
        document was built beside other states)."""
        return inference.estimate_build_bytes(self.model, st.tracked.ids)

    def _copy_live_state(self, st: DocumentState) -> bool:
        """Give `st` a copy of another open document's state with exactly its tokens (the same
        text open under two names) instead of building one: a copy costs a memory copy, a build
        a dense pass per window."""
        source = reuse.live_twin(self.states.values(), st, self.model)
        if source is None:
            return False
        self._make_room(keep=st, need=source.doc.state_bytes(), spare=source.uri)
        st.doc, st.last_cost = reuse.copy_state(source.doc)
        st.handed_over()
        self.reused += 1
        self.touch(st)
        log.info("copied the state of %s for %s: the same tokens", source.uri, st.uri)
        return True

    def finish_window(self, uri: str, b: inference.DocumentBuilder) -> tuple[int, int]:
        """After a window of `b` was built: hand the state over when it is complete."""
        st = self.states.get(uri)
        if st is None or st.builder is not b:  # closed, dropped or edited into a problem meanwhile
            return b.progress if st is not None and st.builder is not None else (1, 1)
        if not b.done:
            return b.progress
        st.builder, doc = None, b.document()
        if b.ids != st.tracked.ids:  # edited while it was being built: catch up incrementally
            doc.apply(inference.diff(b.ids, st.tracked.ids))
        st.doc, st.in_doubt = doc, False
        st.handed_over()
        st.last_cost = {"rebuild_seconds": time.perf_counter() - st.build_started, "tokens": len(st.tracked.ids)}
        self.touch(st)
        return len(b.bounds), len(b.bounds)

    def _report_thrashing(self, st: DocumentState) -> None:
        """Say once that the budget keeps dropping a document that is then rebuilt."""
        if st.evictions >= THRASH_EVICTIONS and not st.thrash_reported:
            st.thrash_reported = True
            self.notices.append(
                Message(
                    "warning",
                    (
                        f"vq-lsp: {st.uri} was dropped for the memory budget and rebuilt {st.evictions} times; raise "
                        f"memoryBudgetMb (now {self.settings.memory_budget_mb:g}) to keep the open documents' states"
                    ),
                )
            )

    # ----------------------------------------------------------------- edits
    def _change(self, st: DocumentState, version: int | None, changes: list[Change], out: Outcome) -> None:
        st.version, st.material, st.settled, st.published = version, None, False, None
        if st.out_of_sync and all(c.range is not None for c in changes):
            return
        first_full = max((i for i, c in enumerate(changes) if c.range is None), default=None)
        if first_full is not None:  # a full replacement makes earlier changes moot and resyncs
            st.out_of_sync, changes = None, changes[first_full:]
        if any(text_problem(c.text) for c in changes):
            st.tracked, st.doc, st.tokens_at_least = None, None, None  # checked in full (and refused) by _check
        if first_full is not None:
            st.tokens_at_least = None  # a new text: counted again
        try:
            if st.tracked is not None:
                res = st.tracked.apply(changes)
                st.text, st.text_lines = st.tracked.text, None
                if st.doc is not None and res.splices:
                    self._engine_apply(st, res.splices, out)
            else:  # no tokens kept (too long, or none yet): the text alone, with its line starts
                text, lines = st.text, st.text_lines
                for text, lines, a, b, _ in apply_changes(text, changes, lines):  # noqa: B007, B020 (a fold)
                    if st.tokens_at_least is not None:
                        st.tokens_at_least -= tokens_lost_at_most(b - a)
                    self.text_churn += len(text) + 8 * len(lines)  # a str of ASCII, its line starts
                st.text, st.text_lines = text, lines
        except Exception as e:  # TextSyncError: bad input; anything else: a bug. Either way the text is in doubt
            what = str(e) if isinstance(e, TextSyncError) else f"internal error ({type(e).__name__}: {e})"
            if not isinstance(e, TextSyncError):
                log.exception("change to %s failed", st.uri)
            self._pause(st, what, out)

    def _pause(self, st: DocumentState, what: str, out: Outcome) -> None:
        """A change was lost: ignore incremental changes until the editor sends the full text."""
        st.pause(what)
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

    def _engine_apply(self, st: DocumentState, splices: list[inference.Splice], out: Outcome | None = None) -> None:
        try:
            res = self._recompute(st) if self.settings.full_recompute else st.doc.apply(splices)
            st.last_cost = res.cost.as_dict() | {"splices": len(splices)}
            st.updates += 1
            if st.doc.n_tokens != len(st.tracked.ids) or st.doc.token_ids != st.tracked.ids:
                raise ValueError("engine tokens disagree with the text's tokens")
        except Exception as e:  # a state in doubt is rebuilt from its text
            log.warning("rebuilding %s: %s", st.uri, e)
            if out is not None:  # recovered, but the user should know why an update was slow
                out.messages.append(
                    Message(
                        "warning",
                        f"vq-lsp: the engine could not update {st.uri} "
                        f"({type(e).__name__}: {e}); rebuilt its state from the text",
                    )
                )
            st.mark_in_doubt()

    def _recompute(self, st: DocumentState) -> inference.EditResult:
        """The fullRecompute setting: rebuild the state from scratch over the new tokens (a dense pass).

        It exists so that benchmarks can compare the engine with full recomputation on the same
        server, protocol and coalescing (and for debugging); it is counted as an update, not a rebuild.
        """
        t0 = time.perf_counter()
        st.doc = inference.IncrementalDocument(self.model, st.tracked.ids)
        macs = st.doc.dense_macs()
        rows = [st.doc.n_tokens + st.doc.window_count] * self.model.config.num_hidden_layers  # BOS row per window
        cost = inference.Cost(
            incremental_macs=macs, dense_macs=macs, dirty_per_layer=rows, seconds=time.perf_counter() - t0
        )
        return inference.EditResult(scores=st.doc.scores, cost=cost)

    # ----------------------------------------------------------------- problems
    def _check(self, st: DocumentState, out: Outcome) -> None:
        """Record why the document cannot have a state (tokenizing it if needed), and say so
        once per change of problem."""
        problem = self._problem(st)
        if problem:
            if problem.reason not in KEEPS_TOKENS:
                st.tracked = None
            st.doc, st.builder = None, None
        if problem is None or problem.reason is not Reason.TOO_LONG:
            st.tokens_at_least = None
        if problem != st.problem:
            st.problem = problem
            if problem and problem.reason not in QUIET:
                counted = (st.tokens_at_least, st.counted_all) if st.tokens_at_least is not None else None
                detail = describe(problem, st.tracked.ids if st.tracked else None, self.model, self.settings, counted)
                out.messages.append(Message("warning", f"vq-lsp: no hints for {st.uri}: {detail}"))

    def _problem(self, st: DocumentState) -> Problem | None:
        """Why `st` cannot have an engine state now, or None; tokenizes its text when that is needed to tell."""
        if st.out_of_sync:
            return Problem(Reason.OUT_OF_SYNC)
        if self.model is None:
            return Problem(Reason.NO_MODEL)
        if not self.settings.wants(st.language_id) or self.conventions.excludes(st.uri, self.settings.exclude):
            return Problem(Reason.FILE_TYPE)
        limit = self.settings.max_document_tokens
        if st.tokens_at_least is not None and st.tokens_at_least > limit:
            return Problem(Reason.TOO_LONG)  # still too long whatever the edits since it was counted did
        if st.tracked is None or st.problem is not None:
            bad = text_problem(st.text)
            if bad:
                return bad
            if st.tracked is None:
                st.tracked = self._pretokenized(st)
            if st.tracked is None and len(st.text) > limit:  # likely too long: count before keeping tokens
                n, st.counted_all = count_tokens(self.model.tokenizer, st.text, COUNT_UP_TO * limit)
                if n > limit:
                    st.tokens_at_least = n
                    return Problem(Reason.TOO_LONG)
            if st.tracked is None:
                st.tracked = TrackedText(self.model.tokenizer, st.text)
                st.text_lines = None
        if not st.tracked.ids:
            return Problem(Reason.EMPTY)
        if len(st.tracked.ids) > limit:
            st.tokens_at_least, st.counted_all = len(st.tracked.ids), True
            return Problem(Reason.TOO_LONG)
        if st.doc is None and inference.estimate_state_bytes(self.model, st.tracked.ids) > self.budget_bytes():
            return Problem(Reason.OVER_BUDGET)
        return None

    def pretokenize(self, uri: str, text: str) -> None:
        """Tokenize a long text about to be opened, beside the engine thread (the server runs this
        on a worker thread before `process`): a 20,000-word book took the engine thread 0.4-0.8 s,
        twice (counted against maxDocumentTokens, then tokenized to keep its tokens), and every
        keystroke and hover of other documents waited behind the books an editor opened at once.
        A text far over the limit is left to the counting in `_problem`."""
        model = self.model
        if model is None or len(text) > PRETOKENIZE_MAX_CHARS_PER_TOKEN * self.settings.max_document_tokens:
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
        return tracked if model is self.model and text is st.text else None

    def ensure(self, st: DocumentState, out: Outcome) -> None:
        """Build what the document lacks in one go (requests; the server usually builds it
        beforehand, window by window, with build_step)."""
        self._check(st, out)
        if st.problem:
            return
        while st.doc is None:
            self.build_step(st.uri)
        self.touch(st)

    def drop(self, uri: str) -> None:
        """Forget a document's tokens and engine state (kept: its text); rebuilt on next use."""
        st = self.states.get(uri)
        if st is not None:
            st.forget_state()
            st.mark_in_doubt()

    def unavailable(self, uri: str) -> str | None:
        """Why a request on this open document cannot get a state, judged from what its last
        processing found, without engine work (None: a build can give it one, or it has one)."""
        st = self.states.get(uri)
        if st is None or st.doc is not None:
            return None
        if st.out_of_sync:
            return (
                f"hints for this document are paused: {st.out_of_sync}. They resume when the editor "
                "sends its full text (close and reopen it)"
            )
        if self.model is None:
            return self.model_error or "no model"
        if not self.settings.wants(st.language_id):
            return f"no hints for the file type {st.language_id!r} (see fileTypes)"
        if st.problem is not None:
            return str(st.problem)
        return None

    def ready(self, uri: str) -> DocumentState:
        """The state of an open document with its engine state built (rebuilt if it was dropped)."""
        st = self.states.get(uri)
        if st is None:
            raise KeyError(f"{uri} is not open")
        self.ensure(st, Outcome())
        if st.doc is None:
            no_model = st.problem is not None and st.problem.reason is Reason.NO_MODEL
            reason = self.model_error if no_model else (st.out_of_sync or st.problem)
            raise LookupError(f"no scores for {uri}: {reason}")
        return st

    # ----------------------------------------------------------------- memory
    def budget_bytes(self) -> float:
        return self.settings.memory_budget_mb * 2**20

    def state_budget_bytes(self, need: float = 0.0) -> float:
        """What the budget leaves the engine states once the server's working memory is counted
        (memory.WorkingMemory.state_budget)."""
        return self.working.state_budget(self.budget_bytes(), need)

    def observe_working_memory(self, resident: int) -> bool:
        """Measure the server's working memory (resident bytes now, taken while no dropped state
        waits to be released); True when it moved enough that room should be made again."""
        states = sum(s.bytes() for s in self.states.values())
        moved = self.working.observe(resident, states, memory.WORKING_MARGIN * self.budget_bytes())
        if moved:
            log.info(
                "working memory beside the engine states: %.0f MiB; the states have %.0f of the %.0f MiB budget",
                self.working.bytes / 2**20,
                self.state_budget_bytes() / 2**20,
                self.budget_bytes() / 2**20,
            )
        return moved

    def _save(self, st: DocumentState) -> None:
        save_state(self.snapshots, st, self.settings)

    def touch(self, st: DocumentState) -> None:
        """`st` was just used: it becomes the most recently used, and others make room for it."""
        st.last_touch = time.monotonic()
        self.states.move_to_end(st.uri)
        self._make_room(keep=st)

    def _make_room(self, keep: DocumentState | None = None, need: float = 0.0, spare: str | None = None) -> None:
        """Drop least recently used states until the rest, and `need` bytes about to be allocated, fit what
        the budget leaves the states; never `keep`, a document in use, or the document `spare`."""
        in_use = self.in_use if spare is None else (lambda uri: uri == spare or self.in_use(uri))
        memory.evict_over_budget(
            self.states, self.state_budget_bytes(need), self._save, keep=keep, in_use=in_use, need_bytes=need
        )

    def memory(self) -> dict:
        return memory.report(self.states, self.budget_bytes(), self.snapshots.stats(), self.working)
