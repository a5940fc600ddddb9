"""Dependencies match use: every import is declared in pyproject.toml where its code needs it.

The server and `vq-lsp score` (vq_lsp/, inference/) may import only the standard library and
`dependencies`; training/ also the [train] extra; tests and benchmarks anything declared. A new
`import foo` without a declaration fails here, not on a user's machine after `pip install`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
LOCAL = {"inference", "training", "vq_lsp", "tests", "benchmarks"}
# import name -> distribution, for distributions whose import name differs and that may not be installed
KNOWN = {"yaml": "pyyaml", "PIL": "pillow", "attr": "attrs"}
# the only files of the server and the engine that may import an optional extra's packages: each imports
# them inside a function and says which extra to install when they are missing
OPTIONAL_IMPORTS = {"inference/onnx_dense.py": "onnx", "vq_lsp/scoring/ray.py": "cluster"}
OPTIONAL_PACKAGES = {"onnx": {"onnxruntime", "onnx"}, "cluster": {"ray"}}  # extra -> its import names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _norm(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1))


def declared() -> dict[str, set[str]]:
    """Distribution names per group: runtime, and each extra (self-references like vq-lsp[train] expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    groups = {"runtime": {_requirement_name(r) for r in project["dependencies"]}}

    def expand(extra: str, seen=()) -> set[str]:
        out = set()
        for req in extras[extra]:
            own = re.match(r"\s*vq-lsp\[([^\]]+)\]", req)
            if own:
                for sub in own.group(1).split(","):
                    if sub.strip() not in seen:
                        out |= expand(sub.strip(), (*seen, extra))
            else:
                out.add(_requirement_name(req))
        return out

    for extra in extras:
        groups[extra] = expand(extra)
    return groups


def imports(folder: str) -> dict[str, list[str]]:
    """Top-level module names imported by every .py file under folder -> where (file:line)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def distributions(module: str) -> set[str]:
    mapping = importlib.metadata.packages_distributions()
    return {_norm(d) for d in mapping.get(module, [])} or {_norm(KNOWN.get(module, module))}


def undeclared(folder: str, allowed: set[str], optional: dict[str, set[str]] | None = None) -> list[str]:
    """Imports of undeclared packages; `optional` (file -> distributions) widens `allowed` for single files."""
    stdlib = set(sys.stdlib_module_names)
    out = []
    for module, where in imports(folder).items():
        if module in stdlib or module in LOCAL or module == "__future__":
            continue
        dists = distributions(module)
        bad = [w for w in where if not dists & (allowed | (optional or {}).get(w.rsplit(":", 1)[0], set()))]
        if bad:
            out.append(f"{module} ({', '.join(bad[:3])})")
    return out


@pytest.mark.parametrize(
    "folder, groups",
    [
        ("vq_lsp", ("runtime",)),
        ("inference", ("runtime",)),
        ("training", ("runtime", "train")),
        ("tests", ("runtime", "dev", "train", "bench")),
        ("benchmarks", ("runtime", "dev", "train", "bench")),
    ],
)
def test_every_import_is_declared(folder, groups):
    dec = declared()
    allowed = set().union(*(dec[g] for g in groups))
    missing = undeclared(folder, allowed, {path: dec[extra] for path, extra in OPTIONAL_IMPORTS.items()})
    assert not missing, f"{folder}/ imports packages not declared in {' or '.join(groups)}: {missing}"


def test_the_check_catches_an_undeclared_import(tmp_path, monkeypatch):
    """The scan itself: an import of a package nobody declared is reported, with file and line."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("import os\nimport torch\nfrom leftpad_nowhere.sub import x\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert undeclared("pkg", {"torch"}) == ["leftpad_nowhere (pkg/m.py:3)"]


def test_an_optional_import_is_allowed_only_in_its_own_file(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    for name in ("own.py", "other.py"):
        (tmp_path / "pkg" / name).write_text("def f():\n    import ray\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert undeclared("pkg", {"torch"}, {"pkg/own.py": {"ray"}}) == ["ray (pkg/other.py:2)"]


def test_optional_extras_are_declared_and_stay_out_of_the_runtime():
    dec = declared()
    for extra, packages in OPTIONAL_PACKAGES.items():
        assert {_norm(p) for p in packages} <= dec[extra], extra
        assert not {_norm(p) for p in packages} & dec["runtime"], extra
        assert dec[extra] <= dec["dev"], f"CI installs [dev]: the {extra} tests must not be skipped there"
    for path, extra in OPTIONAL_IMPORTS.items():
        assert (ROOT / path).is_file() and extra in OPTIONAL_PACKAGES


def test_server_and_score_import_no_optional_package(tmp_path):
    """Importing the server, the batch scorer and the optional modules themselves loads none of the extras."""
    extras = sorted(set().union(*OPTIONAL_PACKAGES.values()))
    blocked = "".join(f"sys.modules[{m!r}] = None; " for m in extras)
    modules = "vq_lsp.server.handlers, vq_lsp.scoring.command, vq_lsp.cli, inference, " + ", ".join(
        p.removesuffix(".py").replace("/", ".") for p in OPTIONAL_IMPORTS
    )
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; {blocked}import {modules}; print('ok')"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_training_only_packages_stay_out_of_the_runtime():
    dec = declared()
    assert "transformers" not in dec["runtime"] and "transformers" in dec["train"]
    assert "transformers" in dec["dev"]  # CI installs [dev] and runs the training tests
    assert {"cattrs", "pygls", "lsprotocol"} <= dec["runtime"]  # the server imports them directly


def test_pytest_plugins_in_use_are_declared():
    uses_asyncio = any("pytest.mark.asyncio" in p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py"))
    assert not uses_asyncio or "pytest-asyncio" in declared()["dev"]


BLOCK = "import sys; sys.modules['transformers'] = None; "  # any `import transformers` now fails


def test_server_and_score_work_without_transformers(tiny_model_dir, tmp_path):
    """What `pip install vq-lsp` (no extras) gives: the server starts and `vq-lsp score` scores."""
    (tmp_path / "revs").mkdir()
    for i, text in enumerate(["The film was slow.\n", "The film was slow and dull.\n"]):
        (tmp_path / "revs" / f"r{i}.txt").write_text(text)
    code = BLOCK + (
        "from vq_lsp.cli import main; import vq_lsp.server.handlers, vq_lsp.scoring.command, inference; "
        f"sys.exit(main(['score', {str(tmp_path / 'revs')!r}, '--model', {str(tiny_model_dir)!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('"type": "revision"') == 2
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vq_lsp.server.handlers, vq_lsp.scoring.command, "
            "vq_lsp.cli, inference; print('transformers' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert loaded.stdout.strip() == "False", loaded.stderr


def test_vq_train_without_transformers_says_which_extra(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "tok.json").write_text("{}")
    code = BLOCK + (
        "from training.cli import main; sys.exit(main(['teacher', '--out', "
        f"{str(tmp_path / 'o')!r}, '--tokenizer', {str(tmp_path / 'tok.json')!r}, '--data', "
        f"{str(tmp_path / 'data')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "pip install 'vq-lsp[train]'" in proc.stderr
