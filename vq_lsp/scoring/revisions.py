"""Where revision histories come from: a folder of files, a file's git history, a JSONL file.

Every source yields (document name, revision label, text). Bad files never abort a run: an
unreadable or binary file is reported and skipped, non-UTF-8 text is decoded with replacement
characters and a warning. Problems are reported through the `warn` callback. `RevisionSource`
adds what is known before the first revision is read: how many there will be (a progress bar's
total) and, for a git history, the date and subject of the commit behind each revision label.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass(frozen=True)
class CommitHeader:
    """What names a git revision to a reader: the commit's short hash (the revision label), its
    author date (YYYY-MM-DD, in the author's time zone) and the first line of its message."""

    short_hash: str
    date: str
    subject: str


@dataclass
class RevisionSource:
    """Revisions to score, with what is known before they are read: `expected` revisions (None when
    unknown; an upper bound, as a bad file is skipped) and, for a git history, each revision
    label's commit."""

    revisions: Iterator[Revision]
    expected: int | None = None
    commits: dict[str, CommitHeader] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Revision]:
        return self.revisions


def revision_files(folder: Path) -> list[Path]:
    """The files of a folder of revisions (hidden files are not revisions), unsorted."""
    return [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]


def folder_source(folder: Path, order: str, warn: Warn) -> RevisionSource:
    return RevisionSource(from_folder(folder, order, warn), expected=len(revision_files(folder)))


def from_folder(folder: Path, order: str, warn: Warn) -> Iterator[Revision]:
    """Every file in a folder is one revision of one document, in natural name or mtime order."""
    files = revision_files(folder)
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


GIT_MERGES = ("first-parent", "all")
_NO_BLOB = set("0")


@dataclass(frozen=True)
class GitRevision:
    """One commit that touched the file: where the file was then, and its content (a blob id)."""

    commit: str
    path: str
    blob: str | None  # None: the commit deleted the file
    mode: str
    status: str  # A, M, R100, D, ... as `git log --raw` prints it
    date: str = ""  # author date, YYYY-MM-DD
    subject: str = ""  # the first line of the commit message


def _git(cwd: Path, *args: str) -> bytes:
    """Run git; a missing git or a failing command becomes a ValueError with git's own words."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True)
    except FileNotFoundError:
        raise ValueError("--git needs the `git` program, which is not installed or not on PATH") from None
    if proc.returncode:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise subprocess.CalledProcessError(
            proc.returncode, ["git", *args], proc.stdout, message[-1] if message else ""
        )
    return proc.stdout


LOG_FORMAT = "--format=%x01%H%x00%aI%x00%s"
_RECORD = re.compile(rb"\x01(?=[0-9a-f]{40,64}\x00)")  # a record's start: a \x01 in a subject is not one


def parse_raw_log(out: bytes) -> list[GitRevision]:
    """`git log --raw --no-abbrev -z` output in LOG_FORMAT -> one GitRevision per commit, newest first.

    A record is `\\x01 HASH NUL DATE NUL SUBJECT NUL` and the raw entries,
    `:modes... blobs... STATUS NUL path [NUL path]`; the last path is where the file lives after
    the commit, the last blob and mode are its content then (also for the `::` entries of
    combined merge diffs).
    """
    revs = []
    for record in _RECORD.split(out)[1:]:
        head = record.split(b"\0", 3)
        commit, date, subject = (head + [b"", b"", b""])[:3]
        commit = commit.decode().strip()
        date = date.decode(errors="replace").strip()[:10]
        subject = subject.decode("utf-8", errors="replace").strip()
        rest = head[3] if len(head) > 3 else b""
        fields = rest.lstrip(b"\n").split(b"\0")
        entries, i = [], 0
        while i < len(fields):
            meta = fields[i].decode(errors="replace").strip()
            if not meta.startswith(":"):
                i += 1
                continue
            parts = meta.lstrip(":").split()
            status = parts[-1]
            npaths = 2 if status[:1] in ("R", "C") else 1
            paths = [f.decode("utf-8", errors="surrogateescape") for f in fields[i + 1 : i + 1 + npaths]]
            i += 1 + npaths
            parents = len(meta) - len(meta.lstrip(":"))
            blob, mode = parts[-2], parts[parents]
            entries.append(
                GitRevision(commit, paths[-1], None if set(blob) <= _NO_BLOB else blob, mode, status, date, subject)
            )
        if entries:
            # a commit that deletes one path and adds the followed one lists both: the one with content wins
            revs.append(next((e for e in entries if e.blob is not None), entries[-1]))
    return revs


def git_history(file: Path, merges: str = "first-parent") -> tuple[Path, list[GitRevision]]:
    """The commits that touched `file`, oldest first, following renames: (repository root, commits).

    `git log --follow --reverse` stops at the last rename (git applies --reverse before
    --follow has found the older names), so the log is read newest first and reversed here.
    merges="first-parent" walks the main line only (a merge counts as one commit, compared with
    its first parent); "all" lists the commits of merged branches too, in topological order.
    Raises ValueError, with what was wrong, for a path outside any repository or unknown to git.
    """
    if merges not in GIT_MERGES:
        raise ValueError(f"--git-merges must be one of {', '.join(GIT_MERGES)}, got {merges!r}")
    file = Path(os.path.abspath(file))
    if file.is_dir():
        raise ValueError(f"{file}: is a folder; --git takes one file (its history is scored)")
    cwd = file.parent
    while not cwd.is_dir():  # a file deleted from the work tree may sit in a deleted folder
        if cwd.parent == cwd:
            break
        cwd = cwd.parent
    try:
        top = Path(_git(cwd, "rev-parse", "--show-toplevel").decode().strip())
    except subprocess.CalledProcessError as e:
        raise ValueError(f"{file}: not inside a git repository ({e.stderr})") from None
    try:
        rel = file.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        raise ValueError(f"{file}: lies outside its repository {top} (a symbolic link?)") from None
    log = ["log", "--follow", "--raw", "--no-abbrev", "-z", LOG_FORMAT, "--no-color", "--no-ext-diff"]
    log += ["--first-parent", "--diff-merges=first-parent"] if merges == "first-parent" else ["--topo-order", "--cc"]
    try:
        revs = parse_raw_log(_git(top, *log, "--", rel))
    except subprocess.CalledProcessError as e:
        if "does not have any commits" in e.stderr or "bad default revision" in e.stderr:
            raise ValueError(f"{file}: the repository {top} has no commits yet") from None
        raise ValueError(f"{file}: git cannot read its history ({e.stderr})") from None
    if not revs:
        tracked = _git(top, "ls-files", "--", rel).strip()
        why = (
            "it is staged but not committed yet" if tracked else "git does not know this path (untracked or misspelt?)"
        )
        raise ValueError(f"{file}: no commit touches this file: {why}")
    return top, revs[::-1]


def from_git(file: Path, warn: Warn, note: Warn | None = None, merges: str = "first-parent") -> Iterator[Revision]:
    """Every commit that changed `file`'s content, oldest first, across renames (see `git_source`)."""
    return git_source(file, warn, note, merges).revisions


