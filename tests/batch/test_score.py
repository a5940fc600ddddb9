"""`vq-lsp score` on folders, JSONL files and git histories, including bad files."""

import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vq_lsp.scoring import command

REVISIONS = [
    "The film was slow.\n\nThe actors tried hard.\n",
    "The film was slow and dull.\n\nThe actors tried hard.\n",
    "The film was slow and dull.\n\nThe actors tried very hard.\n\nA third paragraph.\n",
    "The film was quick and bright.\n\nThe actors tried very hard.\n\nA third paragraph.\n",
]


def _run(args, capsys):
    code = command.main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _records(out):
    rows = [json.loads(line) for line in out.splitlines()]
    return [r for r in rows if r["type"] == "revision"], rows[-1]


@pytest.fixture()
def folder(tmp_path):
    for i, text in enumerate(REVISIONS):
        (tmp_path / f"draft{i + 8}.txt").write_text(text)  # draft8..draft11: natural order matters
    return tmp_path


def test_folder_in_natural_order_with_verification(folder, tiny_model_dir, capsys):
    code, out, err = _run([str(folder), "--model", str(tiny_model_dir), "--verify"], capsys)
    assert code == 0, err
    rows, summary = _records(out)
    assert [r["revision"] for r in rows] == ["draft8.txt", "draft9.txt", "draft10.txt", "draft11.txt"]
    assert all(r["verified"] for r in rows)
    assert rows[0]["changed_tokens"] == rows[0]["tokens"]  # the first revision is a full pass
    assert 0 < rows[1]["changed_tokens"] < rows[1]["tokens"]
    assert rows[1]["incremental_macs"] < rows[1]["dense_macs"]
    assert [len(r["paragraphs"]) for r in rows] == [2, 2, 3, 3]
    assert abs(sum(rows[0]["scores"].values()) - 1) < 1e-5
    assert summary["revisions"] == 4 and summary["speedup"] > 1
    assert "fewer" in err
    assert "4 revisions of 1 document," in err


def test_bad_files_are_reported_and_skipped(folder, tiny_model_dir, capsys):
    (folder / "draft12.txt").write_bytes(REVISIONS[-1].encode() + b"caf\xe9\n")
    (folder / "draft13.bin").write_bytes(b"\x00\x01\x02 binary")
    code, out, err = _run([str(folder), "--model", str(tiny_model_dir)], capsys)
    assert code == 0
    rows, summary = _records(out)
    assert len(rows) == 5 and summary["warnings"] == 2
    assert "draft13.bin: binary file, skipped" in err
    assert "draft12.txt: not valid UTF-8" in err


def test_empty_folder_is_a_clear_error(tmp_path, tiny_model_dir, capsys):
    code, out, err = _run([str(tmp_path), "--model", str(tiny_model_dir)], capsys)
    assert code == 2 and "no revision files" in err and out == ""


def test_missing_model_is_a_clear_error(folder, tmp_path, capsys):
    code, _, err = _run([str(folder), "--model", str(tmp_path / "nope")], capsys)
    assert code == 2 and "model folder not found" in err


def test_one_document_is_pointed_to_check(tmp_path, tiny_model_dir, capsys):
    essay = tmp_path / "essay.md"
    essay.write_text("So they took there departure.\n")
    code, out, err = _run([str(essay), "--model", str(tiny_model_dir)], capsys)
    assert code == 2 and not out and "Traceback" not in err
    assert "not a file of revision rows" in err and f"vq-lsp check {essay}" in err


def test_jsonl_revisions_and_csv_output(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "revs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(
            json.dumps({"doc": "a.md", "revisions": [{"commit": f"c{i}", "text": t} for i, t in enumerate(REVISIONS)]})
            + "\n"
        )
        f.write("{broken\n")
        f.write(
            json.dumps({"doc": "b.md", "revisions": [{"text": "Short."}, {"text": ""}, {"text": "Short again."}]})
            + "\n"
        )
    code, out, err = _run([str(path), "--model", str(tiny_model_dir), "--format", "csv"], capsys)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["doc"] for r in rows] == ["a.md"] * 4 + ["b.md"] * 3
    assert rows[5]["tokens"] == "0" and rows[5]["score_positive"] == ""  # an empty revision
    assert rows[6]["changed_tokens"] == rows[6]["tokens"]  # reopened after the empty one
    assert "revs.jsonl.gz:2: not a revision row" in err


def test_git_history_oldest_first(tmp_path, tiny_model_dir, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    for i, text in enumerate(REVISIONS):
        (repo / "essay.md").write_text(text)
        git("add", "essay.md")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"rev {i}")
    code, out, err = _run(["--git", str(repo / "essay.md"), "--model", str(tiny_model_dir), "--verify"], capsys)
    assert code == 0, err
    rows, _ = _records(out)
    assert len(rows) == 4 and all(r["verified"] for r in rows)
    assert rows[0]["tokens"] < rows[-1]["tokens"]  # oldest first


