"""The converse of test_dependencies.py: every required dependency is imported by the server or
the engine (vq_lsp/, inference/), so none is installed for nothing (msgpack and platformdirs once
were: declared, imported nowhere)."""

from __future__ import annotations

from tests.test_dependencies import declared, distributions, imports


def test_every_runtime_dependency_is_imported():
    used = set()
    for folder in ("vq_lsp", "inference"):
        for module in imports(folder):
            used |= distributions(module)
    unused = sorted(declared()["runtime"] - used)
    assert not unused, f"declared in dependencies but imported by neither vq_lsp/ nor inference/: {unused}"
