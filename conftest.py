"""Keep the test run out of the user's own folders: the snapshot cache and the installed models
(inference/paths.py) go to a temporary folder for the whole run, servers started by tests included
(they inherit the environment). A folder already set in the environment is kept.

Each test starts with an empty snapshot cache (when the folder is this run's own): servers of
earlier tests, sharing the folder, must not turn a later test's build into a restore."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_made: list[str] = []


def pytest_configure(config) -> None:
    if "VQ_LSP_CACHE_DIR" in os.environ and "VQ_LSP_MODELS_DIR" in os.environ:
        return
    root = tempfile.mkdtemp(prefix="vq-lsp-test-user-dirs-")
    _made.append(root)
    os.environ.setdefault("VQ_LSP_CACHE_DIR", os.path.join(root, "cache"))
    os.environ.setdefault("VQ_LSP_MODELS_DIR", os.path.join(root, "models"))


@pytest.fixture(autouse=True)
def _empty_snapshot_cache():
    cache = os.environ.get("VQ_LSP_CACHE_DIR", "")
    if any(cache.startswith(root + os.sep) for root in _made):
        shutil.rmtree(os.path.join(cache, "snapshots"), ignore_errors=True)
    yield


def pytest_unconfigure(config) -> None:
    for root in _made:
        shutil.rmtree(root, ignore_errors=True)
