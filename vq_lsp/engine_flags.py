"""The engine's command-line flags, declared once for every command that loads a model.

`vq-lsp serve`, `vq-lsp score`, `vq-lsp check` and the benchmarks that load the engine take the same flags
under the same names, each with one default: the server setting of the same name (vq_lsp.settings.Settings),
so a text is scored the same way whichever command runs it unless a flag says otherwise. docs/cli.md lists
them. Values are checked by inference.argtypes when a flag is parsed, imported only then: importing
`inference` loads torch (seconds), which `vq-lsp --help` should not wait for.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from .settings import Settings

SETTING_RANGE = "setting range"  # a flag's check: the integer range its server setting declares


@dataclass(frozen=True)
class EngineFlag:
    """One flag: its option string, the attribute it sets, its help (without the default), and either the
    values it accepts or the inference.argtypes parser that checks it."""

    option: str
    dest: str
    help: str
    choices: tuple[str, ...] | None = None
    check: str | None = None
    metavar: str | None = None

    @property
    def default(self):
        """The server setting's default (model: `model_path`)."""
        return getattr(Settings(), "model_path" if self.dest == "model" else self.dest)

    def default_text(self) -> str:
        if self.dest == "model":
            return "the bundled model"
        if self.dest == "device":
            return "CUDA when present, else cpu"
        return str(self.default)


ENGINE_FLAGS: dict[str, EngineFlag] = {
    flag.dest: flag
    for flag in (
        EngineFlag(
            "--model",
            "model",
            "model folder, or the name of a model installed with vq-train export --install NAME",
            metavar="DIR|NAME",
        ),
        EngineFlag("--device", "device", "torch device: cpu, cuda, cuda:N", check="device"),
        EngineFlag("--threads", "threads", "torch threads", check=SETTING_RANGE),
        EngineFlag(
            "--precision",
            "precision",
            "engine dtype: float32 (half the memory and time) or float64 (verification grade); the codes "
            "equal a dense pass in the same dtype either way",
            choices=("float32", "float64"),
        ),
        EngineFlag(
            "--context",
            "context",
            "what a token sees: window (the text before it in its window) or paragraph (only its own "
            "paragraph: a paragraph's scores never depend on the text before it)",
            choices=("window", "paragraph"),
        ),
        EngineFlag(
            "--state-layout",
            "state_layout",
            "what a document's state keeps: full (every layer's output: faster edits), lean (layer outputs "
            "recomputed from the codes when an edit needs them: about a fifth less memory) or auto (full; the "
            "server's memory budget drops the outputs of the least recently used documents before their states)",
            choices=("auto", "lean", "full"),
        ),
        EngineFlag(
            "--sizing",
            "sizing",
            "how an edit's update sizes its work: auto (exact on every device today), exact, bucketed or graphed "
            "(CUDA graphs on a GPU); the codes are the same",
            choices=("auto", "exact", "bucketed", "graphed"),
        ),
    )
}


def setting_bounds(dest: str) -> tuple[int, int]:
    """The (lo, hi) a setting declares (vq_lsp.settings): a flag of the same name takes the same range."""
    meta = next(f.metadata for f in dataclasses.fields(Settings) if f.name == dest)
    return int(meta["lo"]), int(meta["hi"])


def _in_setting_range(dest: str):
    lo, hi = setting_bounds(dest)

    def parse(text: str):
        from inference import argtypes

        return argtypes.int_range(lo, hi)(text)

    parse.__name__ = dest
    return parse


def checked(name: str):
    """inference.argtypes.<name>, imported when a value is parsed."""

    def parse(text: str):
        from inference import argtypes

        return getattr(argtypes, name)(text)

    parse.__name__ = name
    return parse


def add_engine_flags(
    parser: argparse.ArgumentParser,
    *names: str,
    keep_earlier: bool = False,
    notes: Mapping[str, str] | None = None,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> None:
    """Declare the engine flags `names` (all of ENGINE_FLAGS when none are named) on `parser`.

    keep_earlier: the flags default to argparse.SUPPRESS, for a subcommand that must not reset what was
    given before it (`vq-lsp --threads 2 serve`). notes: text added to a flag's help, before its default.
    aliases: more option strings for a flag (a benchmark's `--dtype` for `--precision`). defaults: a
    benchmark's own default for a flag, where its protocol fixes one (the paper's `--context window`).
    """
    notes, aliases, defaults = notes or {}, aliases or {}, defaults or {}
    for name in names or tuple(ENGINE_FLAGS):
        flag = ENGINE_FLAGS[name]
        extra = f" {notes[name]}" if name in notes else ""
        if flag.check == SETTING_RANGE:
            extra = ", {} to {}".format(*setting_bounds(flag.dest)) + extra
        default_text = defaults[name] if name in defaults else flag.default_text()
        options: dict = {"dest": flag.dest, "help": f"{flag.help}{extra} (default: {default_text})"}
        if flag.choices is not None:
            options["choices"] = flag.choices
        if flag.check == SETTING_RANGE:
            options["type"] = _in_setting_range(flag.dest)
        elif flag.check is not None:
            options["type"] = checked(flag.check)
        if flag.metavar is not None:
            options["metavar"] = flag.metavar
        options["default"] = argparse.SUPPRESS if keep_earlier else defaults.get(name, flag.default)
        parser.add_argument(flag.option, *aliases.get(name, ()), **options)
