"""Where vq-lsp keeps files for the user, from platformdirs (one place for every user-level path).

- models installed by the user (`vq-train export --install NAME`): user data folder / models / NAME
- engine-state snapshots (the server's cache of closed and evicted documents): user cache folder / snapshots

Environment variables override the folders (tests, or a shared machine): VQ_LSP_MODELS_DIR for
the installed models, VQ_LSP_CACHE_DIR for the cache. A model is named either by a folder path
or by the name it was installed under; `resolve_model` is the one place that decides which.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .checkpoint import ModelLoadError

APP = "vq-lsp"
MODELS_ENV, CACHE_ENV = "VQ_LSP_MODELS_DIR", "VQ_LSP_CACHE_DIR"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def models_dir() -> Path:
    """The folder holding one sub-folder per installed model."""
    env = os.environ.get(MODELS_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs  # here, not at the top: training (vq-train) loads models without the server's deps

    return Path(platformdirs.user_data_dir(APP)) / "models"


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP))


def snapshot_dir() -> Path:
    return cache_dir() / "snapshots"


def is_model_name(text: str) -> bool:
    """A name a model can be installed under: letters, digits, '.', '_', '-', no path separator."""
    return bool(_NAME.fullmatch(text)) and text not in (".", "..")


def installed_models() -> list[str]:
    """Names of the installed models (folders with a config.json), sorted."""
    root = models_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "config.json").is_file() and is_model_name(p.name))


def installed_model(name: str) -> Path:
    """The folder a model is (or would be) installed in; ValueError for a name that is not one."""
    if not is_model_name(name):
        raise ValueError(
            f"{name!r} is not a model name: use letters, digits, '.', '_' and '-' (at most 64), "
            "starting with a letter or digit"
        )
    return models_dir() / name


def resolve_model(spec: str | os.PathLike | None) -> Path | None:
    """The folder a model setting or --model flag names: an existing path wins, else an installed
    model of that name. None stays None (the bundled model). A bare name that is neither raises
    ModelLoadError listing the installed names; any other missing path is left to the loader,
    whose error names the missing file."""
    if spec is None:
        return None
    path = Path(spec).expanduser()
    if path.exists():
        return path
    text = os.fspath(spec)
    if not is_model_name(text):
        return path
    folder = models_dir() / text
    if (folder / "config.json").is_file():
        return folder
    names = installed_models()
    listed = ", ".join(names) if names else "none"
    raise ModelLoadError(
        f"no model folder {text!r} and no installed model named {text!r} "
        f"(installed in {models_dir()}: {listed}; install one with vq-train export --install NAME)"
    )
