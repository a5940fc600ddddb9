"""The intended dependencies between the repository's packages, read from the source with `ast`.

- `vq_lsp -> inference <- training`: the server and the scorer use the engine, training makes its
  models; `inference` imports neither `vq_lsp`, `training`, pygls nor lsprotocol, and nothing but
  `training` imports `training` (the tests test everything; benchmarks may import anything);
- inside `vq_lsp`, each layer imports only the ones below it: `hints` <- `documents` <- `server`,
  `hints` <- `scoring`, `hints` <- `workspace` <- `server` and `scoring`, everything <- `settings`, and only
  `vq_lsp.server` imports pygls;
- no package has an import cycle between its modules, nor a circle that only imports for
  annotations close (a type-only circle: two modules that cannot be understood apart);
- LSP types (lsprotocol) stay at the edge: `vq_lsp.server` and `vq_lsp/hints/lsp.py`, which turns
  a hint into a diagnostic;
- the modules, classes and functions of the engine (`inference`), the document store, the server,
  scoring, the hints and the settings stay small (SIZE_LIMITS), but for any named in SIZE_ALLOWED
  with its reason.
- `vq_lsp/hints` keeps no hidden state: no module-level mutable container or stateful object, no
  cache hung on the model (`model.cached(`, an attribute set on a model); what it keeps lives in
  the `HintCaches` its callers own (`hidden_state`).

Every import counts: relative ones, and those inside functions (a lazy import still ties two
modules together). `from package import name` depends on the submodule `package.name` when
there is one, else on the package itself.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx  # installed with torch
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("inference", "training", "vq_lsp", "benchmarks", "tests")

# repository packages each package may import (benchmarks and tests: anything)
ALLOWED = {
    "inference": {"inference"},
    "training": {"training", "inference"},
    "vq_lsp": {"vq_lsp", "inference"},
}
# single modules a package may import across those lines, each for a reason: training judges a model by
# what a writer sees, so it cuts prose as the server does and shows a tone by the server's rule and
# default thresholds (three pure modules: the markup layout, the tone rule and the settings dataclasses)
ALLOWED_MODULES = {"training": {"vq_lsp.hints.markup", "vq_lsp.hints.tone", "vq_lsp.settings"}}
FORBIDDEN_EXTERNAL = {"inference": {"pygls", "lsprotocol"}}
# the layers of vq_lsp: what each part may import besides itself and the package root (its __version__)
VQ_LSP_LAYERS = {
    "vq_lsp.settings": set(),
    "vq_lsp.stdio": set(),  # the process's standard output, kept for our own output
    "vq_lsp.engine_flags": {"vq_lsp.settings"},
    "vq_lsp.hints": {"vq_lsp.settings"},
    "vq_lsp.workspace": {"vq_lsp.settings", "vq_lsp.hints"},
    "vq_lsp.documents": {"vq_lsp.settings", "vq_lsp.hints"},
    "vq_lsp.server": {"vq_lsp.settings", "vq_lsp.hints", "vq_lsp.documents", "vq_lsp.workspace"},
    "vq_lsp.scoring": {"vq_lsp.settings", "vq_lsp.stdio", "vq_lsp.engine_flags", "vq_lsp.hints", "vq_lsp.workspace"},
    "vq_lsp.cli": {"vq_lsp.settings", "vq_lsp.stdio", "vq_lsp.engine_flags", "vq_lsp.server", "vq_lsp.scoring"},
    "vq_lsp.__main__": {"vq_lsp.cli"},  # `python -m vq_lsp`: the command line, nothing else
}
ONLY_IMPORTED_BY = {"pygls": "vq_lsp.server"}  # within vq_lsp
LSP_EDGE = ("vq_lsp.server", "vq_lsp.hints.lsp")  # the only modules that speak LSP types
# Uses of LSP types outside the edge allowed, each named: none (a hint's severity is the hints' own,
# turned into LSP's in hints/lsp.py)
LSP_TYPES_ALLOWED: set[str] = set()
# Type-only circles allowed, each named by its modules: none (the test wants this list exact, so a
# circle that comes back fails it)
TYPE_CIRCLES_ALLOWED: list[list[str]] = []


# Sizes in lines (a definition from its `def` or `class` line to its end, docstring and comments
# included) that the engine package keeps to: a module, a class, a function each do one job that
# reads in one sitting.
SIZE_LIMITS = {"module": 400, "class": 250, "function": 60}
SIZED_PACKAGES = (
    "inference",
    "vq_lsp/documents",
    "vq_lsp/server",
    "vq_lsp/scoring",
    "vq_lsp/hints",
    "vq_lsp/settings",
)
# Definitions over a limit that remain, each with its reason, as "module" or "module:qualname". The
# test wants this exact, so an entry goes when its definition is split.
SIZE_ALLOWED: dict[str, str] = {}

# Packages whose modules keep no state of their own (`hidden_state`): their callers own it.
STATE_FREE_PACKAGES = ("vq_lsp/hints",)
# What a module-level name must not be bound to: a mutable container, or a call to one of these
# (or to a class of the package that is not a frozen dataclass, such as a cache).
MUTABLE_FACTORIES = {
    "dict",
    "list",
    "set",
    "bytearray",
    "OrderedDict",
    "defaultdict",
    "Counter",
    "deque",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "WeakSet",
}
# Methods that change a container in place: a constant table (ALL_CAPS) never has one called on it.
MUTATING_METHODS = {
    "append",
    "extend",
    "insert",
    "remove",
    "pop",
    "popitem",
    "clear",
    "update",
    "setdefault",
    "add",
    "discard",
    "move_to_end",
    "sort",
    "reverse",
}
CONSTANT_NAME = re.compile(r"_?[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # a repository module, or the imported name for anything else
    line: int
    internal: bool  # target is a module of the repository
    type_only: bool = False  # under `if TYPE_CHECKING:`: an annotation's dependency, never run

    def where(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the packages (a package is its __init__)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is a repository module."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """Every import in a module's source, relative ones resolved against its package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    names: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno, id(node) in type_only) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names += [(f"{target}.{alias.name}", node.lineno, id(node) in type_only) for alias in node.names]
    out = []
    for name, line, typing_only in names:
        resolved = _resolve(name, known)
        out.append(Import(module, resolved or name, line, resolved is not None, typing_only))
    return out


