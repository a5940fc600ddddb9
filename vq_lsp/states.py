"""Per-document states and the engine-side work of the server, all run on one worker thread.

A document always keeps its text (the editor's truth, needed to apply the next change). When
the model is loaded and the document is eligible (a wanted file type, readable text, not empty,
not too long) it also keeps its tokens (`TrackedText`) and an `IncrementalDocument`. Engine
states are the expensive part: `Documents` keeps them within a memory budget by dropping the
least recently used ones, which are rebuilt from the text when the document is edited or a
request needs them (never just to re-filter hints: `HintMaterial` keeps what hints are chosen
from). A dropped or closed state is left in the snapshot cache (snapshots.py) and read back,
instead of rebuilt, when the same tokens come back; a state in doubt is never saved or read back. A document whose state alone would exceed the budget gets no state and one message.
A state in doubt (the engine refused an edit, its tokens disagree with the text's, verify()
failed) is rebuilt from the text too; every rebuild is counted and logged.

Work is split so the server can interleave documents fairly (engine_thread.py): `process`
applies events and engine updates, `build_step` builds one window of a missing state, and
`hints` chooses diagnostics; each is one short job on the engine thread.

Nothing here imports pygls: `process` takes plain events and returns what to publish.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

import inference

from . import hints, remap
from .settings import Settings
from .snapshots import SnapshotStore
from .textsync import Change, TextSyncError, TrackedText, apply_change, position_at

log = logging.getLogger(__name__)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def text_problem(text: str) -> str | None:
    """Why a text cannot be scored as prose (None when it can)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"undecodable text: an unpaired surrogate at character {e.start}"
    if "\x00" in text:
        return "binary content (NUL bytes)"
    if len(text) >= 16 and len(_CONTROL.findall(text)) > 0.1 * len(text):
        return "binary content (mostly control characters)"
    return None


@dataclass
class Message:
    level: str  # "error", "warning", "info"
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
    uri: str
    language_id: str
    version: int | None
    text: str
    tracked: TrackedText | None = None
    doc: inference.IncrementalDocument | None = None
    builder: inference.DocumentBuilder | None = None  # a state being built window by window
    material: hints.HintMaterial | None = None  # what the last hints were chosen from
    problem: str | None = None  # why the document gets no hints (reported once per change of reason)
    out_of_sync: str | None = None  # a rejected change: ignore incremental changes until full text
    last_cost: dict | None = None
    updates: int = 0
    rebuilds: int = 0
    evictions: int = 0
    restores: int = 0  # states read back from a snapshot instead of rebuilt
    snapshot_ids: list[int] | None = None  # tokens of the snapshot its evicted state left (restore, then edit)
    in_doubt: bool = False  # the next build is a dense pass from the text, never a snapshot
    last_touch: float = 0.0
    build_started: float = 0.0

    def bytes(self) -> int:
        return 0 if self.doc is None else self.doc.state_bytes()


