"""A document's events down the server's own path, in this process and without a client.

`ServerPath` holds the server `vq-lsp` serves (every handler registered, initialized), whose
client is a list. Events go to its Coalescer as the LSP handlers queue them; its `_run` applies
them on the engine thread, builds a missing state through the build queue (making room first, a
window at a time on the build worker, the first hints worked out beside it) and publishes the
hints. What it would send is kept in a `Sent`. Tests read and change the documents (`docs`)
between calls, while the server is idle.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types

from vq_lsp.documents.events import Closed, Event
from vq_lsp.documents.state import Message
from vq_lsp.server import handlers
from vq_lsp.settings import Settings


@dataclass
class Sent:
    """What the server sent the client for one call of `ServerPath.process`."""

    version: int | None = None  # of the last diagnostics published
    diagnostics: list | None = None  # the last diagnostics published; None: nothing was published
    messages: list[Message] = field(default_factory=list)
    closed: bool = False  # the document was closed (and its diagnostics cleared)


class ServerPath:
    def __init__(self, settings: Settings) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = server = handlers.build(settings)  # as `vq-lsp` builds it
        self.docs = server.docs
        self.sent = Sent()
        # its client is a list: what it shows and publishes is kept instead of written out
        server.say = lambda level, text: self.sent.messages.append(Message(level, text))
        server.text_document_publish_diagnostics = self._published
        self._initialize()

    @classmethod
    def with_model(cls, model_dir: Path, **settings) -> ServerPath:
        """The server over the model folder, on the CPU unless `settings` name a device, with
        its model loaded (as the server loads it at initialize)."""
        path = cls(Settings(model_path=str(model_dir), **{"device": "cpu", **settings}))
        path.docs.load_model()
        return path

    def _initialize(self) -> None:
        """The LSP initialize exchange, with a client that asks for nothing (no progress, no folder)."""
        steps = self.server.protocol.lsp_initialize(types.InitializeParams(capabilities=types.ClientCapabilities()))
        for handler, args, _ in steps:
            result = handler(*args)
            if asyncio.iscoroutine(result):
                self.loop.run_until_complete(result)

    def _published(self, params: types.PublishDiagnosticsParams) -> None:
        self.sent.version, self.sent.diagnostics = params.version, params.diagnostics

    def process(self, uri: str, events: list[Event]) -> Sent:
        """Queue the events as the handlers do and wait until the server is done with them
        (hints published). No idle time passes between two calls: a Settle that an edit's hints
        scheduled is called off (tests that want one queue it)."""
        server = self.server
        self.sent = sent = Sent()

        async def run() -> None:
            server.coalescer.submit(uri, *events)
            await server.coalescer.idle(uri)

        self.loop.run_until_complete(run())
        for timer in server._settle_timers.values():
            timer.cancel()
        server._settle_timers.clear()
        sent.closed = any(isinstance(ev, Closed) for ev in events) and uri not in self.docs.states
        return sent

    def close(self) -> None:
        """Let a build still queued finish, and stop the server's threads."""

        async def settle() -> None:
            task = self.server.builds._task
            if task is not None:
                await task

        self.loop.run_until_complete(settle())
        self.server.shutdown_engines()
        self.loop.close()
