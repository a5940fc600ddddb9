"""The workspace's configuration file and word lists, as the server keeps them current.

At `initialize` the workspace root is taken from the first workspace folder (else `rootUri`); the
configuration file (vq_lsp/workspace/config_file.py) goes under the editor's settings, and the
dictionaries (vq_lsp/workspace/dictionaries.py) into the documents' `Conventions`. Both are read
again, with no restart, when the client reports a change of `vq-lsp.toml`, `pyproject.toml` or a
word list (`workspace/didChangeWatchedFiles`, registered dynamically where the client allows it)
or saves one of them (`textDocument/didSave`); every open document is then re-hinted.

The quick fixes that add a word (dictionary_actions.py) carry the edit of the word list and the
`vqLsp.addWord` command: the server learns the word at once, before the editor saves the file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from ..documents.events import SettingsChanged
from ..hints import excludes
from ..hints.conventions import Conventions
from ..settings import Settings, parse
from ..workspace import config_file, dictionaries

if TYPE_CHECKING:
    from .language_server import VQServer

log = logging.getLogger(__name__)

ADD_WORD = "vqLsp.addWord"
WATCH_REGISTRATION = "vq-lsp/watch-workspace-files"
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
        self.learned: set[str] = set()  # words added by a quick fix whose file edit may be unsaved
        self.conventions = Conventions()
        self._init_data: Any = None
        self._editor_data: Any = None

    def open(self, params: types.InitializeParams) -> None:
        self.root = root_of(params)
        self.read()

    def read(self) -> None:
        """Read the configuration file and the dictionaries again."""
        self.config = config_file.load(self.root)
        words, problems = dictionaries.load(self.root, self.config.words)
        self.problems += list(self.config.problems) + problems
        self.conventions = Conventions(words.union(self.learned), str(self.root) if self.root else None)

    def learn(self, word: str) -> None:
        self.learned.add(word)
        self.conventions = Conventions(self.conventions.dictionary.union([word]), self.conventions.root)

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

    def take_problems(self) -> list[str]:
        out, self.problems = self.problems, []
        return out


async def register_watchers(ls: VQServer) -> None:
    """Ask the client to report changes of the files that shape the hints, where it can."""
    caps = ls.client_capabilities.workspace
    watched = caps.did_change_watched_files if caps is not None else None
    if watched is None or not watched.dynamic_registration:
        return
    globs = [f"**/{name}" for name in (*config_file.WATCHED, dictionaries.WORKSPACE_WORDS)]
    user = dictionaries.user_dictionary_path()
    globs.append(str(user))
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern=g) for g in globs])
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
            id=WATCH_REGISTRATION, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)]))
    except Exception as e:  # a client that refuses: the files are still read again when saved
        log.info("could not register file watchers: %s", e)


def report_problems(ls: VQServer) -> None:
    for problem in ls.workspace_files.take_problems():
        ls.say("warning", f"vq-lsp: {problem}")


async def reload(ls: VQServer) -> None:
    """Read the files again and re-hint every open document under what they now say."""
    files = ls.workspace_files
    files.read()
    report_problems(ls)
    ls.docs.conventions = files.conventions
    await ls.apply_settings(REAPPLY)
    ls.refresh_all(SettingsChanged())


async def files_changed(ls: VQServer, uris: list[str]) -> None:
    """A change or save of these files: reload when one of them is ours."""
    paths = [excludes.path_of(u) for u in uris]
    if any(p is not None and ls.workspace_files.watches(Path(p)) for p in paths):
        await reload(ls)


def add_word(ls: VQServer, word: Any) -> None:
    """vqLsp.addWord: learn a word added to a dictionary by a quick fix, and re-hint every document."""
    if not isinstance(word, str) or not word.strip():
        return
    ls.workspace_files.learn(word.strip())
    ls.docs.conventions = ls.workspace_files.conventions
    ls.refresh_all(SettingsChanged())