def import_graph(root: Path = ROOT, packages=PACKAGES) -> list[Import]:
    known = modules(root, packages)
    return [imp for module, path in known.items() for imp in imports(module, path, known)]


def forbidden_imports(graph: list[Import]) -> list[str]:
    """Imports that cross the allowed dependencies between packages, and inside vq_lsp between its layers."""
    bad = []
    for imp in graph:
        top = imp.source.split(".")[0]
        target_top = imp.target.split(".")[0]
        allowed_module = imp.target in ALLOWED_MODULES.get(top, ()) or imp.target in {
            m.rpartition(".")[0]
            for m in ALLOWED_MODULES.get(top, ())  # the packages on the way to it
        }
        if imp.internal and top in ALLOWED and target_top not in ALLOWED[top] and not allowed_module:
            bad.append(imp.where())
        if not imp.internal and target_top in FORBIDDEN_EXTERNAL.get(top, ()):
            bad.append(imp.where())
        if top != "vq_lsp":
            continue
        layer = ".".join(imp.source.split(".")[:2])
        if imp.internal and target_top == "vq_lsp" and imp.target != "vq_lsp":
            target_layer = ".".join(imp.target.split(".")[:2])
            if target_layer != layer and target_layer not in VQ_LSP_LAYERS.get(layer, set()):
                bad.append(imp.where())
        owner = ONLY_IMPORTED_BY.get(target_top)
        if not imp.internal and owner is not None and layer != owner:
            bad.append(imp.where())
    return bad


def lsp_outside_the_edge(graph: list[Import]) -> list[str]:
    """Imports of lsprotocol by product modules (inference, training, vq_lsp) outside LSP_EDGE."""
    return [
        imp.where()
        for imp in graph
        if not imp.internal
        and imp.target.split(".")[0] == "lsprotocol"
        and imp.source.split(".")[0] in ALLOWED
        and not any(imp.source == edge or imp.source.startswith(edge + ".") for edge in LSP_EDGE)
    ]


def cycles(graph: list[Import], type_only: bool = False) -> list[list[str]]:
    """Import cycles between modules of one package (strongly connected components of two or
    more modules, or a module importing itself), each as its sorted module names. Imports under
    `if TYPE_CHECKING:` count only with `type_only`: they never run, so they make no import cycle,
    but a circle they close still ties the modules' meanings together."""
    edges = nx.DiGraph()
    for imp in graph:
        counted = type_only or not imp.type_only
        if imp.internal and counted and imp.source.split(".")[0] == imp.target.split(".")[0]:
            edges.add_edge(imp.source, imp.target)
    found = [
        sorted(component)
        for component in nx.strongly_connected_components(edges)
        if len(component) > 1 or edges.has_edge(next(iter(component)), next(iter(component)))
    ]
    return sorted(found)


def oversized(root: Path = ROOT, packages=SIZED_PACKAGES) -> dict[str, str]:
    """Modules, classes and functions (methods and nested ones included) over SIZE_LIMITS, as
    "module" or "module:qualname" -> what and how long."""
    found = {}
    for module, path in modules(root, packages).items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > SIZE_LIMITS["module"]:
            found[module] = f"module of {len(text.splitlines())} lines"
        stack = [(node, "") for node in ast.parse(text, filename=str(path)).body]
        while stack:
            node, prefix = stack.pop()
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            name = f"{prefix}{node.name}"
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            lines = node.end_lineno - node.lineno + 1
            if lines > SIZE_LIMITS[kind]:
                found[f"{module}:{name}"] = f"{kind} of {lines} lines"
            stack += [(child, f"{name}.") for child in _definitions(node)]
    return found


