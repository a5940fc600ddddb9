"""Keep the test run out of the user's own folders: the snapshot cache and the installed models
(inference/paths.py) go to a temporary folder for the whole run, servers started by tests included
(they inherit the environment). A folder already set in the environment is kept."""

from __future__ import annotations

import os
import shutil
import tempfile

_made: list[str] = []


def pytest_configure(config) -> None:
    if "VQ_LSP_CACHE_DIR" in os.environ and "VQ_LSP_MODELS_DIR" in os.environ:
        return
    root = tempfile.mkdtemp(prefix="vq-lsp-test-user-dirs-")
    _made.append(root)
    os.environ.setdefault("VQ_LSP_CACHE_DIR", os.path.join(root, "cache"))
    os.environ.setdefault("VQ_LSP_MODELS_DIR", os.path.join(root, "models"))


def pytest_unconfigure(config) -> None:
    for root in _made:
        shutil.rmtree(root, ignore_errors=True)
