"""Keeping the server in step with its workspace files (workspace_files.py): the client asked to
report their changes, the files polled where it does not, and every open document re-hinted
under what they now say. Apart from WorkspaceFiles, which the server owns, because these drive
the server: they take it as their argument."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from ..documents.events import SettingsChanged
from ..hints import excludes
from ..workspace import config_file, dictionaries
from .workspace_files import REAPPLY

if TYPE_CHECKING:
    from .language_server import VQServer

log = logging.getLogger(__name__)

WATCH_REGISTRATION = "vq-lsp/watch-workspace-files"
POLL_S = 1.0  # how often the server looks at the files' sizes and times (four stat calls)


def watch_buffer(ls: VQServer, uri: str, closed: bool = False) -> None:
    """didOpen, didChange, didClose: when the document is a word list, read it again (a task)."""
    if ls.workspace_files.word_list(uri) is not None:
        ls.workspace_files.spawn(buffer_changed(ls, uri, closed))


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
