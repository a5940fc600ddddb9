"""The pygls language server: thin handlers over `Documents` (states.py).

Threads: the asyncio loop only receives messages, queues document events in the `Coalescer`
and sends results; all model and engine work (loading, tokenizing, updates, hints, requests)
runs on one worker thread, so engine states are never touched by two threads at once.
Requests about a document (hover, code lens, scores, verify) first wait until that
document's queued edits are processed, so they answer for its newest version.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

import inference

from . import __version__, hints
from .scheduler import Coalescer
from .settings import SECTION, Settings, parse
from .states import Documents, Outcome
from .textsync import Change

log = logging.getLogger(__name__)

DOCUMENT_SCORES = "vqLsp/documentScores"
VERIFY = "vqLsp.verify"
_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning, "info": types.MessageType.Info}


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the document has no state to answer from."""

    CODE = -32803
    MESSAGE = "Request failed"


class Protocol(LanguageServerProtocol):
    """pygls' protocol with two changes: positions stay UTF-16 (what textsync speaks) whatever
    encodings the client offers, and a change pygls' own document copy cannot apply does not
    stop our handler (which reports it properly)."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        if params.capabilities.general is not None:
            params.capabilities.general.position_encodings = None
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        try:
            for change in params.content_changes:
                self.workspace.update_text_document(params.text_document, change)
        except Exception as e:  # our handler reports bad changes; pygls' copy is not used
            log.debug("pygls could not apply a change: %s", e)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None


class VQServer(LanguageServer):
    def __init__(self, defaults: Settings | None = None) -> None:
        super().__init__("vq-lsp", __version__, protocol_cls=Protocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.defaults = defaults or Settings()  # from the command line
        self.base = self.defaults  # defaults plus initializationOptions
        self.docs = Documents(self.defaults)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vq-engine")
        self.coalescer = Coalescer(self._run)
        self.pending_warnings: list[str] = []
        self._tokens = itertools.count(1)

    # ----------------------------------------------------------------- helpers
    async def on_engine(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def say(self, level: str, text: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=_LEVELS[level], message=text))
        self.window_log_message(types.LogMessageParams(type=_LEVELS[level], message=text))

    async def _run(self, uri: str, events: list[tuple], superseded) -> None:
        try:
            out: Outcome = await self.on_engine(self.docs.process, uri, events, superseded)
        except Exception as e:  # never stop serving: rebuild this document from its text next time
            log.exception("processing %s failed", uri)
            self.say("error", f"vq-lsp: internal error on {uri} ({type(e).__name__}: {e}); rebuilding it")
            await self.on_engine(self.docs.drop, uri)
            return
        for m in out.messages:
            self.say(m.level, m.text)
        if out.diagnostics is not None and not superseded():
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, version=out.version, diagnostics=out.diagnostics))

    def refresh_all(self) -> None:
        for uri in list(self.docs.states):
            self.coalescer.submit(uri, ("refresh",))

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
            if (new.model_path, new.device) != (old.model_path, old.device):
                await self.load_model()
            elif new != old:
                self.refresh_all()

    async def ready(self, uri: str, fn, *args):
        """Run a request on a document's newest state; errors become LSP error responses."""
        await self.coalescer.idle(uri)
        try:
            return await self.on_engine(fn, uri, *args)
        except KeyError as e:
            raise JsonRpcInvalidParams(f"unknown document: {e.args[0]}") from None
        except LookupError as e:
            raise RequestFailed(str(e)) from None


def _uri_of(params: Any) -> str:
    if isinstance(params, dict):
        uri = params.get("uri") or (params.get("textDocument") or {}).get("uri")
    else:
        uri = getattr(params, "uri", None)
        if uri is None and getattr(params, "textDocument", None) is not None:
            uri = params.textDocument.uri
        if uri is None and getattr(params, "text_document", None) is not None:
            uri = params.text_document.uri
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
        result = await ls.ready(args[0], ls.docs.verify)
        if result["rebuilt"]:
            ls.say("warning", f"vq-lsp: {args[0]} failed verification and was rebuilt from its text")
            ls.coalescer.submit(args[0], ("refresh",))
        return result

    @ls.feature(types.SHUTDOWN)
    def shutdown(ls: VQServer, params: Any):
        ls.pool.shutdown(wait=False, cancel_futures=True)

    return ls
