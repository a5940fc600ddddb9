"""LSP framing over a byte stream (stdin), hardened against broken and hostile clients.

pygls' own reader allocates whatever `Content-Length` a client declares (`Content-Length:
99999999999` killed the server with MemoryError), reads header lines without a length limit,
and loses its place after a body that lacks a trailing newline. This reader:
  - caps header lines (MAX_HEADER_LINE) and bodies (MAX_BODY; a larger body is read and
    thrown away in chunks, so the stream stays in sync and memory stays flat);
  - finds `Content-Length:` anywhere in a header line (case-insensitive, as in HTTP), so that
    garbage glued in front of the next header does not swallow that message;
  - reports each framing problem as a string, for the server to answer with a JSON-RPC error
    whose id is null (the id of a message that cannot be framed is unknown);
  - ends at end of input, also in the middle of a message (the client died).

`frames` is a plain generator over a blocking stream; the server runs it on a daemon thread,
so a client that keeps stdin open after `exit` cannot keep the process alive. On stdin it reads
through `FdReader`, not `sys.stdin.buffer`: a daemon thread blocked in a BufferedReader holds
its lock, and interpreter shutdown then aborts ("could not acquire lock for <stdin> at
interpreter shutdown", SIGABRT on every `exit`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

log = logging.getLogger(__name__)

MAX_HEADER_LINE = 8 * 1024
MAX_BODY = 64 * 2**20  # a 50,000-token document is about 250 kB of JSON
_CHUNK = 2**20
_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,18})[ \t]*\r?$", re.IGNORECASE)
_LENGTH_NAME = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)


def frames(stream: BinaryIO, max_body: int = MAX_BODY) -> Iterator[tuple[bytes | None, str | None]]:
    """Yield (body, None) per message and (None, problem) per framing problem, until end of input."""
    length: int | None = None
    while True:
        line = stream.readline(MAX_HEADER_LINE)
        if not line:
            return
        if line.strip(b"\r\n"):  # a header line (or garbage): only Content-Length matters
            found = _LENGTH.search(line.rstrip(b"\n"))
            if found:
                length = int(found.group(1))
            elif _LENGTH_NAME.search(line):
                length = None
                yield None, f"invalid header {line[:80].decode('latin-1').strip()!r}: Content-Length must be a number"
            continue
        if length is None:  # a blank line with no Content-Length before it: nothing to read
            continue
        n, length = length, None
        if n > max_body:
            if not _discard(stream, n):
                return
            yield None, f"a message of {n} bytes is larger than the limit of {max_body} bytes; skipped"
            continue
        body = stream.read(n)
        if len(body) < n:  # end of input in the middle of a message: the client is gone
            return
        yield body, None


def _discard(stream: BinaryIO, n: int) -> bool:
    """Read and drop n bytes in chunks; False if the input ended first."""
    while n > 0:
        got = stream.read(min(n, _CHUNK))
        if not got:
            return False
        n -= len(got)
    return True


class FdReader:
    """`readline(limit)` and `read(n)` over a raw file descriptor, with our own buffer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def _fill(self) -> bool:
        chunk = os.read(self.fd, 65536)
        self.buf += chunk
        return bool(chunk)

    def _take(self, n: int) -> bytes:
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def readline(self, limit: int) -> bytes:
        while True:
            i = self.buf.find(b"\n", 0, limit)
            if i >= 0:
                return self._take(i + 1)
            if len(self.buf) >= limit or not self._fill():
                return self._take(min(limit, len(self.buf)))

    def read(self, n: int) -> bytes:
        while len(self.buf) < n and self._fill():
            pass
        return self._take(min(n, len(self.buf)))


class Inbox:
    """Framed messages from a blocking stream to the event loop, one at a time: `frames` runs on a
    daemon thread (a blocked read never keeps the process alive) and hands each message over a
    bounded queue (back-pressure on a client that floods us); `serve` takes them in order until
    end of input or `stop`."""

    def __init__(self) -> None:
        self.stopping = False
        self._queue: asyncio.Queue | None = None

    async def serve(self, stream, receive: Callable[[bytes], None], reject: Callable[[str], None]) -> None:
        """`receive(body)` each message; `reject(problem)` each one that could not be framed."""
        loop = asyncio.get_running_loop()
        self._queue = inbox = asyncio.Queue(maxsize=256)

        def pump() -> None:
            try:
                for item in frames(stream):
                    asyncio.run_coroutine_threadsafe(inbox.put(item), loop).result()
            except Exception as e:  # the loop is gone or stdin broke: either way, stop
                log.info("stopped reading: %s", e)
            try:
                asyncio.run_coroutine_threadsafe(inbox.put(None), loop)
            except RuntimeError:
                pass

        threading.Thread(target=pump, name="vq-stdin", daemon=True).start()
        while not self.stopping:
            item = await inbox.get()
            if item is None:
                log.info("end of input: the client is gone")
                break
            body, problem = item
            if problem is not None:
                reject(problem)
            else:
                receive(body)
            await asyncio.sleep(0)  # let handlers started by this message run before the next one

    def stop(self) -> None:
        """Stop serving after the message being handled (exit, or the client is gone)."""
        self.stopping = True
        if self._queue is not None:
            try:
                self._queue.put_nowait(None)  # wake the loop if it waits for input
            except asyncio.QueueFull:
                pass  # it does not wait: it checks `stopping` after the current message
