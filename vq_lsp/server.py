"""The pygls language server: thin handlers over `Documents` (states.py).

Threads: the asyncio loop only receives messages, queues document events in the `Coalescer`
and sends results; all model and engine work (loading, tokenizing, updates, hints, requests)
runs on one engine thread (engine_thread.py), so engine states are never touched by two
threads at once. A document's first build (or rebuild) runs one window per job in the build
lane, and edits and requests of other documents go first: nobody waits behind another
document's long build for more than one window. Requests about a document (hover, code lens,
scores, verify) first wait until the edits queued before them are processed (not the ones that
arrive later: an edit storm must not starve them), so they answer for the version the client
saw or a newer one.

During a burst of edits that outpaces the engine, the newest finished hints are still published
at most every BURST_PUBLISH_S, moved through the edits still waiting (remap.py) and stated for
the newest version; each diagnostic's `data.version` names the version whose state chose it.

Reading stdin is ours, not pygls' (transport.py: bounded frames on a daemon thread), and every
message goes through `Protocol.receive`, which answers each malformed request with a JSON-RPC
error (pygls only logged it and popped up "Error in server" in the editor, leaving the request
unanswered) and treats a malformed didChange as a lost change: the document is paused until
the editor resends its full text, never silently out of sync.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import math
import sys
import threading
import time
from typing import Any

import cattrs

import torch
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCRequest
from pygls.protocol.language_server import lsp_method

import inference

from . import __version__, hints
from .engine_thread import BUILD, URGENT, EngineThread
from .heap import HeapTrimmer
from .scheduler import Coalescer
from .settings import SECTION, Settings, parse
from .states import Documents, Outcome
from .textsync import Change, TextSyncError
from .transport import FdReader, frames

log = logging.getLogger(__name__)

DOCUMENT_SCORES = "vqLsp/documentScores"
VERIFY = "vqLsp.verify"
_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning, "info": types.MessageType.Info}
# JSON-RPC and LSP error codes
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
SERVER_NOT_INITIALIZED = -32002
EXIT_GRACE_S = 2.0  # at exit, wait this long for a running engine job before leaving without it
BURST_PUBLISH_S = 0.05  # during a burst, publish moved hints at most this often per document
BUILD_PROGRESS_WINDOWS = 4  # builds of at least this many windows report $/progress


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the document has no state to answer from."""

    CODE = -32803
    MESSAGE = "Request failed"


def _detail(exc: BaseException) -> str:
    """A readable reason for a message pygls could not turn into typed params."""
    cause = exc.__cause__ or exc
    if isinstance(cause, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(cause, path="$")[:5])
    return f"{type(cause).__name__}: {cause}"


