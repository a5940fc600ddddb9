"""The last few results of a pure function of a document's text, shared by two server threads.

A publish asks for the same version's Markdown layout and paragraph spans several times (its
material, its grammar lints, its ignore comments), so the last few are kept by key. The engine
thread (edits, requests) and the build worker (the first hints of a freshly built document) both
ask, so the table is guarded; a result is made outside the lock, so that a long document's layout
never holds a note's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Recent(Generic[V]):
    """Up to `keep` results by key, least recently used dropped first."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._results: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The kept result of `key`, or `make()` kept (two threads may both make it: the same value)."""
        got = self.peek(key)
        if got is None:
            got = make()
            self.put(key, got)
        return got

    def peek(self, key: Hashable) -> V | None:
        """The kept result of `key`, or None (for callers that make many missing results at once)."""
        with self._lock:
            got = self._results.get(key)
            if got is not None:
                self._results.move_to_end(key)
            return got

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._results[key] = value
            self._results.move_to_end(key)
            while len(self._results) > self.keep:
                self._results.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._results.clear()
