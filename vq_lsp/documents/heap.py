"""Give the memory of dropped engine states back to the operating system.

The memory budget (documents/memory.py) drops least recently used engine states, but on glibc that did
not lower the server's resident memory: with 50 documents of 2,000 tokens under a 96 MiB
budget, the states held stayed at 81 MiB while RSS grew from 323 to 881 MiB. Freed tensors,
the dropped states' and the temporaries of every full pass that built a state, stay in
malloc's heap (glibc raises its mmap threshold after the first large free, so later tensors of
a few MiB come from the heap, which it rarely shrinks). `malloc_trim(0)` returns those pages;
it costs about 5-30 ms, so it runs only after at least `after_bytes` of state churn: states
dropped count their size, states built count BUILD_WEIGHT times theirs (the full pass that built
a 17 MiB state left 70-90 MiB of freed temporaries behind); copies of whole texts kept without
tokens count toward a threshold of their own (each keystroke in a 2 MB text over the token limit
copies it: the server grew 20 MB over 100 keystrokes). That is after an eviction, a full pass or
about thirty keystrokes in a text that large, never after a keystroke's incremental update (with
the fullRecompute setting, a dense pass per keystroke, it adds about 2%: 6-9 ms to a 400 ms
update measured on the bundled model). Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Iterable

log = logging.getLogger(__name__)

TRIM_AFTER_BYTES = 16 * 2**20  # float32 states are half the size of float64 ones: they churn half as many bytes
# Copies of whole texts: a trim took 10-20 ms of the one core a server had, so trimming after every
# eight keystrokes in a 2 MB text put a trim in one publish of eight (p95 21 ms instead of 10);
# after every thirty or so the heap still stays within a few MB of the text.
TRIM_AFTER_TEXT_BYTES = 64 * 2**20
BUILD_WEIGHT = 4


def resident_bytes() -> int:
    """The process's resident memory (Linux /proc), or 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


class HeapTrimmer:
    """Counts the bytes of engine states built or dropped since it last trimmed; trims past a threshold.

    With `background`, the trims `observe` asks for run on a thread of their own: a trim of the
    server's heap takes 10-20 ms, and run on the engine thread it delayed the publish of every
    eighth keystroke in a 2 MB text over the token limit by that much (p95 26 ms instead of 10)."""

    def __init__(
        self,
        after_bytes: int = TRIM_AFTER_BYTES,
        background: bool = False,
        after_text_bytes: int = TRIM_AFTER_TEXT_BYTES,
    ) -> None:
        self.after_bytes = after_bytes
        self.after_text_bytes = after_text_bytes
        self.text_churn = 0  # bytes of whole-text copies let go since the last trim
        self.sizes: dict[int, int] = {}  # id of a live IncrementalDocument -> its size when first seen
        self.churn = 0  # bytes of states built or dropped since the last trim
        self.trims = 0
        self._trim = _malloc_trim()
        self._wanted: threading.Event | None = None
        if background and self._trim is not None:
            self._wanted = threading.Event()
            threading.Thread(target=self._trim_when_wanted, name="vq-heap-trim", daemon=True).start()

    def _trim_when_wanted(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            self.trim_now()

    def trim_now(self) -> None:
        """Return freed memory now: a large state was just let go where `observe` cannot see it (the
        snapshot writer drops an evicted state after `observe` counted it, so the trim that count
        caused ran while the state was still alive). Safe from any thread (malloc_trim locks)."""
        if self._trim is not None:
            self.trims += 1
            self._trim(0)

    def observe(self, docs: Iterable, text_bytes: int = 0, state_bytes: int = 0) -> None:
        """Call on the engine thread after each job with the live engine documents (None allowed),
        the bytes of whole-text copies the job made and let go (`Documents.text_churn`) and the bytes
        of live states it let go (layer outputs the memory budget dropped: `Budget.outputs_freed`)."""
        self.text_churn += text_bytes
        self.churn += state_bytes
        now = {}
        for doc in docs:
            if doc is not None:
                key = id(doc)
                if key not in self.sizes:  # built by this job: its full pass left temporaries behind
                    now[key] = doc.state_bytes()
                    self.churn += BUILD_WEIGHT * now[key]
                else:
                    now[key] = self.sizes[key]
        self.churn += sum(size for key, size in self.sizes.items() if key not in now)  # dropped
        self.sizes = now
        if self._trim is None or (self.churn < self.after_bytes and self.text_churn < self.after_text_bytes):
            return
        log.debug("returning freed memory to the OS after %d MiB of churn", (self.churn + self.text_churn) >> 20)
        self.churn = self.text_churn = 0
        if self._wanted is not None:
            self._wanted.set()
        else:
            self.trim_now()
