"""The LSP handlers: each turns a message into a document event or a request on the engine
thread (language_server.py) and its answer into LSP types (hints/lsp.py). No logic of their own."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..documents import requests
from ..documents.events import Closed, Edited, Opened, Refresh
from ..documents.textsync import Change
from ..hints import lsp as hint_lsp
from ..settings import SECTION, Settings
from . import dictionary_actions, grammar_actions, workspace_sync
from .language_server import EXIT_GRACE_S, VQServer
from .protocol import DocumentPaused, RequestFailed
from .ready import ready

log = logging.getLogger(__name__)

DOCUMENT_SCORES = "vqLsp/documentScores"
VERIFY = hint_lsp.VERIFY_COMMAND


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


def changes_of(params: types.DidChangeTextDocumentParams) -> list[Change]:
    """didChange's content changes as text sync's `Change`s (range None: the full text)."""
    changes = []
    for c in params.content_changes:
        r = getattr(c, "range", None)
        changes.append(
            Change(c.text, None if r is None else (r.start.line, r.start.character, r.end.line, r.end.character))
        )
    return changes


def build(defaults: Settings | None = None) -> VQServer:
    """The server with every handler registered (`vq-lsp` serves it over stdio)."""
    ls = VQServer(defaults)
    register_session(ls)
    register_documents(ls)
    register_requests(ls)
    return ls


def register_session(ls: VQServer) -> None:
    """The session: initialize (workspace files, then the editor's settings), initialized (watchers, the
    model), a change of settings, and shutdown (the engines stop, snapshots being written finish)."""

    @ls.feature(types.INITIALIZE)
    async def initialize(ls: VQServer, params: types.InitializeParams):
        ls.workspace_files.open(params)  # vq-lsp.toml and the word lists, before the editor's settings
        ls.docs.conventions = ls.workspace_files.conventions
        await ls.apply_settings(params.initialization_options, initial=True)

    @ls.feature(types.INITIALIZED)
    async def initialized(ls: VQServer, params: types.InitializedParams):
        workspace_sync.report_problems(ls)
        await workspace_sync.register_watchers(ls)
        workspace_sync.start_polling(ls)  # also where the editor reports no change of them
        if ls.docs.settings.diagnostics.grammar:
            ls.docs.hint_caches.grammar.prepare()  # Harper's linter builds while the model loads
        await ls.load_model()

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: VQServer, params: types.DidChangeConfigurationParams):
        data = params.settings
        if not data:  # pull-model clients send null: ask for our section
            caps = ls.client_capabilities.workspace
            if caps is not None and caps.configuration:
                result = await ls.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                )
                data = result[0] if result else None
        await ls.apply_settings(data)

    @ls.feature(types.SHUTDOWN)
    def shutdown(ls: VQServer, params: Any):
        ls.shutdown_engines()
        if not ls.docs.snapshots.flush(EXIT_GRACE_S):  # a snapshot still being written would be lost
            log.warning("shutting down before a snapshot was written")


def register_documents(ls: VQServer) -> None:
    """Document sync: opens, changes and closes become document events; a save or a watched file that
    changed re-reads the workspace files it names."""

    @ls.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched_files(ls: VQServer, params: types.DidChangeWatchedFilesParams):
        await workspace_sync.files_changed(ls, [c.uri for c in params.changes])

    @ls.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: VQServer, params: types.DidSaveTextDocumentParams):
        await workspace_sync.files_changed(ls, [params.text_document.uri])

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: VQServer, params: types.DidOpenTextDocumentParams):
        d = params.text_document
        ls.coalescer.submit(d.uri, Opened(d.version, d.language_id, d.text))
        workspace_sync.watch_buffer(ls, d.uri)  # a word list opened in the editor

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: VQServer, params: types.DidChangeTextDocumentParams):
        ls.coalescer.submit(params.text_document.uri, Edited(params.text_document.version, changes_of(params)))
        workspace_sync.watch_buffer(ls, params.text_document.uri)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: VQServer, params: types.DidCloseTextDocumentParams):
        ls.builds.cancel(params.text_document.uri)  # a queued build never runs, a running one stops
        ls.coalescer.submit(params.text_document.uri, Closed())
        workspace_sync.watch_buffer(ls, params.text_document.uri, closed=True)


def register_requests(ls: VQServer) -> None:
    """Requests about a document, answered from its newest state (ready.py): hover, quick fixes, the
    code lens, the scores request and the verify command."""

    @ls.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: VQServer, params: types.HoverParams):
        if not ls.docs.settings.hover:
            return None
        try:
            text = await ready(
                ls, params.text_document.uri, requests.hover, params.position.line, params.position.character
            )
        except DocumentPaused as e:  # the user should know why hints stopped
            text = f"vq-lsp: {e.message.split(': ', 1)[-1]}"
        except RequestFailed:
            return None  # no state (no model, empty, ...): nothing to show
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    @ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix])
    )
    async def code_action(ls: VQServer, params: types.CodeActionParams):
        """Quick fixes for our typo and surprise hints: the dictionary words one edit away (two for
        a non-word with nothing closer) that the LM head finds likeliest there, best first."""
        at_range = hint_lsp.meeting(params.context.diagnostics, params.range)  # only those asked about
        grammar_fixes = await grammar_actions.actions(ls, params.text_document.uri, at_range)
        ours = hint_lsp.fixable(at_range)
        if not ours:
            return grammar_fixes
        uri = params.text_document.uri
        try:
            found = await ready(ls, uri, requests.quick_fixes, [hint_lsp.diagnostic_range(d) for d in ours])
        except RequestFailed as e:
            log.info("no quick fixes: %s", e.message)
            return grammar_fixes
        return hint_lsp.quick_fix_actions(uri, ours, found) + dictionary_actions.actions(ls, uri, ours) + grammar_fixes

    @ls.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: VQServer, params: types.CodeLensParams):
        if not ls.docs.settings.code_lens:
            return []
        try:
            st = await ready(ls, params.text_document.uri, requests.built_state)
        except RequestFailed:
            return []
        return [await ls.on_engine(hint_lsp.code_lens, st.uri, st.text, st.doc)]

    @ls.feature(DOCUMENT_SCORES)
    async def document_scores(ls: VQServer, params: Any):
        return await ready(ls, _uri_of(params), requests.scores)

    @ls.command(VERIFY)
    async def verify(ls: VQServer, *args):
        if not args or not isinstance(args[0], str):
            raise JsonRpcInvalidParams(f"{VERIFY} takes one argument: the document uri")
        result = await ready(ls, args[0], requests.verify)
        if result["rebuilt"]:
            ls.say("warning", f"vq-lsp: {args[0]} failed verification and was rebuilt from its text")
            ls.coalescer.submit(args[0], Refresh())
        return result