class Protocol(LanguageServerProtocol):
    """pygls' protocol with these changes:
    - `receive` validates each raw message and answers every bad request with an error;
    - requests before `initialize` or after `shutdown` get the errors LSP prescribes instead
      of silence, and `exit` records the exit code LSP prescribes (0 after shutdown, else 1);
    - positions stay UTF-16 (what textsync speaks) whatever encodings the client offers;
    - pygls' own copy of each document is not kept: it was never read, and re-splitting
      the whole text on every keystroke only slowed the event loop in edit storms.
    """

    initialized = False  # an initialize request was received

    # ----------------------------------------------------------------- raw messages
    def receive(self, body: bytes) -> None:
        """Handle one framed message body; anything malformed gets an error response (id null
        when the id cannot be read), a malformed notification a log line, and nothing raises."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, nesting too deep
            return self.reply_error(None, PARSE_ERROR, f"invalid JSON: {str(e)[:200]}")
        if not isinstance(data, dict):
            return self.reply_error(None, INVALID_REQUEST, f"expected a JSON object, got {type(data).__name__}")
        has_id, msg_id, method = "id" in data, data.get("id"), data.get("method")
        id_ok = isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)
        bad_method = "method" in data and not isinstance(method, str)  # null included
        if data.get("jsonrpc") != "2.0" or (has_id and not id_ok) or bad_method:
            what = ('"jsonrpc" must be "2.0"' if data.get("jsonrpc") != "2.0" else
                    "the id must be a string or an integer" if has_id and not id_ok else "the method must be a string")
            if has_id or method is None:
                return self.reply_error(msg_id if id_ok else None, INVALID_REQUEST, f"invalid message: {what}")
            return log.warning("ignored a malformed %r notification: %s", method, what)
        if method is None and not has_id:
            return self.reply_error(None, INVALID_REQUEST, "neither a request, a notification nor a response")
        try:
            message = self.structure_message(data)
        except Exception as e:  # pygls raises JsonRpcInvalidParams / JsonRpcInternalError from cattrs errors
            if method is None:
                return log.warning("ignored a malformed response to request %r: %s", msg_id, _detail(e))
            if has_id:
                return self.reply_error(msg_id, INVALID_PARAMS, f"invalid params for {method}: {_detail(e)}")
            return self._server.malformed_notification(method, data.get("params"), _detail(e))
        if has_id and method is not None and not isinstance(message, RPCRequest):  # e.g. didOpen with an id
            return self.reply_error(msg_id, INVALID_REQUEST, f"{method} is a notification: it takes no id")
        try:
            self.handle_message(message)
        except Exception as e:  # a handler that failed before it could answer
            log.exception("handling %r failed", method)
            if has_id and method is not None:
                self.reply_error(msg_id, INTERNAL_ERROR, f"internal error: {type(e).__name__}: {e}")

    def _send_data(self, data: Any) -> None:
        """pygls' send, except that a client gone away (broken pipe) ends serving quietly
        instead of raising into whatever was publishing."""
        if self._server._stopping:
            return
        try:
            super()._send_data(data)
        except (BrokenPipeError, ConnectionResetError, ValueError) as e:  # ValueError: write to a closed file
            log.warning("the client is gone (%s): stopping", type(e).__name__)
            self._server.stop_reading()

    def reply_error(self, msg_id: Any, code: int, message: str) -> None:
        log.warning("answering %r with error %d: %s", msg_id, code, message)
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def handle_message(self, message) -> None:
        method = getattr(message, "method", None)
        is_request = isinstance(message, RPCRequest)
        if method is not None and method != types.EXIT:
            if self._shutdown:
                if is_request:
                    self.reply_error(message.id, INVALID_REQUEST, f"{method}: the server is shutting down")
                return
            if not self.initialized and method != types.INITIALIZE:
                if is_request:
                    self.reply_error(message.id, SERVER_NOT_INITIALIZED, f"{method} before initialize")
                return  # LSP: notifications before initialize are dropped
            if self.initialized and method == types.INITIALIZE:
                return self.reply_error(message.id, INVALID_REQUEST, "initialize was already received")
        super().handle_message(message)

    # ----------------------------------------------------------------- lifecycle
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        self.initialized = True
        if params.capabilities.general is not None:
            params.capabilities.general.position_encodings = None
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args) -> None:
        self._server.exit_code = 0 if self._shutdown else 1
        self._server.stop_reading()

    # ----------------------------------------------------------------- documents: our handlers only
    def _forward(self, method: str, params):
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        yield from self._forward(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        yield from self._forward(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        yield from self._forward(types.TEXT_DOCUMENT_DID_CLOSE, params)


class VQServer(LanguageServer):
    def __init__(self, defaults: Settings | None = None) -> None:
        super().__init__("vq-lsp", __version__, protocol_cls=Protocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.defaults = defaults or Settings()  # from the command line
        self.base = self.defaults  # defaults plus initializationOptions
        self.docs = Documents(self.defaults)
        self.engine = EngineThread()
        self.heap = HeapTrimmer()  # returns dropped states' memory to the OS (engine thread only)
        self.coalescer = Coalescer(self._run)
        self.pending_warnings: list[str] = []
        self.failing: dict[str, str] = {}  # uri -> "retrying" or "gave up" after an internal error
        self.exit_code: int | None = None  # set by `exit`; else by the end of input
        self._tokens = itertools.count(1)
        self._stopping = False
        self._inbox: asyncio.Queue | None = None
        self._last_publish: dict[str, float] = {}  # uri -> time.monotonic() of its last publish
        self._build_turn = asyncio.Lock()

    # ----------------------------------------------------------------- stdio
    def start_io(self, stdin=None, stdout=None) -> int:
        """Serve over stdio until `exit` or end of input; returns the process exit code."""
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(self._serve(stdin or FdReader(sys.stdin.fileno())))
        except BrokenPipeError:
            log.warning("the client closed its end of the connection")
        finally:
            self.engine.shutdown()  # queued engine work has no one to answer
        if self.exit_code is None:  # end of input: a clean goodbye only if shutdown came first (LSP)
            self.exit_code = 0 if self.protocol._shutdown else 1
        return self.exit_code

    async def _serve(self, stdin) -> None:
        loop = asyncio.get_running_loop()
        self._inbox = inbox = asyncio.Queue(maxsize=256)  # back-pressure on a client that floods us

        def pump() -> None:  # on a daemon thread: a blocked read never keeps the process alive
            try:
                for item in frames(stdin):
                    asyncio.run_coroutine_threadsafe(inbox.put(item), loop).result()
            except Exception as e:  # the loop is gone or stdin broke: either way, stop
                log.info("stopped reading: %s", e)
            try:
                asyncio.run_coroutine_threadsafe(inbox.put(None), loop)
            except RuntimeError:
                pass

        threading.Thread(target=pump, name="vq-stdin", daemon=True).start()
        while not self._stopping:
            item = await inbox.get()
            if item is None:
                log.info("end of input: the client is gone")
                break
            body, problem = item
            if problem is not None:
                self.protocol.reply_error(None, INVALID_REQUEST, problem)
            else:
                self.protocol.receive(body)
            await asyncio.sleep(0)  # let handlers started by this message run before the next one

    def stop_reading(self) -> None:
        """Stop serving after the message being handled (exit, or the client is gone)."""
        self._stopping = True
        if self._inbox is not None:
            try:
                self._inbox.put_nowait(None)  # wake the loop if it waits for input
            except asyncio.QueueFull:
                pass  # it does not wait: it checks _stopping after the current message

    def engine_finished(self, timeout: float = EXIT_GRACE_S) -> bool:
        """Wait up to `timeout` for a running engine job (at exit); True if none is running."""
        return self.engine.idle.wait(timeout)

    # ----------------------------------------------------------------- helpers
    def _engine_job(self, fn, *args):
        try:
            return fn(*args)
        finally:
            self.heap.observe(st.doc for st in self.docs.states.values())

    async def on_engine(self, fn, *args, lane: int = URGENT):
        return await self.engine.submit(self._engine_job, fn, *args, lane=lane)

    def verify_with_text(self, uri: str) -> dict:
        """verify() plus a hash of the server's text, so a client can check it is its own."""
        result = self.docs.verify(uri)
        text = self.docs.states[uri].text
        return result | {"textSha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()}

    def malformed_notification(self, method: str, params: Any, detail: str) -> None:
        """A notification whose params could not be read. For didChange the change is lost, so
        the document's text is in doubt: pause it until the editor resends the full text."""
        log.warning("ignored a malformed %s notification: %s", method, detail)
        doc = params.get("textDocument") if isinstance(params, dict) else None
        uri = doc.get("uri") if isinstance(doc, dict) else None
        if method == types.TEXT_DOCUMENT_DID_CHANGE and isinstance(uri, str):
            version = doc.get("version") if isinstance(doc.get("version"), int) else None
            self.coalescer.submit(uri, ("lost", version, f"a malformed didChange ({detail})"))
        else:
            self.window_log_message(types.LogMessageParams(
                type=types.MessageType.Warning, message=f"vq-lsp: ignored a malformed {method} notification: {detail}"))

    def say(self, level: str, text: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=_LEVELS[level], message=text))
        self.window_log_message(types.LogMessageParams(type=_LEVELS[level], message=text))

    async def _run(self, uri: str, events: list[tuple], superseded) -> None:
        """One batch of a document's events: apply them, build a missing state window by window,
        then publish hints (moved through newer edits when those are already waiting)."""
        if self.protocol._shutdown:
            return  # shutting down: the engine thread no longer takes work
        try:
            out: Outcome = await self.on_engine(self.docs.process, uri, events)
            for m in out.messages:
                self.say(m.level, m.text)
            if out.closed:
                self._last_publish.pop(uri, None)
                return self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
            if out.needs_build:
                await self.build(uri)
            pending: list = []
            if superseded():
                if time.monotonic() - self._last_publish.get(uri, 0.0) < BURST_PUBLISH_S:
                    return  # the next batch publishes
                pending = self._pending_changes(uri)
                if pending is None:
                    return
            out = await self.on_engine(self.docs.hints, uri, pending)
        except Exception as e:  # never stop serving: drop the state, rebuild it from its text
            if self.protocol._shutdown or self.engine.closed:  # shut down between two steps: nothing to do
                return
            log.exception("processing %s failed", uri)
            await self.on_engine(self.docs.drop, uri)
            what = f"vq-lsp: internal error on {uri} ({type(e).__name__}: {e})"
            state = self.failing.get(uri)
            if state is None:  # retry once at once, so the client gets hints without another edit
                self.say("error", f"{what}; rebuilding it from its text")
                self.failing[uri] = "retrying"
                self.coalescer.submit(uri, ("refresh",))
            elif state == "retrying":  # a fault that repeats: say so once, and do not loop
                self.say("error", f"{what} again; hints for it resume when an edit succeeds")
                self.failing[uri] = "gave up"
            return
        self.failing.pop(uri, None)
        if out.diagnostics is not None:
            self._last_publish[uri] = time.monotonic()
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, version=out.version, diagnostics=out.diagnostics))

    def _pending_changes(self, uri: str) -> list[tuple[int, list[Change]]] | None:
        """The changes waiting for `uri` as (version, changes), or None if anything else waits."""
        out = []
        for ev in self.coalescer.pending.get(uri, []):
            if ev[0] != "change" or not isinstance(ev[1], int):
                return None
            out.append((ev[1], ev[2]))
        return out

    async def build(self, uri: str) -> None:
        """Build a document's missing state one window per engine job (the build lane), with
        $/progress for long builds. One document builds at a time (FIFO): builds interleaved
        window by window would hold every half-built state at once (50 documents opened
        together peaked at 1 GiB over a 96 MiB budget), and edits and requests of built
        documents overtake build steps anyway."""
        progress = None
        async with self._build_turn:
            try:
                while True:
                    done, total = await self.on_engine(self.docs.build_step, uri, lane=BUILD)
                    if done >= total:
                        break
                    if progress is None and total >= BUILD_PROGRESS_WINDOWS:
                        progress = BuildProgress(self, uri, total)
                    if progress is not None:
                        progress.report(done)
            finally:
                if progress is not None:
                    progress.end()

    def refresh_all(self, event: str = "refresh") -> None:
        """Queue `event` for every open document: "refresh" rebuilds what is missing (a new
        model), "settings" only re-chooses hints where the material allows (see Documents)."""
        for uri in list(self.docs.states):
            self.coalescer.submit(uri, (event,))

    async def load_model(self) -> None:
        """Load (or reload) the model the settings name, with $/progress, then refresh documents."""
        fut = asyncio.ensure_future(self.on_engine(self.docs.load_model))
        token, progress = f"vq-lsp/load-model/{next(self._tokens)}", False
        caps = self.client_capabilities.window
        if caps is not None and caps.work_done_progress:
            try:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title="vq-lsp: loading model", message=str(self.docs.settings.model_path or "bundled default"),
                    percentage=0))
                progress = True
            except Exception as e:  # a client that refuses progress still gets the model
                log.info("no progress: %s", e)
        try:
            done = await fut
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
        new, warnings = parse(data, self.base)
        if initial:
            self.base = new
        for w in warnings:
            self.say("warning", f"vq-lsp: {w}")
        self.docs.settings = new
        self.coalescer.delay = new.debounce_ms / 1000
        if new.threads != old.threads:
            await self.on_engine(torch.set_num_threads, new.threads)
        if not initial:
            if (new.model_path, new.device, new.precision, new.context, new.state_layout) != (
                    old.model_path, old.device, old.precision, old.context, old.state_layout):
                await self.load_model()
            elif new != old:
                self.refresh_all("settings")

    async def ready(self, uri: str, fn, *args):
        """Run a request on a document's newest state; errors become LSP error responses."""
        await self.coalescer.caught_up(uri)
        try:
            if (st := self.docs.states.get(uri)) is not None and st.doc is None:
                await self.build(uri)  # window by window, as edits do; `fn` builds whatever is still missing
            return await self.on_engine(fn, uri, *args)
        except KeyError as e:
            raise JsonRpcInvalidParams(f"unknown document: {e.args[0]}") from None
        except LookupError as e:
            raise RequestFailed(str(e)) from None
        except TextSyncError as e:  # a position outside the document
            raise JsonRpcInvalidParams(str(e)) from None


