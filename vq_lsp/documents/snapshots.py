"""The server's snapshot cache: engine states of closed and evicted documents on disk.

A document dropped for the memory budget, or closed, leaves its state in the user cache folder
(inference/paths.py) under a key made of the model's fingerprint and its token ids; when the
same tokens come back (reopened, or edited after an eviction) the state is read back instead of
rebuilt with a dense pass. The folder stays under a size cap: the least recently used files
(by modification time, which a hit refreshes) are deleted first. A snapshot that cannot be
trusted (corrupt, truncated, another model or engine) is logged, deleted and reported as a miss,
and the caller rebuilds. The format itself lives in inference/snapshot.py. `save_state` and
`restore_state` are what the document store calls for one document (builder.py, memory.py).

Writes run on a background thread: writing a 2,000-token state's 150 MB took the engine thread
up to 1.5 s with the CPU busy, and the state being written is no longer used by anyone (its
document was closed or evicted). Until written it stays in memory. A save never waits for the
writes before it (a second save used to wait for the first on the engine thread, and an
eviction of two long documents held keystrokes back for a whole write); instead a build waits
for every pending write (`flush`, off the engine thread) after making room and before its first
window, so the states it evicted are released before its windows take their place. A `load` of
a snapshot still being written waits for it; `released` is called after each write lets its
state go (the server returns the freed memory to the OS there).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import inference

from ..settings import Settings
from .state import DocumentState

log = logging.getLogger(__name__)

SUFFIX = ".vqsnap"
STALE_TMP_S = 3600.0  # a temporary file this old is a write that died: delete it when trimming


class SnapshotStore:
    """Snapshots in one folder, with counters the server reports (scores request, `memory`)."""

    def __init__(
        self,
        folder: str | os.PathLike | None = None,
        background: bool = True,
        released: Callable[[], None] = lambda: None,
    ) -> None:
        self.folder = Path(folder) if folder is not None else inference.snapshot_dir()
        self.saved = self.restored = self.rejected = self.misses = self.evicted = 0
        self.background = background
        self._pending: dict[Path, threading.Event] = {}  # writes queued or under way
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._writer: threading.Thread | None = None
        self.released = released  # after a write let its state go (writer thread)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def prepare(self, model: inference.LoadedModel) -> None:
        """Hash the model now (while it loads) rather than at the first open that looks for a snapshot."""
        inference.model_fingerprint(model)

    def save(self, doc: inference.IncrementalDocument, cap_bytes: float) -> bool:
        """Store `doc` (unless the same tokens are stored already) and trim the folder to `cap_bytes`;
        in the background unless the store was made with background=False. The caller must not
        change `doc` afterwards. False when nothing will be stored: the state alone is over the cap
        (or, written in the foreground, the write failed: logged)."""
        if doc.state_bytes() > cap_bytes:
            log.info("no snapshot: the state (%d bytes) is over the cache cap (%d bytes)", doc.state_bytes(), cap_bytes)
            return False
        path = self.path(inference.snapshot_key(doc.model, doc.token_ids))
        with self._lock:
            if path in self._pending:
                return True
            if path.exists():
                try:
                    os.utime(path)
                    return True
                except OSError:  # deleted meanwhile: write it again
                    pass
            if self.background:
                self._pending[path] = threading.Event()
                self._queue.put((doc, path, cap_bytes))
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_loop, name="vq-snapshots", daemon=True)
                    self._writer.start()
                return True
        return self._write(doc, path, cap_bytes)

    def _write_loop(self) -> None:
        while True:
            doc, path, cap = self._queue.get()
            try:
                self._write(doc, path, cap)
            except Exception:  # never let the writer die: a failed write is a missing snapshot
                log.exception("writing snapshot %s failed", path)
            finally:
                # let the state go before blocking on the next get(): a local still bound there kept
                # the last evicted or closed state alive (hundreds of MiB) for as long as the queue was empty
                doc = None
                self.released()
                with self._lock:
                    done = self._pending.pop(path, None)
                if done is not None:
                    done.set()

    def _write(self, doc: inference.IncrementalDocument, path: Path, cap_bytes: float) -> bool:
        t0 = time.perf_counter()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            size = inference.save_snapshot(doc, path, path.stem)
        except (OSError, inference.SnapshotError) as e:
            log.warning("could not write a snapshot to %s: %s", self.folder, e)
            return False
        self.saved += 1
        log.info("wrote snapshot %s (%d bytes, %.3f s)", path.name, size, time.perf_counter() - t0)
        self.trim(cap_bytes, keep=path)
        return path.exists()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write is done; False if `timeout` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                pending = next(iter(self._pending.values()), None)
            if pending is None:
                return True
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not pending.wait(left) and left == 0.0:
                return False

    def load(self, model: inference.LoadedModel, ids: Sequence[int]) -> inference.IncrementalDocument | None:
        """The stored state of exactly these tokens under this model, or None (a miss, or a
        snapshot that failed its checks: logged and deleted)."""
        path = self.path(inference.snapshot_key(model, ids))
        with self._lock:
            writing = self._pending.get(path)
        if writing is not None:
            writing.wait()
        t0 = time.perf_counter()
        try:
            doc = inference.load_snapshot(model, path, ids, path.stem)
        except FileNotFoundError:
            self.misses += 1
            return None
        except (OSError, inference.SnapshotError) as e:
            log.warning("ignored snapshot %s (%s); rebuilding the state from the text", path, e)
            self.rejected += 1
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(path)  # most recently used
        except OSError:
            pass
        self.restored += 1
        log.info("restored snapshot %s (%d tokens, %.3f s)", path.name, len(ids), time.perf_counter() - t0)
        return doc

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        try:
            names = list(self.folder.iterdir())
        except OSError:
            return out
        for p in names:
            if not (p.name.endswith(SUFFIX) or p.name.endswith(".tmp")):
                continue
            try:
                st = p.stat()
            except OSError:  # deleted meanwhile (another server sharing the folder)
                continue
            out.append((st.st_mtime, st.st_size, p))
        return out

    def trim(self, cap_bytes: float, keep: Path | None = None) -> None:
        """Delete least recently used snapshots until the folder holds at most `cap_bytes`
        (`keep`, the one just written, goes last: it is deleted only if it alone is over the cap)."""
        entries = self._entries()
        now = time.time()
        total = sum(size for _, size, _ in entries)
        for mtime, size, p in sorted(entries, key=lambda e: (e[2] == keep, e[0])):
            stale_tmp = p.name.endswith(".tmp") and now - mtime > STALE_TMP_S
            if total <= cap_bytes and not stale_tmp:
                continue
            if p.name.endswith(".tmp") and not stale_tmp:
                continue  # a write in progress
            try:
                p.unlink()
            except OSError:
                continue
            total -= size
            self.evicted += not stale_tmp
            log.info("deleted snapshot %s (cache cap %d bytes)", p.name, cap_bytes)

    def stats(self) -> dict:
        entries = [e for e in self._entries() if e[2].name.endswith(SUFFIX)]
        return {
            "folder": str(self.folder),
            "files": len(entries),
            "bytes": sum(s for _, s, _ in entries),
            "saved": self.saved,
            "restored": self.restored,
            "rejected": self.rejected,
            "misses": self.misses,
            "evicted": self.evicted,
            "pending": len(self._pending),
        }


def save_state(store: SnapshotStore, st: DocumentState, settings: Settings) -> None:
    """Leave the state of a document being closed or evicted in the snapshot cache."""
    saved = st.doc is not None and not st.in_doubt and settings.snapshots
    st.snapshot_left(st.doc.token_ids if saved and store.save(st.doc, settings.snapshot_cache_mb * 2**20) else None)


def restore_state(store: SnapshotStore, model: inference.LoadedModel, st: DocumentState, settings: Settings) -> bool:
    """Give `st` its state from a snapshot, if one holds its tokens or those its evicted state
    had (then the edits since are applied incrementally); False: build it from the text."""
    if not settings.snapshots or st.in_doubt:
        return False
    t0 = time.perf_counter()
    ids = st.tracked.ids
    doc = store.load(model, ids)
    if doc is None and st.snapshot_ids is not None and st.snapshot_ids != ids:
        doc = store.load(model, st.snapshot_ids)
        if doc is not None:
            try:
                doc.apply(inference.diff(st.snapshot_ids, ids))
                if doc.token_ids != ids:
                    raise ValueError("engine tokens disagree with the text's tokens")
            except Exception as e:  # the restored state is in doubt: build from the text
                log.warning("could not bring the snapshot of %s up to date (%s); rebuilding", st.uri, e)
                doc = None
    st.snapshot_left(None)
    if doc is None:
        return False
    st.restored(doc, {"restore_seconds": time.perf_counter() - t0, "tokens": len(ids)})
    log.info("restored the state of %s from a snapshot (%d tokens)", st.uri, len(ids))
    return True
