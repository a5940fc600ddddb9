"""A workspace folder read once, as the batch commands use it: `vq-lsp check` and `vq-lsp score`
both choose hints under its configuration file, its grammar rules and its word lists, and warn
about the same problems in the same words (the server reads the same files, and keeps them
current, in server/workspace_files.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..hints.conventions import Conventions
from ..hints.grammar import Rules
from ..settings import Settings
from . import config_file, dictionaries


@dataclass(frozen=True)
class Workspace:
    """What a folder's files say: the settings under its configuration file, the grammar rules they
    name, the writer's words, and the problems met reading them (for a warning each)."""

    settings: Settings
    grammar_rules: Rules
    conventions: Conventions
    problems: list[str]


def read(root: Path) -> Workspace:
    config = config_file.load(root)
    settings = config.apply(Settings())
    rules = Rules.of(settings.grammar.rules)
    unknown = [f"grammar.rules: {name!r} is neither a Harper rule nor a lint kind; ignored" for name in rules.unknown()]
    words, problems = dictionaries.load(root, config.words)
    return Workspace(settings, rules, Conventions(words, str(root)), [*config.problems, *unknown, *problems])
