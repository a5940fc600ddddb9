"""The server's snapshot cache: engine states of closed and evicted documents on disk.

A document dropped for the memory budget, or closed, leaves its state in the user cache folder
(inference/paths.py) under a key made of the model's fingerprint and its token ids; when the
same tokens come back (reopened, or edited after an eviction) the state is read back instead of
rebuilt with a dense pass. The folder stays under a size cap: the least recently used files
(by modification time, which a hit refreshes) are deleted first. A snapshot that cannot be
trusted (corrupt, truncated, another model or engine) is logged, deleted and reported as a miss,
and the caller rebuilds. The format itself lives in inference/snapshot.py.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Sequence

import inference
from inference import paths, snapshot

log = logging.getLogger(__name__)

SUFFIX = ".vqsnap"
STALE_TMP_S = 3600.0  # a temporary file this old is a write that died: delete it when trimming


class SnapshotStore:
    """Snapshots in one folder, with counters the server reports (scores request, `memory`)."""

    def __init__(self, folder: str | os.PathLike | None = None) -> None:
        self.folder = Path(folder) if folder is not None else paths.snapshot_dir()
        self.saved = self.restored = self.rejected = self.misses = self.evicted = 0

    def path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def save(self, doc: inference.IncrementalDocument, cap_bytes: float) -> bool:
        """Write `doc` (unless the same tokens are stored already) and trim the folder to `cap_bytes`.
        False when nothing was stored: the state alone is over the cap, or the write failed (logged)."""
        if doc.state_bytes() > cap_bytes:
            log.info("no snapshot: the state (%d bytes) is over the cache cap (%d bytes)", doc.state_bytes(), cap_bytes)
            return False
        t0 = time.perf_counter()
        try:
            path = self.path(snapshot.document_key(doc.model, doc.token_ids))
            if path.exists():
                os.utime(path)
                return True
            self.folder.mkdir(parents=True, exist_ok=True)
            size = snapshot.write_document(doc, path, path.stem)
        except (OSError, snapshot.SnapshotError) as e:
            log.warning("could not write a snapshot to %s: %s", self.folder, e)
            return False
        self.saved += 1
        log.info("wrote snapshot %s (%d bytes, %.3f s)", path.name, size, time.perf_counter() - t0)
        self.trim(cap_bytes, keep=path)
        return path.exists()

    def load(self, model: inference.LoadedModel, ids: Sequence[int]) -> inference.IncrementalDocument | None:
        """The stored state of exactly these tokens under this model, or None (a miss, or a
        snapshot that failed its checks: logged and deleted)."""
        path = self.path(snapshot.document_key(model, ids))
        if not path.exists():
            self.misses += 1
            return None
        t0 = time.perf_counter()
        try:
            doc = snapshot.read_document(model, path, path.stem, ids)
        except (OSError, snapshot.SnapshotError) as e:
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
        return {"folder": str(self.folder), "files": len(entries), "bytes": sum(s for _, s, _ in entries),
                "saved": self.saved, "restored": self.restored, "rejected": self.rejected, "misses": self.misses,
                "evicted": self.evicted}
