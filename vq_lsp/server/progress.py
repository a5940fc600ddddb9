"""$/progress for long builds: a client that refuses progress still gets the build."""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

BUILD_PROGRESS_WINDOWS = 4  # builds of at least this many windows report $/progress


class BuildProgress:
    """$/progress for one long build; a client that refuses progress still gets the build."""

    def __init__(self, server: LanguageServer, token: str, uri: str, total: int) -> None:
        self.server, self.total, self.begun, self.ended = server, total, False, False
        self.token = token
        caps = server.client_capabilities.window
        self.task = asyncio.ensure_future(self._begin(uri)) if caps is not None and caps.work_done_progress else None

    async def _begin(self, uri: str) -> None:
        try:
            await self.server.work_done_progress.create_async(self.token)
        except Exception as e:
            log.info("no progress: %s", e)
            return
        if not self.ended:
            self.server.work_done_progress.begin(
                self.token,
                types.WorkDoneProgressBegin(
                    title="vq-lsp: building hints", message=f"{uri}: {self.total} windows", percentage=0
                ),
            )
            self.begun = True

    def report(self, done: int) -> None:
        if self.begun:
            self.server.work_done_progress.report(
                self.token,
                types.WorkDoneProgressReport(
                    message=f"{done} of {self.total} windows", percentage=int(100 * done / self.total)
                ),
            )

    def end(self) -> None:
        self.ended = True
        if self.begun:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message="built"))
