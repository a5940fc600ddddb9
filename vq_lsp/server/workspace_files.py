"""The workspace's configuration file and word lists, as the server keeps them current.

At `initialize` the workspace root is taken from the first workspace folder (else `rootUri`); the
configuration file (vq_lsp/workspace/config_file.py) goes under the editor's settings, and the
dictionaries (vq_lsp/workspace/dictionaries.py) into the documents' `Conventions`. Both are read
again, with no restart, when the client reports a change of `vq-lsp.toml`, `pyproject.toml` or a
word list (`workspace/didChangeWatchedFiles`, registered dynamically where the client allows it)
or saves one of them (`textDocument/didSave`); every open document is then re-hinted. Not every
editor reports changes (Neovim offers no file watching by default, and a file written by another
program is never saved in the editor), so the server also looks at the files' sizes and times
itself every POLL_S seconds and reads them again when one changed: a setting written to
`vq-lsp.toml` applies within a few seconds in any editor, and a bad value is reported at once.

A word list open in the editor counts as its buffer says, saved or not: the quick fixes that add
a word (dictionary_actions.py) are plain edits of the word list, which Neovim applies to a buffer
it opens (and does not save); the server reads the buffer once the change is processed.
"""

from __future__ import annotations

import asyncio
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

WATCH_REGISTRATION = "vq-lsp/watch-workspace-files"
POLL_S = 1.0  # how often the server looks at the files' sizes and times (four stat calls)
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

    def watch_buffer(self, ls: VQServer, uri: str, closed: bool = False) -> None:
        """didOpen, didChange, didClose: when the document is a word list, read it again (a task)."""
        if self.word_list(uri) is not None:
            self.spawn(buffer_changed(ls, uri, closed))

    def spawn(self, job) -> None:
        """Run a coroutine as a task the server keeps until it ends."""
        task = asyncio.ensure_future(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def take_problems(self) -> list[str]:
        out, self.problems = self.problems, []
        return out


def start_polling(ls: VQServer) -> None:
    """Read the files again whenever one changes on disk, whether or not the editor says so."""
    ls.workspace_files.spawn(poll(ls))


async def poll(ls: VQServer) -> None:
    files = ls.workspace_files
    while True:
        await asyncio.sleep(POLL_S)
        try:
            if files.changed_on_disk():
                await reload(ls)
        except Exception:  # a failed read must not stop the polling; the next change is read again
            log.exception("reading the workspace files again failed")


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
        watchers=[types.FileSystemWatcher(glob_pattern=g) for g in globs]
    )
    try:
        await ls.client_register_capability_async(
            types.RegistrationParams(
                registrations=[
                    types.Registration(
                        id=WATCH_REGISTRATION, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
                    )
                ]
            )
        )
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
    """A change or save of these files: reload when one of them is ours and the polling has not
    read this change already (one message per bad value, not one per way of hearing of it)."""
    paths = [excludes.path_of(u) for u in uris]
    ours = any(p is not None and ls.workspace_files.watches(Path(p)) for p in paths)
    if ours and ls.workspace_files.changed_on_disk():
        await reload(ls)


async def buffer_changed(ls: VQServer, uri: str, closed: bool = False) -> None:
    """A word list opened, edited or closed in the editor: read its words from the buffer (once the
    change is processed), or from disk again once it is closed."""
    files = ls.workspace_files
    path = files.word_list(uri)
    if path is None:
        return
    if closed:
        files.buffers.pop(path, None)
    else:
        await ls.coalescer.caught_up(uri)
        st = ls.docs.states.get(uri)
        if st is None:
            return
        files.buffers[path] = st.text
    await reload(ls)
