"""The workspace's configuration file and word lists, as the server keeps them current.

At `initialize` the workspace root is taken from the first workspace folder (else `rootUri`); the
configuration file (vq_lsp/workspace/config_file.py) goes under the editor's settings, and the
dictionaries (vq_lsp/workspace/dictionaries.py) into the documents' `Conventions`. Both are read
again, with no restart, when the client reports a change of `vq-lsp.toml`, `pyproject.toml` or a
word list (`workspace/didChangeWatchedFiles`, registered dynamically where the client allows it)
or saves one of them (`textDocument/didSave`); every open document is then re-hinted. Not every
editor reports changes (Neovim offers no file watching by default, and a file written by another
program is never saved in the editor), so the server also looks at the files' sizes and times
itself every few seconds (workspace_sync.py) and reads them again when one changed: a setting written to
`vq-lsp.toml` applies within a few seconds in any editor, and a bad value is reported at once.

A word list open in the editor counts as its buffer says, saved or not: the quick fixes that add
a word (dictionary_actions.py) are plain edits of the word list, which Neovim applies to a buffer
it opens (and does not save); the server reads the buffer once the change is processed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..hints import excludes
from ..hints.conventions import Conventions
from ..settings import Settings, parse
from ..workspace import config_file, dictionaries

log = logging.getLogger(__name__)

REAPPLY = object()  # apply_settings(REAPPLY): the editor's last settings again, over a re-read file


def root_of(params: types.InitializeParams) -> Path | None:
    """The workspace root folder an editor names at initialize (its first workspace folder)."""
    uris = [f.uri for f in params.workspace_folders or []] + [params.root_uri or ""]
    for uri in uris:
        path = excludes.path_of(uri) if uri else None
        if path is not None:
            return Path(path)
    return Path(params.root_path) if params.root_path else None


class WorkspaceFiles:
    """The root, the configuration file, the word lists and the editor's settings, layered."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.config = config_file.WorkspaceConfig()
        self.problems: list[str] = []  # not yet shown to the user
        self.buffers: dict[Path, str] = {}  # word lists open in the editor: their unsaved text wins
        self.conventions = Conventions()
        self._init_data: Any = None
        self._editor_data: Any = None
        self._tasks: set[asyncio.Future] = set()
        self._seen: tuple = ()  # the files' stat fingerprint when last read

    def open(self, params: types.InitializeParams) -> None:
        self.root = root_of(params)
        self.read()

    def read(self) -> None:
        """Read the configuration file and the dictionaries again."""
        self._seen = self.fingerprint()
        self.config = config_file.load(self.root)
        words, problems = dictionaries.load(self.root, self.config.words, self.buffers)
        self.problems += list(self.config.problems) + problems
        self.conventions = Conventions(words, str(self.root) if self.root else None)

    def watched_paths(self) -> list[Path]:
        """Every file whose content shapes the hints: the configuration files and the word lists."""
        paths = [dictionaries.user_dictionary_path()]
        if self.root is not None:
            paths += [self.root / name for name in config_file.WATCHED]
            paths.append(dictionaries.workspace_dictionary_path(self.root))
        return paths

    def fingerprint(self) -> tuple:
        """(size, mtime) of each watched file, None for a missing one: what a change on disk moves."""
        out = []
        for path in self.watched_paths():
            try:
                st = path.stat()
                out.append((st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    def changed_on_disk(self) -> bool:
        return self.fingerprint() != self._seen

    def word_list(self, uri: str) -> Path | None:
        """The word list a document is, if it is one."""
        path = excludes.path_of(uri)
        if path is None:
            return None
        path = Path(path)
        lists = [dictionaries.user_dictionary_path()]
        if self.root is not None:
            lists.append(dictionaries.workspace_dictionary_path(self.root))
        return path if path in lists else None

    def settings(self, defaults: Settings, data: Any, initial: bool) -> tuple[Settings, list[str]]:
        """Defaults, then the configuration file, then initializationOptions, then the editor's last
        settings; warnings for `data` only (REAPPLY: none)."""
        reapply = data is REAPPLY
        if initial:
            self._init_data = data
        elif not reapply:
            self._editor_data = data
        base = parse(self._init_data, self.config.apply(defaults))[0] if not initial else None
        if initial:
            return parse(data, self.config.apply(defaults))
        new, warnings = parse(self._editor_data, base)
        return new, [] if reapply else warnings

    def watches(self, path: Path) -> bool:
        names = {*config_file.WATCHED, dictionaries.WORKSPACE_WORDS}
        return path.name in names or path == dictionaries.user_dictionary_path()

    def spawn(self, job) -> None:
        """Run a coroutine as a task the server keeps until it ends."""
        task = asyncio.ensure_future(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def take_problems(self) -> list[str]:
        out, self.problems = self.problems, []
        return out