def _definitions(node: ast.AST) -> list[ast.AST]:
    """The definitions directly inside a definition's body (inside its if/for/with/try blocks too)."""
    out, todo = [], list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(n)
        else:
            todo += list(ast.iter_child_nodes(n))
    return out


def hidden_state(root: Path = ROOT, packages=STATE_FREE_PACKAGES) -> list[str]:
    """Module state and model-hung caches in `packages`, as "module:line what". A module-level name
    bound to a mutable container (a dict, list or set display or comprehension, or a call of
    MUTABLE_FACTORIES) is state, unless its name is a constant's (ALL_CAPS) and nothing in the
    package mutates it (no item assigned or deleted, no MUTATING_METHODS called on it, no `global`).
    A module-level instance of a class of the package that is not a frozen dataclass (a cache, a
    checker) is state whatever its name. So is `<anything>.cached(...)` (the engine's per-model
    store) and an attribute assigned on a `model`."""
    found = []
    paths = modules(root, packages)
    trees = {module: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for module, path in paths.items()}
    stateful = {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and not _frozen_dataclass(node)
    }
    mutated = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                mutated.update(node.names)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                for target in node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        mutated.add(target.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in MUTATING_METHODS and isinstance(node.func.value, ast.Name):
                    mutated.add(node.func.value.id)
    for module, tree in trees.items():
        for node in _module_level(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for name in [t.id for t in targets if isinstance(t, ast.Name)]:
                    what = _state_of(node.value, stateful)
                    if what == "a container" and CONSTANT_NAME.fullmatch(name) and name not in mutated:
                        continue  # a constant table
                    if what:
                        found.append(f"{module}:{node.lineno} {name} is {what}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cached":
                found.append(f"{module}:{node.lineno} keeps a cache on the model ({ast.unparse(node.func)})")
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    owner = target.value if isinstance(target, ast.Attribute) else None
                    if isinstance(owner, (ast.Name, ast.Attribute)) and ast.unparse(owner).split(".")[-1] == "model":
                        found.append(f"{module}:{node.lineno} sets {ast.unparse(target)} on the model")
    return sorted(found)


def _frozen_dataclass(node: ast.ClassDef) -> bool:
    return any(
        isinstance(d, ast.Call)
        and ast.unparse(d.func).split(".")[-1] == "dataclass"
        and any(k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value for k in d.keywords)
        for d in node.decorator_list
    )


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The statements of a module outside its functions and classes (inside its if/try blocks too)."""
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.append(node)
        todo += [n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)]
    return out


def _state_of(value: ast.expr, stateful: set[str]) -> str | None:
    """What kind of state a module-level value is: "a container", "an instance of X", or None."""
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return "a container"
    if isinstance(value, ast.Call):
        name = ast.unparse(value.func).split(".")[-1]
        if name in MUTABLE_FACTORIES:
            return "a container"
        if name in stateful:
            return f"an instance of {name}"
    return None


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    return import_graph()


def test_packages_import_only_what_their_layer_allows(graph):
    assert not forbidden_imports(graph), "\n".join(forbidden_imports(graph))


def test_no_package_has_an_import_cycle(graph):
    assert not cycles(graph), cycles(graph)


def test_no_package_has_a_type_only_circle_but_the_named_ones(graph):
    assert cycles(graph, type_only=True) == sorted(TYPE_CIRCLES_ALLOWED)


def test_lsp_types_stay_in_the_server_and_the_hints_conversion(graph):
    outside = lsp_outside_the_edge(graph)
    assert {line.split(":")[0] for line in outside} == LSP_TYPES_ALLOWED, outside


def test_the_sized_packages_keep_their_modules_classes_and_functions_small():
    over = oversized()
    assert set(over) == set(SIZE_ALLOWED), {k: v for k, v in over.items() if k not in SIZE_ALLOWED} or (
        f"no longer over a limit, drop from SIZE_ALLOWED: {sorted(set(SIZE_ALLOWED) - set(over))}"
    )


def test_the_hints_keep_no_state_of_their_own():
    assert hidden_state() == []


def test_module_state_and_model_caches_are_found(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/tables.py": (
                "import re\nfrom collections import OrderedDict\n"
                "NAMES = {'a': 1}\n_PATTERN = re.compile('x')\nKINDS = frozenset({'a'})\n"
                "GROWN = []\n_seen = {}\n_order = OrderedDict()\n"
                "def f(x):\n    GROWN.append(x)\n"
            ),
            "pkg/kept.py": (
                "from dataclasses import dataclass\n"
                "class Recent:\n    pass\n"
                "@dataclass(frozen=True)\nclass Point:\n    x: int = 0\n"
                "_KEPT = Recent()\nORIGIN = Point()\n"
                "def g(model):\n    model._fingerprint = 1\n    return model.cached('x', Recent)\n"
            ),
        },
    )
    assert hidden_state(tmp_path, ("pkg",)) == [
        "pkg.kept:10 sets model._fingerprint on the model",
        "pkg.kept:11 keeps a cache on the model (model.cached)",
        "pkg.kept:7 _KEPT is an instance of Recent",
        "pkg.tables:6 GROWN is a container",
        "pkg.tables:7 _seen is a container",
        "pkg.tables:8 _order is a container",
    ]


def test_the_graph_sees_relative_and_function_level_imports(graph):
    """The scan reads what it must for the two checks above to mean anything."""
    edges = {(imp.source, imp.target) for imp in graph}
    assert ("vq_lsp.hints.selection", "vq_lsp.hints.material") in edges  # from .material import HintMaterial
    assert ("vq_lsp.hints.material", "vq_lsp.hints.typos") in edges  # from . import markup, typos
    assert ("vq_lsp.cli", "vq_lsp.server.handlers") in edges  # imported inside main()
    assert ("vq_lsp.server.language_server", "inference") in edges
    assert not any(imp.source.startswith("inference") and imp.target.startswith("vq_lsp") for imp in graph)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_cycle_between_two_modules_is_found(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def f():\n    from .a import g\n",
            "pkg/c.py": "import pkg.a\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b"]]


def test_a_forbidden_import_is_reported_with_its_line(tmp_path):
    _write(
        tmp_path,
        {
            "inference/__init__.py": "",
            "inference/engine.py": "import os\nfrom vq_lsp import settings\n",
            "inference/io.py": "def f():\n    import lsprotocol\n",
            "vq_lsp/__init__.py": "",
            "vq_lsp/settings.py": "",
            "vq_lsp/hints/__init__.py": "",
            "vq_lsp/hints/lsp.py": "from ..documents import store\n",
            "vq_lsp/documents/__init__.py": "",
            "vq_lsp/documents/store.py": "import pygls\n",
            "vq_lsp/scoring/__init__.py": "",
            "vq_lsp/scoring/scorer.py": "import training.cli\n",
            "training/__init__.py": "",
            "training/cli.py": "import inference\n",
        },
    )
    bad = forbidden_imports(import_graph(tmp_path, ("inference", "vq_lsp", "training")))
    assert sorted(bad) == [
        "inference.engine:2 imports vq_lsp.settings",
        "inference.io:2 imports lsprotocol",
        "vq_lsp.documents.store:1 imports pygls",
        "vq_lsp.hints.lsp:1 imports vq_lsp.documents.store",
        "vq_lsp.scoring.scorer:1 imports training.cli",
    ]


def test_imports_for_annotations_only_make_no_cycle(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == []


def test_a_circle_closed_by_annotations_is_a_type_only_circle(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",)), type_only=True) == [["pkg.a", "pkg.b"]]


def test_lsp_types_outside_the_edge_are_reported(tmp_path):
    _write(
        tmp_path,
        {
            "vq_lsp/__init__.py": "",
            "vq_lsp/documents/__init__.py": "",
            "vq_lsp/documents/store.py": "from lsprotocol import types\n",
            "vq_lsp/hints/__init__.py": "",
            "vq_lsp/hints/lsp.py": "from lsprotocol import types\n",
            "vq_lsp/server/__init__.py": "",
            "vq_lsp/server/handlers.py": "import lsprotocol.types\n",
        },
    )
    assert lsp_outside_the_edge(import_graph(tmp_path, ("vq_lsp",))) == [
        "vq_lsp.documents.store:1 imports lsprotocol.types"
    ]


def test_oversized_modules_classes_and_functions_are_reported(tmp_path):
    body = "        x = 1\n" * 60
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/small.py": "def f():\n" + "    x = 1\n" * 59,  # 60 lines: at the limit
            "pkg/big.py": "\n" * 401,
            "pkg/defs.py": (
                "class Big:\n" + "    x = 1\n" * 250 + "\n"
                "class Small:\n    def method(self):\n" + body + "\n"
                "def outer():\n    def inner():\n" + body + "    return inner\n"
            ),
        },
    )
    assert oversized(tmp_path, ("pkg",)) == {
        "pkg.big": "module of 401 lines",
        "pkg.defs:Big": "class of 251 lines",
        "pkg.defs:Small.method": "function of 61 lines",
        "pkg.defs:outer": "function of 63 lines",
        "pkg.defs:outer.inner": "function of 61 lines",
    }
