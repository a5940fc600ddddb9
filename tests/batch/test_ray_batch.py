"""`vq-lsp score --ray`: on a local Ray cluster with 2 workers, the rows (and the summary) equal the
single-process run's on a folder, a git history and a JSONL file of several interleaved documents;
flag errors and a missing ray package are exit status 2 with one line naming the flag."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.batch.test_git_history import A, B, C, Repo
from vq_lsp.scoring import command
from vq_lsp.scoring import ray as ray_scoring
from vq_lsp.scoring.revisions import from_jsonl
from vq_lsp.settings import DiagnosticSettings

WALL_CLOCK = ("seconds",)  # the one field that differs between two runs of the same scorer


def _run(args, capsys):
    code = command.main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in rows], err


@pytest.fixture(scope="module")
def local_ray():
    """One local cluster of 2 CPUs for the module, started the way `--ray` starts one."""
    ray = pytest.importorskip("ray", reason='ray is not installed (pip install "vq-lsp[cluster]")')
    if ray.is_initialized():
        ray.shutdown()
    assert ray_scoring.connect(ray, ray_scoring.LOCAL, workers=2, threads=1) is True
    assert ray.cluster_resources()["CPU"] == 2
    yield ray
    ray.shutdown()


def _same_as_single_process(source_args, model_dir, capsys):
    single, _ = _run([*source_args, "--model", str(model_dir), "--verify"], capsys)
    ray_rows, err = _run([*source_args, "--model", str(model_dir), "--verify", "--ray", "--ray-workers", "2"], capsys)
    assert ray_rows == single
    assert sum(r["type"] == "revision" for r in single) >= 3 and single[-1]["type"] == "summary"
    assert "fewer" in err and "verified" in err
    return single


def test_folder_rows_equal_the_single_process_rows(local_ray, tmp_path, tiny_model_dir, capsys):
    for i, text in enumerate([A, B, C, "", C + "\nOne more line.\n"]):  # an empty revision too
        (tmp_path / f"draft{i + 8}.txt").write_text(text)
    rows = _same_as_single_process([str(tmp_path)], tiny_model_dir, capsys)
    assert [r.get("revision") for r in rows[:-1]] == [f"draft{i}.txt" for i in range(8, 13)]


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_precision_reaches_the_workers(local_ray, tmp_path, tiny_model_dir, capsys, monkeypatch, precision):
    """--precision reaches the workers (each reports the engine it loaded) and their rows match. The rows
    themselves cannot tell: the tiny model's two precisions agree far below the rows' 6 decimals."""
    started = []

    class Kept(ray_scoring.RayScorer):
        def __init__(self, *args, **options):
            super().__init__(*args, **options)
            started.append(self)

    monkeypatch.setattr(command, "RayScorer", Kept)
    for i, text in enumerate([A, B, C]):
        (tmp_path / f"r{i}.txt").write_text(text)
    _same_as_single_process([str(tmp_path), "--precision", precision], tiny_model_dir, capsys)
    engine = {"precision": precision, "context": "paragraph", "state_layout": "auto"}  # the other two: defaults
    assert [s.engines for s in started] == [[engine, engine]]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")
def test_git_history_rows_equal_the_single_process_rows(local_ray, tmp_path, tiny_model_dir, capsys):
    repo = Repo(tmp_path / "repo")
    repo.commit("first", **{"old.md": A})
    repo.commit("edit", **{"old.md": B})
    repo.git("mv", "old.md", "essay.md")
    repo.commit("rename")
    repo.commit("edit again", **{"essay.md": C})
    rows = _same_as_single_process(["--git", str(repo.root / "essay.md")], tiny_model_dir, capsys)
    assert len(rows) == 4


def test_documents_spread_over_both_workers_and_rows_keep_input_order(local_ray, tmp_path, tiny_model_dir, capsys):
    """Interleaved documents (d1's chain continues after d2's): every chain stays on one worker."""
    docs = [("d1", [A, B]), ("d2", [C, A]), ("d1", [C]), ("d3", [B, C, A]), ("d2", [B])]
    path = tmp_path / "revs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        for name, texts in docs:
            f.write(json.dumps({"doc": name, "revisions": [{"text": t} for t in texts]}) + "\n")
    single, _ = _run([str(path), "--model", str(tiny_model_dir)], capsys)
    scorer = ray_scoring.RayScorer(ray_scoring.LOCAL, 2, tiny_model_dir, 1, hints=DiagnosticSettings())  # no load given
    got = [{k: v for k, v in r.as_json().items() if k not in WALL_CLOCK} for r in scorer.score(from_jsonl(path, print))]
    assert got == single[:-1]
    assert [r["index"] for r in got] == list(range(9))
    assert set(scorer.assigned.values()) == {0, 1} and len(scorer.assigned) == 3
    summary = {k: v for k, v in scorer.summary.as_dict().items() if k not in WALL_CLOCK}
    assert summary == {k: v for k, v in single[-1].items() if k not in WALL_CLOCK}
    assert scorer.actors == [] and local_ray.is_initialized()  # actors gone, the caller's session kept


def test_a_worker_that_cannot_load_the_model_is_a_clear_error(local_ray, tmp_path):
    """A model path missing on a node: the error names the path, no actor is left behind."""
    with pytest.raises(ray_scoring.RayUnavailable) as e:
        ray_scoring.RayScorer(ray_scoring.LOCAL, 1, tmp_path / "no-model", 1, hints=DiagnosticSettings())
    assert "could not load the model" in str(e.value) and "no-model: model folder not found" in str(e.value)
    assert "Traceback" not in str(e.value) and local_ray.is_initialized()


def test_an_unreachable_cluster_is_exit_2_within_seconds(tmp_path, tiny_model_dir):
    """Nothing listens at the address: ray.init alone would retry for minutes; the probe says so at once."""
    pytest.importorskip("ray", reason='ray is not installed (pip install "vq-lsp[cluster]")')
    (tmp_path / "revs").mkdir()
    (tmp_path / "revs" / "r1.txt").write_text(A)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from vq_lsp.cli import main; sys.exit(main())",
            "score",
            str(tmp_path / "revs"),
            "--model",
            str(tiny_model_dir),
            "--ray=127.0.0.1:1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "vq-lsp score: error: " in proc.stderr and "Traceback" not in proc.stderr
    assert "nothing answers at 127.0.0.1:1" in proc.stderr


@pytest.mark.parametrize(
    "value", ["local", "auto", "127.0.0.1:6379", "ray://head.example:10001", "[::1]:6379", "LOCAL"]
)
def test_ray_addresses_accepted(value):
    assert ray_scoring.ray_address(value) in (value, value.lower())


@pytest.mark.parametrize(
    "argv, flag, words",
    [
        (["--ray", "some/folder"], "--ray", "write PATH before --ray"),
        (["x", "--ray=head:0"], "--ray", "Ray address"),
        (["x", "--ray=head:99999"], "--ray", "Ray address"),
        (["x", "--ray=ray://:10001"], "--ray", "Ray address"),
        (["x", "--ray=h\u0661:1"], "--ray", "Ray address"),
        (["x", "--ray-workers", "2"], "--ray-workers", "only applies with --ray"),
        (["x", "--ray", "--ray-workers", "0"], "--ray-workers", "integer >= 1"),
    ],
)
def test_bad_ray_flags_exit_2_naming_the_flag(argv, flag, words, capsys):
    with pytest.raises(SystemExit) as e:
        command.parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    line = next(line for line in err.splitlines() if ": error: " in line)
    assert flag in line and words in line, line


def test_path_then_bare_ray_means_a_local_cluster():
    if not ray_scoring.ray_installed():
        pytest.skip('ray is not installed (pip install "vq-lsp[cluster]")')
    args = command.parse_args(["some/folder", "--ray"])
    assert args.ray == "local" and args.path == "some/folder" and args.ray_workers is None
    assert command.parse_args(["x", "--ray=auto", "--ray-workers", "3"]).ray_workers == 3


def test_missing_ray_is_a_flag_error_with_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # any `import ray` now fails
    assert ray_scoring.ray_installed() is False
    with pytest.raises(SystemExit) as e:
        command.parse_args(["x", "--ray"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --ray: needs the ray package" in err
    assert 'pip install "vq-lsp[cluster]"' in err
    with pytest.raises(ray_scoring.RayUnavailable, match=r"vq-lsp\[cluster\]"):
        ray_scoring.require_ray()
