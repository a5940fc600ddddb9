"""The workspace configuration file: what a team commits so every writer gets the same hints.

`vq-lsp.toml` at the workspace root, else the `[tool.vq-lsp]` table of the root's pyproject.toml;
when both exist, vq-lsp.toml wins and pyproject.toml's table is not read (as ruff.toml over
pyproject.toml). Keys are the editor settings' names, in kebab-case, snake_case or camelCase
(`typo-threshold`, `[diagnostics]`), plus `words`, a list of dictionary words. Values are checked
as editor settings are: a bad one falls back, with one message naming the file and the key, and
the rest of the file still applies; a file that is not TOML at all gives one message and no
settings.

Precedence (later wins): built-in defaults, command-line flags, this file, the editor's settings
(`initializationOptions`, then `workspace/didChangeConfiguration`): an editor setting is a
writer's personal choice, and only the keys the editor actually sends override the file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..settings import Settings, parse

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_NAME = "vq-lsp.toml"
PYPROJECT = "pyproject.toml"
WORDS_KEY = "words"
WATCHED = (CONFIG_NAME, PYPROJECT)  # file names whose change means: read the configuration again


@dataclass(frozen=True)
class WorkspaceConfig:
    """What the workspace's configuration file holds; empty when there is none."""

    path: Path | None = None  # the file read
    settings: dict[str, Any] = field(default_factory=dict)  # settings data, as an editor would send it
    words: tuple[str, ...] = ()  # dictionary words
    problems: tuple[str, ...] = ()  # one message per bad key or unreadable file, each naming the file

    def apply(self, base: Settings) -> Settings:
        """`base` with the file's settings on top (bad values were reported by `load`: `problems`)."""
        return parse(self.settings, base)[0] if self.settings else base


def _snake_keys(data: Any) -> Any:
    """TOML's kebab-case keys as settings' snake_case (camelCase is left to settings.parse)."""
    if isinstance(data, dict):
        return {str(k).replace("-", "_"): _snake_keys(v) for k, v in data.items()}
    return data


def _read_toml(path: Path) -> tuple[dict | None, str | None]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), None
    except tomllib.TOMLDecodeError as e:
        return None, f"{path}: not valid TOML ({e}); its settings are not used"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"{path}: cannot be read ({e}); its settings are not used"


def find(root: Path | None) -> tuple[Path | None, bool]:
    """The configuration file of a workspace root and whether it is a pyproject.toml (None: none)."""
    if root is None:
        return None, False
    own = root / CONFIG_NAME
    if own.is_file():
        return own, False
    pyproject = root / PYPROJECT
    return (pyproject, True) if pyproject.is_file() else (None, False)


def load(root: Path | None) -> WorkspaceConfig:
    """The workspace's configuration (an empty one when it has no file or its pyproject.toml no table)."""
    path, is_pyproject = find(root)
    if path is None:
        return WorkspaceConfig()
    data, problem = _read_toml(path)
    if data is None:
        return WorkspaceConfig(path, problems=(problem,))
    where = ""
    if is_pyproject:
        data = data.get("tool", {}).get("vq-lsp")
        where = "tool.vq-lsp."
        if data is None:
            return WorkspaceConfig()
        if not isinstance(data, dict):
            return WorkspaceConfig(path, problems=(f"{path}: tool.vq-lsp must be a table; not used",))
    problems = []
    data = _snake_keys(data)
    words = data.pop(WORDS_KEY, [])
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        problems.append(f"{path}: {where}words must be a list of strings; ignored")
        words = []
    _, warnings = parse(data, Settings())
    problems += [f"{path}: {where}{w}" for w in warnings]
    return WorkspaceConfig(path, data, tuple(words), tuple(problems))