def test_runs_as_a_program(folder, tiny_model_dir):
    proc = subprocess.run(
        [sys.executable, "-m", "vq_lsp.scoring.command", str(folder), "--model", str(tiny_model_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["revisions"] == 4


def test_text_format_prints_the_hints_of_the_shipped_example(tiny_model_dir, capsys):
    example = Path(__file__).resolve().parents[2] / "examples" / "review"
    code, out, err = _run(
        [
            str(example),
            "--model",
            str(tiny_model_dir),
            "--format",
            "text",
            "--sentiment-threshold",
            "0",
            "--surprise-threshold",
            "0",
            "--tone-min-words",
            "0",
        ],
        capsys,
    )
    assert code == 0, err
    headers = [line for line in out.splitlines() if not line.startswith("  ")]
    assert [h.split(":")[0] for h in headers] == [f"review/draft{i}.txt" for i in range(1, 5)]
    assert "tokens changed" in headers[1] and "fewer MACs" in headers[1]
    assert "  line 3: " in out and " tone (" in out  # every paragraph passes a zero threshold
    assert "possible typo" in out


def test_surprise_hints_point_at_real_tokens(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "a.txt").write_text("First line.\nSecond line with a wrod in it.\n")
    code, out, _ = _run([str(tmp_path), "--model", str(tiny_model_dir), "--surprise-threshold", "0"], capsys)
    assert code == 0
    row = _records(out)[0][0]
    text = (tmp_path / "a.txt").read_text().splitlines()
    for h in row["surprises"]:
        assert text[h["line"]][h["column"] :].startswith(h["text"])


def test_dense_backend_onnx_gives_the_torch_rows(folder, tiny_model_dir, capsys):
    """--dense onnx (float32): the full passes on ONNX Runtime, every revision verified, and the
    scores those of the torch run within float32 rounding."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    common = [str(folder), "--model", str(tiny_model_dir), "--precision", "float32", "--verify"]
    runs = {}
    for backend in ("torch", "onnx"):
        code, out, err = _run(common + ["--dense", backend], capsys)
        assert code == 0, err
        runs[backend] = _records(out)
    (rows_t, _), (rows_o, summary) = runs["torch"], runs["onnx"]
    assert summary["verified"] == 4 and summary["verify_failures"] == 0
    for a, b in zip(rows_t, rows_o):
        assert a["changed_tokens"] == b["changed_tokens"] and a["incremental_macs"] == b["incremental_macs"]
        assert all(abs(a["scores"][k] - b["scores"][k]) < 1e-3 for k in a["scores"])


def test_paragraph_context_scores_each_paragraph_alone(folder, tiny_model_dir, capsys):
    """--context paragraph: the second paragraph keeps its score bit for bit while the first one is
    rewritten (revisions 10 -> 11); with the window context the rewrite reaches it."""
    got = {}
    for context in ("paragraph", "window"):
        code, out, err = _run([str(folder), "--model", str(tiny_model_dir), "--verify", "--context", context], capsys)
        assert code == 0, err
        rows, _ = _records(out)
        assert all(r["verified"] for r in rows)
        got[context] = [r["paragraphs"][1]["scores"] for r in rows[2:]]
    assert got["paragraph"][0] == got["paragraph"][1]
    assert got["window"][0] != got["window"][1]
    with pytest.raises(SystemExit) as exit_:
        command.main([str(folder), "--context", "sentence"])
    assert exit_.value.code == 2 and "--context" in capsys.readouterr().err


@pytest.mark.parametrize(
    "summary, said, unsaid",
    [
        (
            dict(documents=1, revisions=2, incremental_macs=300, dense_macs=200),
            ["2 revisions of 1 document,", "1.5x more", "vq-lsp check"],
            ["fewer"],
        ),
        (
            dict(documents=2, revisions=1, incremental_macs=100, dense_macs=200),
            ["1 revision of 2 documents,", "2.0x fewer"],
            ["more", "vq-lsp check"],
        ),
    ],
)
def test_the_summary_words_the_ratio_the_way_it_went(summary, said, unsaid, capsys):
    """A folder of unrelated files costs more than scoring each afresh: the summary says "more", not
    "0.7x fewer", and says why; counts of one are singular."""
    assert command.report(command.Summary(tokens=10, **summary), verified=False) == 0
    err = capsys.readouterr().err
    assert all(s in err for s in said) and not any(s in err for s in unsaid), err
