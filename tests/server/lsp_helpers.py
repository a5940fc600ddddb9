"""Helpers for end-to-end tests: a pytest-lsp client that records versioned diagnostics, and
waits that block on notifications (never sleep-and-hope)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, LanguageClient, register_lsp_features

VQ_LSP = str(Path(sys.executable).parent / "vq-lsp")  # the installed console script
TIMEOUT = 60.0
CLIENTS = ["neovim", "visual-studio-code"]


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = {}  # uri -> list of PublishDiagnosticsParams, in arrival order
    client.arrived = asyncio.Event()  # set, then replaced, after every message a handler took

    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams):
        client.diagnostics[params.uri] = params.diagnostics
        client.published.setdefault(params.uri, []).append(params)

    def show(client: LanguageClient, params: types.ShowMessageParams):
        client.messages.append(params)

    def accept_registration(client: LanguageClient, params: types.RegistrationParams) -> None:
        return None

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    features[types.WINDOW_SHOW_MESSAGE] = show
    features[types.CLIENT_REGISTER_CAPABILITY] = accept_registration  # as editors accept file watchers
    register_lsp_features(client, {method: _ticking(fn) for method, fn in features.items()})
    return client


def _ticking(handler):
    """Wrap a client handler so that every message it takes wakes the waiters (`wait_until`).

    The handler's effect is recorded before the wake-up, and a waiter fetches the event in the
    same loop step as it checks its condition, so no message can slip in between unseen (the
    per-method future of `client.wait_for_notification` is only registered one loop step after
    the check, and a message handled in that gap woke nobody: a 60 s timeout one run in three).
    """
    if inspect.iscoroutinefunction(handler):

        async def run(client: LanguageClient, params):
            try:
                return await handler(client, params)
            finally:
                _wake(client)
    else:

        def run(client: LanguageClient, params):
            try:
                return handler(client, params)
            finally:
                _wake(client)

    return functools.wraps(handler)(run)


def _wake(client: LanguageClient) -> None:
    client.arrived.set()
    client.arrived = asyncio.Event()


CONFIG = ClientServerConfig(server_command=[VQ_LSP], client_factory=make_client)


def every_tone_hint(max_surprise_hints: int) -> dict:
    """Initialization options that show every tone and surprise hint (thresholds at zero, any
    paragraph length), at most `max_surprise_hints` surprises, and no typos."""
    return {
        "diagnostics": {
            "sentimentThreshold": 0.0,
            "surprise": True,
            "surpriseThreshold": 0.0,
            "maxSurpriseHints": max_surprise_hints,
            "typo": False,
            "toneMinWords": 0,
        }
    }


async def wait_until(client: LanguageClient, method: str, cond, timeout: float = TIMEOUT):
    """Wait until cond() holds, re-checking it after every message the client takes.

    `method` only names what is awaited in the timeout message. Race-free: the wake-up event is
    taken in the same loop step as the check (see `_ticking`).
    """
    deadline = time.monotonic() + timeout
    while not (result := cond()):
        arrived = client.arrived
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out waiting on {method}")
        try:
            await asyncio.wait_for(arrived.wait(), left)
        except asyncio.TimeoutError:
            if result := cond():  # cannot happen if the wake-ups are right; say so if it does
                raise AssertionError(f"{method}: the condition holds but no wake-up came") from None
            raise TimeoutError(f"timed out waiting on {method}") from None
    return result


def computed(p: types.PublishDiagnosticsParams) -> bool:
    """Whether a publish was chosen from the state of the version it states. During a burst the
    server also publishes older hints moved through newer edits (never with no hint left);
    each diagnostic's data.version names the version whose state chose it."""
    return all(isinstance(d.data, dict) and d.data.get("version") == p.version for d in p.diagnostics)


async def diagnostics_for(client: LanguageClient, uri: str, version: int, timeout: float = TIMEOUT):
    """The first publish for `uri` computed for exactly `version` (newer ones are a failure)."""

    def found():
        for p in client.published.get(uri, []):
            assert p.version is None or p.version <= version, f"diagnostics for version {p.version} > {version}"
            if p.version == version and computed(p):
                return p
        return None

    return await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, found, timeout)


async def message_matching(client: LanguageClient, text: str, timeout: float = TIMEOUT) -> types.ShowMessageParams:
    return await wait_until(
        client,
        types.WINDOW_SHOW_MESSAGE,
        lambda: next((m for m in client.messages if text in m.message), None),
        timeout,
    )


async def initialize(client: LanguageClient, kind: str, options: dict, wait_model: bool = True):
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(kind),
            initialization_options=options,
            workspace_folders=[types.WorkspaceFolder(uri="file:///tmp/vq", name="vq")],
        )
    )
    if wait_model:
        await model_loaded(client)


async def model_loaded(client: LanguageClient):
    """Wait for the end of the model-loading $/progress."""

    def ended():
        for reports in client.progress_reports.values():
            if any(isinstance(r, types.WorkDoneProgressEnd) for r in reports):
                return True
        return False

    await wait_until(client, types.PROGRESS, ended)


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1, language: str = "plaintext") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
        )
    )


async def code_actions(
    client: LanguageClient, uri: str, at: types.Range, diagnostics: list[types.Diagnostic]
) -> list[types.CodeAction] | None:
    """The code actions the server offers at `at` for `diagnostics` (an editor's lightbulb request)."""
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=at,
            context=types.CodeActionContext(diagnostics=diagnostics),
        )
    )


async def actions_for(client: LanguageClient, uri: str, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    """The code actions for one diagnostic, asked over its own range."""
    return await code_actions(client, uri, diagnostic.range, [diagnostic])


def change(client: LanguageClient, uri: str, version: int, *changes) -> None:
    """changes: (l0, c0, l1, c1, text) tuples, or a bare string for a full replacement."""
    events = []
    for c in changes:
        if isinstance(c, str):
            events.append(types.TextDocumentContentChangeWholeDocument(text=c))
        else:
            l0, c0, l1, c1, text = c
            events.append(
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(l0, c0), types.Position(l1, c1)), text=text
                )
            )
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=events
        )
    )


def plain(x):
    """pygls hands untyped results over as namedtuples: back to dicts and lists."""
    if hasattr(x, "_asdict"):
        return {k: plain(v) for k, v in x._asdict().items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x


async def scores(client: LanguageClient, uri: str) -> dict:
    return plain(await client.protocol.send_request_async("vqLsp/documentScores", {"uri": uri}))


async def verify(client: LanguageClient, uri: str) -> dict:
    return plain(
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="vqLsp.verify", arguments=[uri])
        )
    )


def utf16_position(text: str, offset: int) -> tuple[int, int]:
    """(line, UTF-16 column) of a char offset, written independently of vq_lsp.documents.textsync."""
    before = text[:offset].replace("\r\n", "\n").replace("\r", "\n")
    line = before.count("\n")
    col_text = before.rsplit("\n", 1)[-1]
    return line, len(col_text.encode("utf-16-le")) // 2
