"""The documents tests' server: `path`, the server `vq-lsp` serves driven in this process (ServerPath),
over the shared tiny model with its model loaded, and `docs`, its documents. A module names the
settings its server runs with by overriding `path_settings`. Snapshots go to the test's own folder."""

from __future__ import annotations

import pytest

from inference.paths import CACHE_ENV

from .server_path import ServerPath


@pytest.fixture
def path_settings() -> dict:
    """Settings beside the model folder (Settings' field names); the CPU unless a device is named."""
    return {}


@pytest.fixture
def path(model_dir, path_settings, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    p = ServerPath.with_model(model_dir, **path_settings)
    yield p
    p.close()


@pytest.fixture
def docs(path):
    return path.docs
