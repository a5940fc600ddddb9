"""A small raw stdio client for the `vq-lsp` process: it writes whatever bytes it is given.

pytest-lsp's client (tests/server/lsp_helpers.py) only sends well-formed, typed messages; the
fault and fuzz tests need to send broken framing, non-JSON bodies, wrong types and half
messages, then check what came back. Reading runs on a thread that parses the server's
`Content-Length` frames into dicts; stderr is drained on another so the server never blocks on
a full pipe (every bad message may log a traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

VQ_LSP = str(Path(sys.executable).parent / "vq-lsp")  # the installed console script
TIMEOUT = 60.0


def frame(body: bytes | str) -> bytes:
    """One correctly framed message around `body` (bytes are sent as they are)."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def encode(obj: Any) -> bytes:
    return frame(json.dumps(obj))


def change_params(uri: str, version: int, text: str, start: tuple[int, int], end: tuple[int, int]) -> dict:
    """The params of a didChange that replaces the range from `start` to `end` ((line, character) pairs,
    sent as they are, in range or not) by `text`."""
    (line0, char0), (line1, char1) = start, end
    span = {"start": {"line": line0, "character": char0}, "end": {"line": line1, "character": char1}}
    return {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"range": span, "text": text}]}


class RawClient:
    """The server process, bytes in, parsed messages out."""

    started: list[RawClient] = []  # every server started in this process, to count crashes

    def __init__(
        self, args: list[str] | None = None, env: dict[str, str] | None = None, command: list[str] | None = None
    ) -> None:
        cmd = command or [VQ_LSP, *(args or [])]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.messages: list[dict] = []  # everything the server sent, in order
        self.undecodable: list[bytes] = []  # frames that were not JSON (a server bug if any)
        self.stderr = bytearray()
        self._cond = threading.Condition()
        self.asked_to_end = False  # the client sent exit or closed the server's input
        self.killed = False  # the client had to kill it (cleanup after a failure or a hang)
        RawClient.started.append(self)
        self._write_lock = threading.Lock()
        self.eof = False  # the server closed its stdout (it exited or is exiting)
        self._next_id = 1000
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()  # whatever happened, the server does not outlive the test

    # ----------------------------------------------------------------- reading
    def _read_stdout(self) -> None:
        try:
            self._read_frames(self.proc.stdout)
        except (OSError, ValueError):  # the test closed the pipe: the client is "gone"
            self._notify()

    def _read_frames(self, out) -> None:
        while True:
            length = None
            while True:  # headers
                line = out.readline()
                if not line:
                    return self._notify()
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = out.read(length or 0)
            try:
                msg = json.loads(body)
            except ValueError:
                self.undecodable.append(body)
                continue
            with self._cond:
                self.messages.append(msg)
                self._cond.notify_all()
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                self._answer(msg)

    def _answer(self, msg: dict) -> None:
        """Answer the server's own requests (progress tokens, configuration) as an editor would."""
        result = None
        if msg["method"] == "workspace/configuration":
            result = [None for _ in (msg.get("params") or {}).get("items", [])]
        try:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        except (BrokenPipeError, ValueError, OSError):
            pass  # the server is gone or the test closed the pipe on purpose

    def _read_stderr(self) -> None:
        while chunk := self.proc.stderr.read1(65536):
            self.stderr += chunk

    def _notify(self) -> None:
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def wait_for(self, pick: Callable[[list[dict]], Any], timeout: float = TIMEOUT, what: str = "a message") -> Any:
        """Block until pick(messages) is truthy and return it; fail on timeout or server exit."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (found := pick(self.messages)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out waiting for {what}; stderr tail: {self.stderr_tail()}")
                if self.eof:
                    raise RuntimeError(
                        f"the server closed its output (exit code {self.proc.poll()}) while waiting "
                        f"for {what}; stderr tail: {self.stderr_tail()}"
                    )
                self._cond.wait(min(left, 0.5))
            return found

    def response(self, msg_id: Any, timeout: float = TIMEOUT, after: int = 0) -> dict:
        """The first response with this id among the messages from index `after` on."""
        return self.wait_for(
            lambda ms: next(
                (
                    m
                    for m in ms[after:]
                    if "method" not in m and m.get("id") == msg_id and ("result" in m or "error" in m)
                ),
                None,
            ),
            timeout,
            f"the response to id {msg_id!r}",
        )

    def responses(self) -> list[dict]:
        with self._cond:
            return [m for m in self.messages if "method" not in m and ("result" in m or "error" in m)]

    def notifications(self, method: str) -> list[dict]:
        with self._cond:
            return [m for m in self.messages if m.get("method") == method and "id" not in m]

    def stderr_tail(self, n: int = 2000) -> str:
        return bytes(self.stderr[-n:]).decode("utf-8", "replace")

    # ----------------------------------------------------------------- writing
    def send_raw(self, data: bytes) -> None:
        with self._write_lock:  # the reader thread answers server requests concurrently
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.send_raw(encode(obj))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        msg_id = self.new_id() if msg_id is None else msg_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def call(self, method: str, params: Any = None, timeout: float = TIMEOUT) -> dict:
        """Send a request and wait for its response (result or error)."""
        return self.response(self.request(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.asked_to_end |= method == "exit"
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def close_input(self) -> None:
        """The client goes away: the server reads end of input."""
        self.asked_to_end = True
        self.proc.stdin.close()

    # ----------------------------------------------------------------- LSP steps
    def initialize(self, options: dict | None = None, wait_model: bool = True) -> dict:
        res = self.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": None,
                "capabilities": {"window": {"workDoneProgress": True}},
                "initializationOptions": options or {},
            },
        )
        assert "result" in res, res
        self.notify("initialized", {})
        if wait_model:
            self.wait_for(
                lambda ms: any(
                    m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "end" for m in ms
                ),
                what="the end of model loading",
            )
        return res

    def open(self, uri: str, text: str, version: int = 1, language: str = "plaintext") -> None:
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}},
        )

    def insert(self, uri: str, version: int, text: str, at: tuple[int, int] = (0, 0)) -> None:
        """A didChange that inserts `text` at `at` (line, character)."""
        self.notify("textDocument/didChange", change_params(uri, version, text, at, at))

    def diagnostics(self, uri: str, version: int, timeout: float = TIMEOUT) -> dict:
        return self.wait_for(
            lambda ms: next(
                (
                    m["params"]
                    for m in ms
                    if m.get("method") == "textDocument/publishDiagnostics"
                    and m["params"]["uri"] == uri
                    and m["params"].get("version") == version
                ),
                None,
            ),
            timeout,
            f"diagnostics for {uri} version {version}",
        )

    def shutdown_and_exit(self, timeout: float = TIMEOUT) -> int:
        res = self.call("shutdown", None, timeout)
        assert "result" in res, res
        self.notify("exit")
        return self.wait_exit(timeout)

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_bytes(self) -> int:
        """Resident memory of the server process (VmRSS in /proc/<pid>/status)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def crashed(self) -> bool:
        """It ended by itself (no exit, input still open), on a signal, or with a fatal error."""
        code = self.proc.poll()
        if code is None or self.killed:
            return False
        return code < 0 or not self.asked_to_end or "Fatal Python error" in self.stderr_tail(100_000)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.killed = True
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass
