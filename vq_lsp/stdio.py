"""Only vq-lsp's own output reaches standard output; anything a library prints goes to stderr.

The language server speaks LSP on standard output, and `vq-lsp check` / `vq-lsp score` print
JSON, SARIF or JSONL there. A native library that writes to file descriptor 1 (Harper prints a
debugging line for some sentences; a C extension may print a warning) would corrupt the LSP
stream, which makes the editor drop the session, or make the JSON unparsable. So at start-up
the process keeps a duplicate of the real standard output for its own output and points fd 1,
and Python's `sys.stdout`, at standard error: whatever else is printed, at the C level or in
Python, lands in the editor's log instead of the protocol.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO, TextIO


@dataclass(frozen=True)
class ReservedStdout:
    """The real standard output, kept for vq-lsp's own output after fd 1 was pointed at stderr."""

    binary: BinaryIO  # the LSP stream
    text: TextIO  # `check` and `score` output: UTF-8, no newline translation


_reserved: ReservedStdout | None = None  # the process's one real stdout, once taken


def _stdout_is_fd1() -> bool:
    try:
        return sys.stdout is not None and sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False  # replaced by an embedding program or a test harness: not ours to move


def reserve_stdout() -> ReservedStdout | None:
    """Keep the real stdout for our output and send fd 1 and `sys.stdout` to stderr.

    Returns None (and changes nothing) when `sys.stdout` is not the process's fd 1, for example
    under a test harness that captures it: then our output goes to `sys.stdout` as usual.
    """
    global _reserved
    if _reserved is not None:  # once per process: fd 1 already points at stderr
        return _reserved
    if not _stdout_is_fd1():
        return None
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)  # C-level writes to fd 1 now reach stderr
    binary = os.fdopen(real, "wb")  # buffered: a write is whole even where the pipe takes it in parts
    text = io.TextIOWrapper(binary, encoding="utf-8", newline="", write_through=True)
    sys.stdout = sys.stderr  # Python-level prints too
    _reserved = ReservedStdout(binary=binary, text=text)
    return _reserved
