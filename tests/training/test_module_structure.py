"""The training modules form no import circle, and each one imports on its own.

A circle (finetune -> post_vq -> head_fit -> finetune, hidden by imports inside functions) makes
the import order matter and a module's own import fail in a fresh interpreter once anyone moves
an import to the top. The graph below counts every ``from .x import`` / ``from training.x import``,
at module level or inside a function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TRAINING = Path(__file__).resolve().parents[2] / "training"
MODULES = sorted(p.stem for p in TRAINING.glob("*.py") if p.stem != "__init__")


def imports_of(module: str) -> set[str]:
    """training modules imported anywhere in ``module`` (relative or absolute)."""
    tree = ast.parse((TRAINING / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(a.name for a in node.names)
            elif node.module and node.module.startswith("training."):
                found.add(node.module.split(".")[1])
            elif node.module == "training":
                found.update(a.name for a in node.names)
    return found & set(MODULES)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in graph:
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_the_import_graph_finds_a_planted_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_training_modules_have_no_import_circle():
    graph = {m: imports_of(m) for m in MODULES}
    assert graph["finetune"] >= {"post_vq", "head_fit", "reviews"}  # the graph does see imports
    assert find_cycle(graph) is None, f"import circle: {' -> '.join(find_cycle(graph))}"


@pytest.mark.parametrize("module", ["finetune", "post_vq", "head_fit", "reviews", "evaluate", "augment"])
def test_each_module_imports_alone_in_a_fresh_interpreter(module):
    res = subprocess.run(
        [sys.executable, "-c", f"import training.{module}"],
        capture_output=True,
        text=True,
        cwd=TRAINING.parent,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
