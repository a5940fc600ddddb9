"""The word lists on disk: the workspace's (committed with the project) and the user's (every project).

- workspace dictionary: `.vq-lsp-words.txt` at the workspace root, one word a line (`#` comments);
- user dictionary: `words.txt` in the user data folder (platformdirs; `VQ_LSP_USER_DICTIONARY`
  names another file, for tests or a shared machine);
- the configuration file's `words` (config_file.py).

`load` reads them into one `Dictionary`; `append_edit` says where and what to write to add a word,
for the quick fix that adds it (the editor writes the file: the fix is a plain WorkspaceEdit).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..hints.dictionary import Dictionary, parse_word_list

APP = "vq-lsp"
WORKSPACE_WORDS = ".vq-lsp-words.txt"
USER_WORDS = "words.txt"
USER_DICTIONARY_ENV = "VQ_LSP_USER_DICTIONARY"


def user_dictionary_path() -> Path:
    env = os.environ.get(USER_DICTIONARY_ENV)
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir(APP)) / USER_WORDS


def workspace_dictionary_path(root: Path) -> Path:
    return root / WORKSPACE_WORDS


def read_words(path: Path) -> tuple[list[str], str | None]:
    """The words of a word list (none when it does not exist) and a problem reading it, if any."""
    try:
        return parse_word_list(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return [], None
    except (OSError, UnicodeDecodeError) as e:
        return [], f"{path}: cannot read this word list ({e}); its words are not used"


def load(
    root: Path | None, config_words: Iterable[str] = (), buffers: Mapping[Path, str] | None = None
) -> tuple[Dictionary, list[str]]:
    """The workspace's, the user's and the configuration file's words together, and the problems met.
    `buffers`: the text of word lists open in an editor, read instead of their files."""
    lists, problems = [list(config_words)], []
    paths = [user_dictionary_path()] + ([workspace_dictionary_path(root)] if root is not None else [])
    for path in paths:
        if buffers and path in buffers:
            lists.append(parse_word_list(buffers[path]))
            continue
        words, problem = read_words(path)
        lists.append(words)
        if problem:
            problems.append(problem)
    return Dictionary.of(*lists), problems


@dataclass(frozen=True)
class AppendEdit:
    """Adding a word to a word list: insert `text` at (line, UTF-16 character), the file's end."""

    path: Path
    exists: bool
    line: int
    character: int
    text: str


def append_edit(path: Path, word: str) -> AppendEdit:
    """Where and what to insert so that the word list at `path` ends with `word` on a line of its own."""
    try:
        content = path.read_text(encoding="utf-8")
        exists = True
    except (OSError, UnicodeDecodeError):
        content, exists = "", path.exists()
    lines = content.split("\n")
    last = lines[-1]
    prefix = "\n" if content and not content.endswith("\n") else ""
    return AppendEdit(path, exists, len(lines) - 1, len(last.encode("utf-16-le")) // 2, f"{prefix}{word}\n")