class BuildProgress:
    """$/progress for one long build; a client that refuses progress still gets the build."""

    def __init__(self, server: VQServer, uri: str, total: int) -> None:
        self.server, self.total, self.begun, self.ended = server, total, False, False
        self.token = f"vq-lsp/build/{next(server._tokens)}"
        caps = server.client_capabilities.window
        self.task = (asyncio.ensure_future(self._begin(uri)) if caps is not None and caps.work_done_progress
                     else None)

    async def _begin(self, uri: str) -> None:
        try:
            await self.server.work_done_progress.create_async(self.token)
        except Exception as e:
            log.info("no progress: %s", e)
            return
        if not self.ended:
            self.server.work_done_progress.begin(self.token, types.WorkDoneProgressBegin(
                title="vq-lsp: building hints", message=f"{uri}: {self.total} windows", percentage=0))
            self.begun = True

    def report(self, done: int) -> None:
        if self.begun:
            self.server.work_done_progress.report(self.token, types.WorkDoneProgressReport(
                message=f"{done} of {self.total} windows", percentage=int(100 * done / self.total)))

    def end(self) -> None:
        self.ended = True
        if self.begun:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message="built"))


def _uri_of(params: Any) -> str:
    """The uri of {"uri": ...} or {"textDocument": {"uri": ...}}, as a dict or as pygls' objects;
    anything else is invalid params (a list where an object belongs was an internal error)."""
    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    uri = get(params, "uri")
    if uri is None:
        doc = get(params, "textDocument") or get(params, "text_document")
        uri = None if doc is None else get(doc, "uri")
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams('expected params {"uri": "..."}')
    return uri


