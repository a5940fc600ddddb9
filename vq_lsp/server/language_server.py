"""The language server: serving loop, engine jobs, publishing, builds, model and settings.

Threads: the asyncio loop only receives messages, queues document events in the `Coalescer`
and sends results; all model and engine work (loading, tokenizing, updates, hints, requests)
runs on one engine thread (engine_thread.py), so engine states are never touched by two
threads at once. The one exception is a build window: a document's first build (or rebuild)
runs one window at a time on a build worker (a second EngineThread), which only reads the model
and writes the builder of the document being built, while the engine thread chooses and hands
over each window in short jobs (build_steps.py); so nobody waits behind another document's
build. The build queue (builds.py) decides which document builds next: one with a request or an
edit waiting goes first. Requests about a document (hover, code lens, scores, verify: ready.py)
first wait until the edits queued before them are processed (not the ones that arrive later: an
edit storm must not starve them), so they answer for the version the client saw or a newer one;
a document that cannot have a state is answered at once.

During a burst of edits that outpaces the engine, the newest finished hints are still published
at most every BURST_PUBLISH_S, moved through the edits still waiting (documents/remap.py) and
stated for the newest version; each diagnostic's `data.version` names the version whose state
chose it.

Reading stdin is ours, not pygls' (transport.py: bounded frames on a daemon thread, handed over
by its `Inbox`); each message goes through `Protocol.receive` (protocol.py), which also handles a
notification it cannot read. The LSP handlers are in handlers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import itertools
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

import inference

from .. import __version__
from ..documents.eligibility import PRETOKENIZE_CHARS
from ..documents.events import Closed, Edited, Event, Opened, Refresh, SettingsChanged, Settle
from ..documents.heap import HeapTrimmer, resident_bytes
from ..documents.state import Level, Message, Outcome
from ..documents.store import Documents, model_settings
from ..documents.textsync import Change
from ..hints import grammar
from ..settings import Settings
from .build_steps import BuildSteps
from .engine_thread import URGENT, EngineThread
from .protocol import INVALID_REQUEST, Protocol
from .scheduler import Coalescer
from .transport import FdReader, Inbox
from .workspace_files import WorkspaceFiles

log = logging.getLogger(__name__)

_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning, "info": types.MessageType.Info}
EXIT_GRACE_S = 2.0  # at exit, wait this long for a running engine job before leaving without it
BURST_PUBLISH_S = 0.05  # during a burst, publish moved hints at most this often per document
# a document left this long after an edit is settled: its state brought to a fresh open's positions
# and its hints chosen from exact scores (documents/events.py: Settle), republished if they changed
SETTLE_AFTER_S = 1.0


class Recovery(enum.Enum):
    """Where a document stands after an internal error while processing it."""

    RETRYING = "retrying"  # rebuilt from its text once, at once
    GAVE_UP = "gave up"  # failed again: hints resume when an edit succeeds


class VQServer(LanguageServer):
    """The server's state and the steps the LSP handlers (handlers.py) run."""

    def __init__(self, defaults: Settings | None = None) -> None:
        super().__init__(
            "vq-lsp", __version__, protocol_cls=Protocol, text_document_sync_kind=types.TextDocumentSyncKind.Incremental
        )
        self.defaults = defaults or Settings()  # from the command line
        self.base = self.defaults  # defaults plus initializationOptions
        self.waiting: Counter[str] = Counter()  # uri -> requests and edits waiting for it now
        self.heap = HeapTrimmer(background=True)  # returns freed memory to the OS, beside the engine thread
        self.notices: list[Message] = []  # what build steps have to say, shown after each step
        self.docs = Documents(
            self.defaults,
            in_use=self.in_use_now,  # read on the engine thread
            notify=self.notices.append,
            released=self.heap.trim_now,  # a state let go after its snapshot is written
        )
        self.engine = EngineThread()
        self.coalescer = Coalescer(self._run)
        self.failing: dict[str, Recovery] = {}  # uri -> where it stands after an internal error
        self.exit_code: int | None = None  # set by `exit`; else by the end of input
        self._tokens = itertools.count(1)
        self.inbox = Inbox()  # what the client sends, read on a thread of its own (transport.py)
        self._last_publish: dict[str, float] = {}  # uri -> time.monotonic() of its last publish
        self._settle_timers: dict[str, asyncio.TimerHandle] = {}  # uri -> its Settle, due when it stays idle
        self.workspace_files = WorkspaceFiles()  # vq-lsp.toml and word lists, under the editor's settings
        self.building = BuildSteps(
            self,
            self.docs,
            self.on_engine,
            self.heap,
            self.say,
            in_use_now=self.in_use_now,
            last_urgent_job=lambda: self.engine.last_urgent_done,
            progress_token=self.progress_token,
            notices=self.notices,
        )
        self.builds, self.build_worker = self.building.queue, self.building.worker  # the order; the windows' thread

    # ----------------------------------------------------------------- stdio
    def start_io(self, stdin=None, stdout=None) -> int:
        """Serve over stdio until `exit` or end of input; returns the process exit code."""
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            reject = functools.partial(self.protocol.reply_error, None, INVALID_REQUEST)  # an unframed message: id null
            asyncio.run(self.inbox.serve(stdin or FdReader(sys.stdin.fileno()), self.protocol.receive, reject))
        except BrokenPipeError:
            log.warning("the client closed its end of the connection")
        finally:
            self.shutdown_engines()  # queued engine work has no one to answer
        if self.exit_code is None:  # end of input: a clean goodbye only if shutdown came first (LSP)
            self.exit_code = 0 if self.protocol._shutdown else 1
        return self.exit_code

    def engine_finished(self, timeout: float = EXIT_GRACE_S) -> bool:
        """Wait up to `timeout` for a running engine job and build window (at exit); True if none is
        running (a window left running in a daemon thread aborted the interpreter's exit)."""
        deadline = time.monotonic() + timeout
        return self.engine.idle.wait(timeout) and self.build_worker.idle.wait(max(0.0, deadline - time.monotonic()))

    def shutdown_engines(self) -> None:
        self.engine.shutdown()
        self.build_worker.shutdown()

    # ----------------------------------------------------------------- helpers
    def progress_token(self, what: str) -> str:
        return f"vq-lsp/{what}/{next(self._tokens)}"

    def _engine_job(self, fn, *args):
        try:
            return fn(*args)
        finally:
            churn, self.docs.table.text_churn = self.docs.table.text_churn, 0
            freed, self.docs.budget.outputs_freed = self.docs.budget.outputs_freed, 0
            self.heap.observe((st.doc for st in self.docs.states.values()), churn, freed)

    async def on_engine(self, fn, *args, lane: int = URGENT):
        return await self.engine.submit(self._engine_job, fn, *args, lane=lane)

    def say(self, level: Level, text: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=_LEVELS[level], message=text))
        self.window_log_message(types.LogMessageParams(type=_LEVELS[level], message=text))

    async def _run(self, uri: str, events: list[Event], superseded: Callable[[], bool]) -> None:
        """One batch of a document's events: apply them, build a missing state window by window,
        then publish hints (moved through newer edits when those are already waiting)."""
        if self.protocol._shutdown:
            return  # shutting down: the engine thread no longer takes work
        timer = self._settle_timers.pop(uri, None)
        if timer is not None:  # newer work: the document is not idle
            timer.cancel()
        try:
            opened = [ev for ev in events if isinstance(ev, Opened) and len(ev.text) >= PRETOKENIZE_CHARS]
            if opened:  # a long text is tokenized here, beside the engine thread, not on it
                await asyncio.to_thread(self.docs.eligibility.pretokenize, uri, opened[-1].text)
            out: Outcome = await self.on_engine(self.docs.table.process, uri, events)
            for m in out.messages:
                self.say(m.level, m.text)
            if out.closed:
                self._last_publish.pop(uri, None)
                self.builds.cancel(uri)
                return self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
            if out.needs_build and not self._closing(uri):
                edited = any(isinstance(ev, Edited) for ev in events)  # the user is in it: it goes first
                with self.in_use(uri) if edited else contextlib.nullcontext():
                    built = self.builds.want(uri)
                    if not superseded():
                        arrival = self.coalescer.next_arrival(uri)
                        await asyncio.wait((built, arrival), return_when=asyncio.FIRST_COMPLETED)
                    if not built.done():
                        return  # newer events first (an edit, a close, a lost change): the build goes on meanwhile
                    built.result()  # a failed build is handled below
            elif uri in self.builds.wanted and self.docs.eligibility.unavailable(uri) is not None:
                self.builds.cancel(uri)  # paused or refused since it was queued: nothing to build
            pending: list = []
            if superseded():
                if time.monotonic() - self._last_publish.get(uri, 0.0) < BURST_PUBLISH_S:
                    return  # the next batch publishes
                pending = self._pending_changes(uri)
                if pending is None:
                    return
            out = await self.on_engine(self.docs.publisher.hints, uri, pending)
        except Exception as e:  # never stop serving: drop the state, rebuild it from its text
            return await self._recover(uri, e)
        self.failing.pop(uri, None)
        if out.diagnostics is not None:
            self._last_publish[uri] = time.monotonic()
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=out.version, diagnostics=out.diagnostics)
            )
        if any(isinstance(ev, Edited) for ev in events) and not superseded():
            loop = asyncio.get_running_loop()
            self._settle_timers[uri] = loop.call_later(SETTLE_AFTER_S, self._settle_if_idle, uri, out.version)

    async def _recover(self, uri: str, e: Exception) -> None:
        """After an internal error on `uri`: drop its state and rebuild it from its text at once,
        once; a fault that repeats is reported once more, and the document waits for an edit."""
        if self.protocol._shutdown or self.engine.closed:  # shut down between two steps: nothing to do
            return
        log.error("processing %s failed", uri, exc_info=e)
        await self.on_engine(self.docs.builder.drop, uri)
        what = f"vq-lsp: internal error on {uri} ({type(e).__name__}: {e})"
        state = self.failing.get(uri)
        if state is None:  # retry once at once, so the client gets hints without another edit
            self.say("error", f"{what}; rebuilding it from its text")
            self.failing[uri] = Recovery.RETRYING
            self.coalescer.submit(uri, Refresh())
        elif state is Recovery.RETRYING:  # a fault that repeats: say so once, and do not loop
            self.say("error", f"{what} again; hints for it resume when an edit succeeds")
            self.failing[uri] = Recovery.GAVE_UP

    def _settle_if_idle(self, uri: str, version: int | None) -> None:
        """SETTLE_AFTER_S after an edit's hints, with nothing newer queued: settle the document."""
        self._settle_timers.pop(uri, None)
        if not self.protocol._shutdown and not self.coalescer.busy(uri):
            self.coalescer.submit(uri, Settle(version))

    def _closing(self, uri: str) -> bool:
        """Whether a close of `uri` waits to be processed: then nothing is built for it."""
        return any(isinstance(ev, Closed) for ev in self.coalescer.pending.get(uri, ()))

    def _pending_changes(self, uri: str) -> list[tuple[int, list[Change]]] | None:
        """The changes waiting for `uri` as (version, changes), or None if anything else waits."""
        out = []
        for ev in self.coalescer.pending.get(uri, []):
            if not isinstance(ev, Edited) or not isinstance(ev.version, int):
                return None
            out.append((ev.version, ev.changes))
        return out

    # ----------------------------------------------------------------- who waits for a document
    @contextlib.contextmanager
    def in_use(self, uri: str) -> Iterator[None]:
        """A request or an edit waits for `uri`: its build goes first and its state is not dropped."""
        self.waiting[uri] += 1
        try:
            yield
        finally:
            self.waiting[uri] -= 1
            if self.waiting[uri] <= 0:
                del self.waiting[uri]

    def in_use_now(self, uri: str) -> bool:
        """Whether a request or an edit waits for `uri` (see `in_use`)."""
        return self.waiting.get(uri, 0) > 0

    def refresh_all(self, event: Event | None = None) -> None:
        """Queue `event` for every open document: Refresh (the default) rebuilds what is missing
        (a new model), SettingsChanged only re-chooses hints where the material allows (documents/table.py)."""
        for uri in list(self.docs.states):
            self.coalescer.submit(uri, event or Refresh())

    async def load_model(self) -> None:
        """Load (or reload) the model the settings name, with $/progress, then refresh documents."""
        fut = asyncio.ensure_future(self.on_engine(self.docs.load_model))
        token, progress = self.progress_token("load-model"), False
        caps = self.client_capabilities.window
        if caps is not None and caps.work_done_progress:
            try:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(
                    token,
                    types.WorkDoneProgressBegin(
                        title="vq-lsp: loading model",
                        message=str(self.docs.settings.model_path or "bundled default"),
                        percentage=0,
                    ),
                )
                progress = True
            except Exception as e:  # a client that refuses progress still gets the model
                log.info("no progress: %s", e)
        try:
            done = await fut
            # what the server holds with the model loaded and no state: the working memory is measured from it
            self.docs.budget.working.baseline = resident_bytes() - sum(s.bytes() for s in self.docs.states.values())
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=f"vq-lsp: {done}"))
        except inference.ModelLoadError as e:
            done = str(e)
            self.say("error", f"vq-lsp: {e}. Hints are off until modelPath names a valid model folder.")
        finally:
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=done))
        self.refresh_all()

    async def apply_settings(self, data: Any, initial: bool = False) -> None:
        old = self.docs.settings
        new, warnings = self.workspace_files.settings(self.defaults, data, initial)
        if initial:
            self.base = new
        for name in self.docs.hint_caches.grammar.configure(grammar.Rules.of(new.grammar.rules)):
            warnings.append(f"grammar.rules: {name!r} is neither a Harper rule nor a lint kind; ignored")
        for w in warnings:
            self.say("warning", f"vq-lsp: {w}")
        self.docs.settings = new
        self.coalescer.delay = new.debounce_ms / 1000
        if new.threads != old.threads:
            await self.on_engine(torch.set_num_threads, new.threads)
        if not initial:
            if model_settings(new) != model_settings(old):
                await self.load_model()
            elif new != old:
                self.refresh_all(SettingsChanged())