def git_source(file: Path, warn: Warn, note: Warn | None = None, merges: str = "first-parent") -> RevisionSource:
    """Every commit that changed `file`'s content, oldest first, across renames, with its commit header.

    The history is read (and every problem with the path raised as ValueError) before the
    first revision is yielded. A commit that leaves the content as it was (a pure rename, a
    merge that kept the main line's text) is not a revision; a deletion is not one either, and
    the restored file continues the chain. `note` hears what was followed; `warn` what was lost.
    """
    note = note or warn
    top, revs = git_history(file, merges)
    name = Path(file).name
    renames = [(a.path, b.path) for a, b in zip(revs, revs[1:]) if a.path != b.path and b.blob is not None]
    content = [r for r in revs if r.blob is not None]
    distinct = sum(1 for i, r in enumerate(content) if i == 0 or r.blob != content[i - 1].blob)
    said = f"{name}: {len(revs)} commits touch it ({merges} history)"
    if renames:
        said += "; followed " + ", ".join(f"{a} -> {b}" for a, b in renames)
    note(said + f"; {distinct} distinct contents are scored")
    if _git(top, "rev-parse", "--is-shallow-repository").strip() == b"true":
        warn(f"{top}: a shallow clone; history before its oldest fetched commit is missing")

    def texts() -> Iterator[Revision]:
        last_blob = None
        deleted_at = None
        for rev in revs:
            label = f"{rev.path}@{rev.commit[:10]}"
            if rev.blob is None:
                deleted_at = rev.commit[:10]
                continue
            if deleted_at is not None:
                note(f"{label}: restored after its deletion in {deleted_at}; scored as an edit of the last content")
                deleted_at = None
            if rev.blob == last_blob:
                continue
            last_blob = rev.blob
            if rev.mode == "160000":
                warn(f"{label}: a submodule, not a file, skipped")
                continue
            if rev.mode == "120000":
                warn(f"{label}: a symbolic link, not a file, skipped")
                continue
            try:
                data = _git(top, "cat-file", "blob", rev.blob)
            except subprocess.CalledProcessError as e:
                warn(f"{label}: content cannot be read ({e.stderr}), skipped")
                continue
            text = decode(data, label, warn)
            if text is not None:
                yield name, rev.commit[:10], text
        if deleted_at is not None:
            warn(f"{name}: deleted in {deleted_at} and not restored; its last content was scored last")

    commits = {r.commit[:10]: CommitHeader(r.commit[:10], r.date, r.subject) for r in content}
    return RevisionSource(texts(), expected=distinct, commits=commits)


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