def build(defaults: Settings | None = None) -> VQServer:
    ls = VQServer(defaults)

    @ls.feature(types.INITIALIZE)
    async def initialize(ls: VQServer, params: types.InitializeParams):
        await ls.apply_settings(params.initialization_options, initial=True)

    @ls.feature(types.INITIALIZED)
    async def initialized(ls: VQServer, params: types.InitializedParams):
        await ls.load_model()

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: VQServer, params: types.DidOpenTextDocumentParams):
        d = params.text_document
        ls.coalescer.submit(d.uri, ("open", d.version, d.language_id, d.text))

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: VQServer, params: types.DidChangeTextDocumentParams):
        changes = []
        for c in params.content_changes:
            r = getattr(c, "range", None)
            changes.append(Change(c.text, None if r is None else (r.start.line, r.start.character, r.end.line,
                                                                   r.end.character)))
        ls.coalescer.submit(params.text_document.uri, ("change", params.text_document.version, changes))

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: VQServer, params: types.DidCloseTextDocumentParams):
        ls.coalescer.submit(params.text_document.uri, ("close",))

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: VQServer, params: types.DidChangeConfigurationParams):
        data = params.settings
        if not data:  # pull-model clients send null: ask for our section
            caps = ls.client_capabilities.workspace
            if caps is not None and caps.configuration:
                result = await ls.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)]))
                data = result[0] if result else None
        await ls.apply_settings(data)

    @ls.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: VQServer, params: types.HoverParams):
        if not ls.docs.settings.hover:
            return None
        try:
            text = await ls.ready(params.text_document.uri, ls.docs.hover, params.position.line,
                                  params.position.character)
        except RequestFailed:
            return None  # no state (no model, empty, ...): nothing to show
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    @ls.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    async def code_action(ls: VQServer, params: types.CodeActionParams):
        """Quick fixes for our typo and surprise hints: the dictionary words one edit away (two for
        a non-word with nothing closer) that the LM head finds likeliest there, best first."""
        ours = [d for d in params.context.diagnostics if d.source == hints.SOURCE and d.code in ("typo", "surprise")]
        if not ours:
            return []
        uri = params.text_document.uri
        ranges = [(d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
                  for d in ours]
        try:
            found = await ls.ready(uri, ls.docs.quick_fixes, ranges)
        except RequestFailed:
            return []
        actions = []
        for d, (_, findings) in zip(ours, found):
            first = len(actions)
            for f, (l0, c0), (l1, c1) in findings:
                for word, logp in f.fixes:
                    edit = types.TextEdit(range=types.Range(types.Position(l0, c0), types.Position(l1, c1)),
                                          new_text=word)
                    actions.append(types.CodeAction(
                        title=f"Replace {f.word!r} with {word!r} (p = {math.exp(logp):.2g} here)",
                        kind=types.CodeActionKind.QuickFix, diagnostics=[d], is_preferred=len(actions) == first,
                        edit=types.WorkspaceEdit(changes={uri: [edit]})))
        return actions

    @ls.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: VQServer, params: types.CodeLensParams):
        if not ls.docs.settings.code_lens:
            return []
        try:
            st = await ls.ready(params.text_document.uri, ls.docs.ready)
        except RequestFailed:
            return []
        return [await ls.on_engine(hints.code_lens, st.uri, st.doc)]

    @ls.feature(DOCUMENT_SCORES)
    async def document_scores(ls: VQServer, params: Any):
        return await ls.ready(_uri_of(params), ls.docs.scores)

    @ls.command(VERIFY)
    async def verify(ls: VQServer, *args):
        if not args or not isinstance(args[0], str):
            raise JsonRpcInvalidParams(f"{VERIFY} takes one argument: the document uri")
        result = await ls.ready(args[0], ls.verify_with_text)
        if result["rebuilt"]:
            ls.say("warning", f"vq-lsp: {args[0]} failed verification and was rebuilt from its text")
            ls.coalescer.submit(args[0], ("refresh",))
        return result

    @ls.feature(types.SHUTDOWN)
    def shutdown(ls: VQServer, params: Any):
        ls.engine.shutdown()
        if not ls.docs.snapshots.flush(EXIT_GRACE_S):  # a snapshot still being written would be lost
            log.warning("shutting down before a snapshot was written")

    return ls