class Documents:
    """Every open document, the model, and the LRU memory budget of engine states."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model: inference.LoadedModel | None = None
        self.model_error: str | None = "the model is not loaded yet"
        self.states: OrderedDict[str, DocumentState] = OrderedDict()  # least recently used first
        self.snapshots = SnapshotStore()

    # ----------------------------------------------------------------- model
    def load_model(self) -> str:
        """Load the model the settings name; drop every state built with the old one."""
        s = self.settings
        torch.set_num_threads(s.threads)
        try:
            self.model = inference.load_model(s.model_path, device=s.device, dtype=s.precision, context=s.context,
                                              layout=s.state_layout)
        except (inference.ModelLoadError, RuntimeError, OSError, ValueError) as e:
            self.model, self.model_error = None, f"cannot load the model: {e}"
            raise inference.ModelLoadError(self.model_error) from None
        self.model_error = None
        if s.snapshots:
            self.snapshots.prepare(self.model)
        for st in self.states.values():
            st.tracked, st.doc, st.problem, st.builder, st.material = None, None, None, None, None
        cfg = self.model.config
        return (f"loaded {self.model.path} ({cfg.num_hidden_layers} layers, d={cfg.hidden_size}, "
                f"{cfg.window_tokens}-token windows, {s.context} context) on {self.model.device} in {s.precision}")

    # ----------------------------------------------------------------- events
    def process(self, uri: str, events: list[tuple]) -> Outcome:
        """Apply events (open, change, close, lost, refresh, settings) in order.

        Consecutive changes become one text update and one engine update. `needs_build` says
        whether the document now wants a state it lacks; a "settings" event alone asks for none
        when the hints can be re-chosen from the material of the current version.
        """
        out = Outcome()
        merged: list[tuple] = []
        for ev in events:
            if ev[0] == "change" and merged and merged[-1][0] == "change":
                merged[-1][1] = ev[1]
                merged[-1][2].extend(ev[2])  # in place: a burst of k changes costs k, not k^2
            elif ev[0] == "change":
                merged.append(["change", ev[1], list(ev[2])])
            else:
                merged.append(ev)
        eager = False
        for ev in merged:
            kind = ev[0]
            if kind == "open":
                _, version, language_id, text = ev
                self.states[uri] = DocumentState(uri, language_id, version, text)
                eager = True
            elif kind == "close":
                closed = self.states.pop(uri, None)
                if closed is not None:
                    self._save_snapshot(closed)
                return Outcome(diagnostics=[], messages=out.messages, closed=True)
            elif kind == "change":
                st = self.states.get(uri)
                if st is None:
                    out.messages.append(Message("error", f"vq-lsp: change for {uri}, which is not open; ignored"))
                    continue
                self._change(st, ev[1], ev[2], out)
                eager = True
            elif kind == "lost":  # a change the server could not even read (server.py): the text is in doubt
                st = self.states.get(uri)
                if st is not None:
                    st.version = ev[1] if ev[1] is not None else st.version
                    self._pause(st, ev[2], out)
            elif kind == "refresh":
                eager = True
            elif kind == "settings":
                self._evict_over_budget()
            else:
                raise ValueError(f"unknown event {kind!r}")
        st = self.states.get(uri)
        if st is None:
            return out
        out.version = st.version
        self._check(st, out)
        if st.problem is None and st.doc is None:
            out.needs_build = eager or not self._material_current(st)
        return out

    def process_now(self, uri: str, events: list[tuple]) -> Outcome:
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
        if st.doc is not None:
            st.material = hints.HintMaterial.of(st.tracked, st.doc, st.version, st.language_id,
                                                self.settings.diagnostics)
        elif not (self._material_current(st) and st.tracked is not None):
            return out
        chosen = hints.choose(st.tracked, st.material, self.settings.diagnostics)
        if not pending:
            out.diagnostics = [h.lsp(st.tracked.position, st.version) for h in chosen]
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
        st = self.states.get(uri)
        if st is None or st.doc is not None or st.problem is not None or st.tracked is None or self.model is None:
            if st is not None:
                st.builder = None
            return 1, 1
        if st.builder is None and self._restore(st):
            return 1, 1
        if st.builder is None or st.builder.model is not self.model:
            st.builder = inference.DocumentBuilder(self.model, st.tracked.ids)
            st.build_started = time.perf_counter()
        b = st.builder
        b.step()
        if not b.done:
            return len(b.windows), len(b.bounds)
        st.builder, doc = None, b.document()
        if b.ids != st.tracked.ids:  # edited while it was being built: catch up incrementally
            doc.apply(inference.diff(b.ids, st.tracked.ids))
        st.doc, st.in_doubt = doc, False
        st.last_cost = {"rebuild_seconds": time.perf_counter() - st.build_started, "tokens": len(st.tracked.ids)}
        self.touch(st)
        return len(b.bounds), len(b.bounds)

    # ----------------------------------------------------------------- snapshots
    def _save_snapshot(self, st: DocumentState) -> None:
        """Leave the state of a document being closed or evicted in the snapshot cache."""
        st.snapshot_ids = None
        if st.doc is None or st.in_doubt or not self.settings.snapshots:
            return
        if self.snapshots.save(st.doc, self.settings.snapshot_cache_mb * 2**20):
            st.snapshot_ids = st.doc.token_ids

    def _restore(self, st: DocumentState) -> bool:
        """Give `st` its state from a snapshot, if one holds its tokens or those its evicted state
        had (then the edits since are applied incrementally); False: build it from the text."""
        if not self.settings.snapshots or st.in_doubt:
            return False
        t0 = time.perf_counter()
        ids = st.tracked.ids
        doc = self.snapshots.load(self.model, ids)
        if doc is None and st.snapshot_ids is not None and st.snapshot_ids != ids:
            doc = self.snapshots.load(self.model, st.snapshot_ids)
            if doc is not None:
                try:
                    doc.apply(inference.diff(st.snapshot_ids, ids))
                    if doc.token_ids != ids:
                        raise ValueError("engine tokens disagree with the text's tokens")
                except Exception as e:  # the restored state is in doubt: build from the text
                    log.warning("could not bring the snapshot of %s up to date (%s); rebuilding", st.uri, e)
                    doc = None
        st.snapshot_ids = None
        if doc is None:
            return False
        st.doc = doc
        st.restores += 1
        st.last_cost = {"restore_seconds": time.perf_counter() - t0, "tokens": len(ids)}
        log.info("restored the state of %s from a snapshot (%d tokens)", st.uri, len(ids))
        self.touch(st)
        return True

    def _change(self, st: DocumentState, version: int, changes: list[Change], out: Outcome) -> None:
        st.version, st.material = version, None
        if st.out_of_sync and all(c.range is not None for c in changes):
            return
        first_full = max((i for i, c in enumerate(changes) if c.range is None), default=None)
        if first_full is not None:  # a full replacement makes earlier changes moot and resyncs
            st.out_of_sync, changes = None, changes[first_full:]
        if any(text_problem(c.text) for c in changes):
            st.tracked, st.doc = None, None  # checked in full (and refused) by _ensure
        try:
            if st.tracked is not None:
                res = st.tracked.apply(changes)
                st.text = st.tracked.text
                if st.doc is not None and res.splices:
                    self._engine_apply(st, res.splices, out)
            else:
                text = st.text
                for c in changes:
                    text = apply_change(text, c)[0]
                st.text = text
        except Exception as e:  # TextSyncError: bad input; anything else: a bug. Either way the text is in doubt
            what = str(e) if isinstance(e, TextSyncError) else f"internal error ({type(e).__name__}: {e})"
            if not isinstance(e, TextSyncError):
                log.exception("change to %s failed", st.uri)
            self._pause(st, what, out)

    def _pause(self, st: DocumentState, what: str, out: Outcome) -> None:
        """A change was lost: ignore incremental changes until the editor sends the full text."""
        st.out_of_sync, st.in_doubt = what, True
        st.tracked, st.doc, st.problem, st.material = None, None, None, None
        out.messages.append(Message("error", (
            f"vq-lsp: rejected a change to {st.uri} (version {st.version}): {what}. Hints for this document are "
            "paused until the editor sends its full text (close and reopen it).")))

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
                out.messages.append(Message("warning", f"vq-lsp: the engine could not update {st.uri} "
                                            f"({type(e).__name__}: {e}); rebuilt its state from the text"))
            st.doc, st.in_doubt = None, True
            st.rebuilds += 1

    def _recompute(self, st: DocumentState) -> inference.EditResult:
        """The fullRecompute setting: rebuild the state from scratch over the new tokens (a dense pass).

        It exists so that benchmarks can compare the engine with full recomputation on the same
        server, protocol and coalescing (and for debugging); it is counted as an update, not a rebuild.
        """
        t0 = time.perf_counter()
        st.doc = inference.IncrementalDocument(self.model, st.tracked.ids)
        macs = st.doc.dense_macs()
        rows = [st.doc.n_tokens + len(st.doc.windows)] * self.model.config.num_hidden_layers  # BOS row per window
        cost = inference.Cost(incremental_macs=macs, dense_macs=macs, dirty_per_layer=rows,
                              seconds=time.perf_counter() - t0)
        return inference.EditResult(scores=st.doc.scores, cost=cost)

    def _check(self, st: DocumentState, out: Outcome) -> None:
        """Record why the document cannot have a state (tokenizing it if needed), and say so
        once per change of reason."""
        problem = self._problem(st)
        if problem:
            if problem not in ("too long", "empty", "over budget"):
                st.tracked = None
            st.doc, st.builder = None, None
        if problem != st.problem:
            st.problem = problem
            if problem and problem not in ("empty", "file type", "no model", "out of sync"):
                out.messages.append(Message("warning", f"vq-lsp: no hints for {st.uri}: {self._detail(st, problem)}"))

    def _detail(self, st: DocumentState, problem: str) -> str:
        n = len(st.tracked.ids) if st.tracked else 0
        if problem == "too long":
            return f"{n if st.tracked else '?'} tokens, more than maxDocumentTokens = {self.settings.max_document_tokens}"
        if problem == "over budget":
            need = inference.estimate_state_bytes(self.model, st.tracked.ids if st.tracked else n) / 2**20
            return (f"{n} tokens, whose engine state would take about {need:,.0f} MiB, more than the whole memory "
                    f"budget (memoryBudgetMb = {self.settings.memory_budget_mb:g}); raise memoryBudgetMb above "
                    f"{math.ceil(need)} to get hints for it")
        return problem

    def _ensure(self, st: DocumentState, out: Outcome) -> None:
        """Build what the document lacks in one go (requests; the server usually builds it
        beforehand, window by window, with build_step)."""
        self._check(st, out)
        if st.problem:
            return
        while st.doc is None:
            self.build_step(st.uri)
        self.touch(st)

    def _problem(self, st: DocumentState) -> str | None:
        if st.out_of_sync:
            return "out of sync"
        if self.model is None:
            return "no model"
        if not self.settings.wants(st.language_id):
            return "file type"
        if st.tracked is None:
            bad = text_problem(st.text)
            if bad:
                return bad
            st.tracked = TrackedText(self.model.tokenizer, st.text)
        elif st.problem is not None:
            bad = text_problem(st.text)
            if bad:
                return bad
        if not st.tracked.ids:
            return "empty"
        if len(st.tracked.ids) > self.settings.max_document_tokens:
            return "too long"
        if st.doc is None and inference.estimate_state_bytes(self.model, st.tracked.ids) > self._budget():
            return "over budget"
        return None

    def drop(self, uri: str) -> None:
        """Forget a document's tokens and engine state (kept: its text); rebuilt on next use."""
        st = self.states.get(uri)
        if st is not None:
            st.tracked, st.doc, st.problem, st.builder, st.material = None, None, None, None, None
            st.rebuilds += 1
            st.in_doubt = True

    # ----------------------------------------------------------------- memory
    def _budget(self) -> float:
        return self.settings.memory_budget_mb * 2**20

    def touch(self, st: DocumentState) -> None:
        st.last_touch = time.monotonic()
        self.states.move_to_end(st.uri)
        self._evict_over_budget(keep=st)

    def _evict_over_budget(self, keep: DocumentState | None = None) -> None:
        """Drop the least recently used states until the rest fit the budget (their hint
        material stays: hints are re-chosen from it until the document is edited)."""
        sizes = {u: s.bytes() for u, s in self.states.items()}
        total = sum(sizes.values())
        for uri, other in list(self.states.items()):
            if total <= self._budget():
                break
            if other is keep or other.doc is None:
                continue
            total -= sizes[uri]
            self._save_snapshot(other)
            other.doc = None
            other.evictions += 1
            log.info("dropped the engine state of %s (memory budget)", uri)

    def memory(self) -> dict[str, Any]:
        return {"bytes": sum(s.bytes() for s in self.states.values()),
                "budget_bytes": int(self.settings.memory_budget_mb * 2**20),
                "live_states": sum(s.doc is not None for s in self.states.values()),
                "open_documents": len(self.states), "snapshots": self.snapshots.stats()}

    # ----------------------------------------------------------------- requests
    def ready(self, uri: str) -> DocumentState:
        """The state of an open document with its engine state built (rebuilt if it was dropped)."""
        st = self.states.get(uri)
        if st is None:
            raise KeyError(f"{uri} is not open")
        out = Outcome()
        self._ensure(st, out)
        if st.doc is None:
            reason = self.model_error if st.problem == "no model" else (st.out_of_sync or st.problem)
            raise LookupError(f"no scores for {uri}: {reason}")
        return st

    def scores(self, uri: str) -> dict:
        st = self.ready(uri)
        paragraphs = hints.paragraph_scores(st.tracked, st.doc)
        return {
            "uri": uri,
            "version": st.version,
            "scores": st.doc.scores,
            "tokens": st.doc.n_tokens,
            "windows": len(st.doc.windows),
            "paragraphs": [{"range": hints.lsp_range(st.tracked, a, b), "tokens": [ta, tb], "scores": sc}
                           for a, b, ta, tb, sc in paragraphs],
            "cost": st.last_cost,
            "updates": st.updates,
            "rebuilds": st.rebuilds,
            "evictions": st.evictions,
            "restores": st.restores,
            "memory": self.memory(),
        }

    def verify(self, uri: str) -> dict:
        st = self.ready(uri)
        t0 = time.perf_counter()
        check = st.doc.verify()
        tokens_ok = st.doc.token_ids == self.model.tokenizer.encode(st.text)
        result = {"uri": uri, "version": st.version, "codesEqual": check.codes_equal,
                  "maxAbsDiff": check.max_abs_diff, "mismatchedCodes": check.mismatched_codes,
                  "windows": check.windows, "tokensMatchText": tokens_ok,
                  "seconds": time.perf_counter() - t0, "rebuilt": False}
        if not (check.codes_equal and result["tokensMatchText"]):
            st.doc, st.tracked, st.in_doubt = None, None, True
            st.rebuilds += 1
            self._ensure(st, Outcome())
            result["rebuilt"] = True
        return result

    def hover(self, uri: str, line: int, character: int) -> str | None:
        st = self.ready(uri)
        return hints.hover_text(st.tracked, st.doc, st.tracked.offset(line, character), st.language_id,
                                self.settings.diagnostics)

    def quick_fixes(self, uri: str, ranges: list[tuple[int, int, int, int]]) -> list[tuple[tuple, list]]:
        """For each (line, character, line, character) range: the prose words there with their
        likeliest fixes (hints.quick_fixes), as (range, [(finding, start position, end position)])."""
        st = self.ready(uri)
        out = []
        for l0, c0, l1, c1 in ranges:
            a, b = st.tracked.offset(l0, c0), st.tracked.offset(l1, c1)
            found = hints.quick_fixes(st.tracked, st.doc, a, b, st.language_id, self.settings.diagnostics)
            out.append(((l0, c0, l1, c1), [(f, st.tracked.position(f.start), st.tracked.position(f.end))
                                           for f in found]))
        return out
