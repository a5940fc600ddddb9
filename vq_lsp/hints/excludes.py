"""Exclude globs: files of a workspace that get no hints (generated docs, vendored text, changelogs).

Patterns are relative to the workspace root, with `/` between folders whatever the system:
`*` matches within one name, `**` any number of folders, `?` one character. A pattern without a
slash matches a file or folder name anywhere (`CHANGELOG.md`, `*.min.md`); a pattern naming a
folder excludes everything under it (`docs/generated` as `docs/generated/**`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import PurePath, PurePosixPath
from urllib.parse import unquote, urlparse


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern:
    pattern = pattern.strip().replace("\\", "/").lstrip("/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    anywhere = "/" not in pattern.rstrip("/")
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out).rstrip("/")
    return re.compile(("(?:.*/)?" if anywhere else "") + body + "(?:/.*)?")


def matches(relative: str, patterns: Iterable[str]) -> bool:
    """Whether a path relative to the root (`/`-separated) matches any pattern."""
    return any(p.strip() and _regex(p).fullmatch(relative) for p in patterns)


def path_of(uri_or_path: str) -> PurePath | None:
    """The file path a `file:` uri (or a plain path) names; None for other schemes (untitled:)."""
    if "://" not in uri_or_path and not uri_or_path.startswith("untitled:"):
        return PurePath(uri_or_path)
    parsed = urlparse(uri_or_path)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if re.match(r"^/[A-Za-z]:", path):  # file:///C:/x on Windows
        path = path[1:]
    return PurePath(path)


def excluded(uri_or_path: str, root: str | None, patterns: Iterable[str]) -> bool:
    """Whether a document under the workspace root matches an exclude pattern (outside it: never)."""
    patterns = tuple(patterns)
    if not patterns:
        return False
    path = path_of(uri_or_path)
    if path is None:
        return False
    if root is not None:
        try:
            path = path.relative_to(PurePath(root))
        except ValueError:
            return False
    elif path.is_absolute():
        return False
    return matches(PurePosixPath(*path.parts).as_posix(), patterns)
