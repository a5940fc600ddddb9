"""Where revision histories come from: a folder of files, a file's git history, a JSONL file.

Every source yields (document name, revision label, text). Bad files never abort a run: an
unreadable or binary file is reported and skipped, non-UTF-8 text is decoded with replacement
characters and a warning. Problems are reported through the `warn` callback.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path
from typing import Callable, Iterator

Revision = tuple[str, str, str]  # (document, revision label, text)
Warn = Callable[[str], None]


def natural_key(name: str) -> list:
    """'rev10' sorts after 'rev9': digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def decode(data: bytes, label: str, warn: Warn) -> str | None:
    """Text of a file's bytes; None (with a warning) for binary data."""
    if b"\x00" in data[:8192]:
        warn(f"{label}: binary file, skipped")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        warn(f"{label}: not valid UTF-8 ({e.reason} at byte {e.start}); decoded with replacement characters")
        return data.decode("utf-8", errors="replace")


def from_folder(folder: Path, order: str, warn: Warn) -> Iterator[Revision]:
    """Every file in a folder is one revision of one document, in natural name or mtime order."""
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    if not files:
        raise ValueError(f"{folder}: no revision files in this folder")
    key = (lambda p: (p.stat().st_mtime, natural_key(p.name))) if order == "mtime" else (lambda p: natural_key(p.name))
    for path in sorted(files, key=key):
        try:
            data = path.read_bytes()
        except OSError as e:
            warn(f"{path}: cannot be read ({e.strerror}), skipped")
            continue
        text = decode(data, str(path), warn)
        if text is not None:
            yield folder.name, path.name, text


def from_git(file: Path, warn: Warn) -> Iterator[Revision]:
    """Every commit that changed `file`, oldest first."""
    file = file.resolve()
    cwd = file.parent

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout

    try:
        top = Path(git("rev-parse", "--show-toplevel").decode().strip())
        rel = file.relative_to(top).as_posix()
        commits = git("log", "--follow", "--format=%H", "--reverse", "--", rel).decode().split()
    except (subprocess.CalledProcessError, FileNotFoundError, ValueError) as e:
        raise ValueError(f"{file}: cannot read its git history ({e})") from None
    if not commits:
        raise ValueError(f"{file}: no commits touch this file")
    for commit in commits:
        try:
            data = git("show", f"{commit}:{rel}")
        except subprocess.CalledProcessError:
            warn(f"{file}@{commit[:10]}: not present under this path (renamed?), skipped")
            continue
        text = decode(data, f"{file}@{commit[:10]}", warn)
        if text is not None:
            yield file.name, commit[:10], text


def from_jsonl(path: Path, warn: Warn) -> Iterator[Revision]:
    """Rows {doc, revisions: [{commit?, text}, ...]} (gzip allowed), as in shared/data/revisions."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                name, revs = str(row["doc"]), row["revisions"]
                for i, rev in enumerate(revs):
                    yield name, str(rev.get("commit") or i), str(rev["text"])
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                warn(f"{path}:{number}: not a revision row ({type(e).__name__}: {e}), skipped")
