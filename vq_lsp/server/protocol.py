"""The JSON-RPC side of the server: pygls' protocol, hardened against malformed and early messages.

Every message read from stdin (transport.py) goes through `Protocol.receive`, which answers each
malformed request with a JSON-RPC error (pygls only logged it and popped up "Error in server"
in the editor, leaving the request unanswered) and treats a malformed didChange as a lost
change: the document is paused until the editor resends its full text, never silently out of
sync. The server object (language_server.py) is reached only through `self._server`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    ResponseErrorMessage,
    RPCRequest,
)
from pygls.protocol.language_server import lsp_method

from ..documents.events import ChangeLost

log = logging.getLogger(__name__)

# JSON-RPC and LSP error codes
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
SERVER_NOT_INITIALIZED = -32002


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the document has no state to answer from."""

    CODE = -32803
    MESSAGE = "Request failed"


class DocumentPaused(RequestFailed):
    """RequestFailed for a document whose text is in doubt (a change was lost): a hover says so."""


INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # LSP's `integer`


def lsp_integer(value: Any) -> bool:
    """Whether `value` is an LSP integer (32-bit: a version of 2**40 cannot even be published back)."""
    return isinstance(value, int) and not isinstance(value, bool) and INT_MIN <= value <= INT_MAX


def _bad_version(method: str, params: Any) -> str | None:
    """What is wrong with a didOpen's or didChange's version, if anything."""
    if method not in (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE) or not isinstance(params, dict):
        return None
    doc = params.get("textDocument")
    version = doc.get("version") if isinstance(doc, dict) else None
    if version is None or lsp_integer(version):
        return None
    return f"textDocument.version {str(version)[:40]} is not an LSP integer (-2**31 to 2**31 - 1)"


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
            what = (
                '"jsonrpc" must be "2.0"'
                if data.get("jsonrpc") != "2.0"
                else "the id must be a string or an integer"
                if has_id and not id_ok
                else "the method must be a string"
            )
            if has_id or method is None:
                return self.reply_error(msg_id if id_ok else None, INVALID_REQUEST, f"invalid message: {what}")
            return log.warning("ignored a malformed %r notification: %s", method, what)
        if method is None and not has_id:
            return self.reply_error(None, INVALID_REQUEST, "neither a request, a notification nor a response")
        if not has_id and (bad := _bad_version(method, data.get("params"))) is not None:  # rejected at the door
            return self.malformed_notification(method, data.get("params"), bad)
        try:
            message = self.structure_message(data)
        except Exception as e:  # pygls raises JsonRpcInvalidParams / JsonRpcInternalError from cattrs errors
            if method is None:
                return log.warning("ignored a malformed response to request %r: %s", msg_id, _detail(e))
            if has_id:
                return self.reply_error(msg_id, INVALID_PARAMS, f"invalid params for {method}: {_detail(e)}")
            return self.malformed_notification(method, data.get("params"), _detail(e))
        if has_id and method is not None and not isinstance(message, RPCRequest):  # e.g. didOpen with an id
            return self.reply_error(msg_id, INVALID_REQUEST, f"{method} is a notification: it takes no id")
        try:
            self.handle_message(message)
        except Exception as e:  # a handler that failed before it could answer
            log.exception("handling %r failed", method)
            if has_id and method is not None:
                self.reply_error(msg_id, INTERNAL_ERROR, f"internal error: {type(e).__name__}: {e}")

    def structure_message(self, data: dict[str, Any]):
        """pygls' typed message, without its ERROR log and traceback for every message that does not
        fit its type (one a malformed message in a storm); `receive` answers those with one line."""
        if "jsonrpc" not in data:
            return data
        try:
            if "id" in data and "error" in data:
                return self._converter.structure(data, ResponseErrorMessage)
            if "id" in data and "method" in data:
                return self._converter.structure(data, self.get_message_type(data["method"]) or JsonRPCRequestMessage)
            if "id" in data:
                kind = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
                return self._converter.structure(data, kind)
            return self._converter.structure(data, self.get_message_type(data.get("method", "")) or JsonRPCNotification)
        except cattrs.ClassValidationError as exc:
            raise JsonRpcInvalidParams() from exc

    def _send_handler_result(self, future, *, msg_id) -> None:
        """pygls' answer to a request, except that an LSP error a handler raised on purpose (bad
        params, a document with no state) is one warning line, not an ERROR with a traceback;
        anything else is still logged in full (a fault of ours)."""
        if future.cancelled() or not isinstance(future.exception(), JsonRpcException):
            return super()._send_handler_result(future, msg_id=msg_id)
        self._request_futures.pop(msg_id, None)
        exc = future.exception()
        log.warning("answering %r with error %d: %s", msg_id, exc.code, exc.message)
        self._send_response(msg_id, error=exc.to_response_error())

    def _send_data(self, data: Any) -> None:
        """pygls' send, except that a client gone away (broken pipe) ends serving quietly
        instead of raising into whatever was publishing."""
        if self._server.inbox.stopping:
            return
        try:
            super()._send_data(data)
        except (BrokenPipeError, ConnectionResetError, ValueError) as e:  # ValueError: write to a closed file
            log.warning("the client is gone (%s): stopping", type(e).__name__)
            self._server.inbox.stop()

    def malformed_notification(self, method: str, params: Any, detail: str) -> None:
        """A notification whose params could not be read. For didChange the change is lost, so
        the document's text is in doubt: pause it until the editor resends the full text."""
        log.warning("ignored a malformed %s notification: %s", method, detail)
        doc = params.get("textDocument") if isinstance(params, dict) else None
        uri = doc.get("uri") if isinstance(doc, dict) else None
        if method == types.TEXT_DOCUMENT_DID_CHANGE and isinstance(uri, str):
            version = doc.get("version") if lsp_integer(doc.get("version")) else None
            self._server.coalescer.submit(uri, ChangeLost(version, f"a malformed didChange ({detail})"))
        else:
            self._server.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Warning,
                    message=f"vq-lsp: ignored a malformed {method} notification: {detail}",
                )
            )

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
        self._server.inbox.stop()

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
