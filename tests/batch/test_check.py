"""`vq-lsp check` on a folder with known errors, with the bundled model: the hints and their
places, exit codes for each --fail-on, each output format (SARIF with its schema's required
fields), the configuration file, dictionaries and ignore comments honoured, and unreadable or
binary files skipped with a line on stderr, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vq_lsp.cli import main as cli_main
from vq_lsp.scoring import check

VQ_LSP = str(Path(sys.executable).parent / "vq-lsp")
TYPOS = "I went to teh store because the milk was gone, and then I walked back home again.\n"
MORE = "# Plans\n\nThe parcel will arrive tomorrow mornning at the office near the harbour.\n"


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A workspace with two prose files with typos, a binary file, an undecodable one, a broken link,
    a hidden folder and a Python file (not a wanted file type)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VQ_LSP_USER_DICTIONARY", str(tmp_path / "user-words.txt"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(TYPOS)
    (docs / "b.md").write_text(MORE)
    (docs / "image.txt").write_bytes(b"\x89PNG\x00\x01\x02")
    (docs / "latin1.txt").write_bytes("caf\xe9 teh\n".encode("latin-1"))
    (docs / "gone.md").symlink_to(tmp_path / "nowhere.md")
    (docs / ".cache").mkdir()
    (docs / ".cache" / "c.md").write_text(TYPOS)
    (docs / "code.py").write_text("# teh comment\n")
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_lines_and_exit_codes(workspace, capsys):
    code, out, err = run(capsys, "docs", "--fail-on", "hint")
    lines = out.splitlines()
    typos = [line for line in lines if " typo " in line]
    assert typos[0].startswith("docs/a.md:1:11: warning typo possible typo: 'teh' is unlikely here")
    assert typos[1].startswith("docs/b.md:3:33: warning typo possible typo: 'mornning'")
    assert len(typos) == 2 and code == 1
    assert all(line.split(":")[0] in ("docs/a.md", "docs/b.md") for line in lines)  # no hidden, no .py
    assert "docs/image.txt: skipped: a binary file" in err
    assert "docs/latin1.txt: skipped: not UTF-8 text" in err
    assert "docs/gone.md: skipped: cannot read it" in err
    assert "Traceback" not in err
    assert run(capsys, "docs", "--fail-on", "warning")[0] == 1  # typos are warnings by default
    assert run(capsys, "docs", "--fail-on", "error")[0] == 0
    assert run(capsys, "docs", "--fail-on", "never")[0] == 0
    of_a = [line for line in lines if line.startswith("docs/a.md:")]
    assert run(capsys, "docs/a.md")[:2] == (1, "\n".join(of_a) + "\n")  # a file on its own: same hints


@pytest.mark.parametrize("line_end", ["\r", "\r\n"])
def test_markdown_with_other_line_ends_is_checked_like_the_same_text_with_newlines(workspace, capsys, line_end):
    """A lone \\r (classic Mac) or \\r\\n ends a line, as in an editor: the same hints at the same line and
    column as with \\n, no traceback."""
    (workspace / "lf.md").write_bytes(MORE.encode())
    (workspace / "other.md").write_bytes(MORE.replace("\n", line_end).encode())
    code, out, err = run(capsys, "lf.md", "other.md", "--format", "json", "--fail-on", "never")
    assert code == 0 and "Traceback" not in err and "error" not in err
    found = {name: [] for name in ("lf.md", "other.md")}
    for f in json.loads(out):
        found[f["path"]].append((f["line"], f["column"], f["end_line"], f["end_column"], f["kind"], f["fixes"]))
    assert found["other.md"] == found["lf.md"] and (3, 33) in [h[:2] for h in found["lf.md"]]


def test_bad_usage_exits_2(workspace, capsys):
    assert run(capsys, "missing.md")[0] == 2
    with pytest.raises(SystemExit) as bad:
        cli_main(["check", "docs", "--format", "xml"])
    assert bad.value.code == 2
    with pytest.raises(SystemExit) as none:
        cli_main(["check"])
    assert none.value.code == 2


def test_json_and_github_formats(workspace, capsys):
    code, out, _ = run(capsys, "docs", "--format", "json")
    rows = json.loads(out)
    typo = next(r for r in rows if r["kind"] == "typo")
    assert code == 1 and typo["path"] == "docs/a.md" and (typo["line"], typo["column"]) == (1, 11)
    assert (typo["end_line"], typo["end_column"], typo["severity"]) == (1, 14, "warning")
    assert typo["fixes"][0] == "the"
    _, out, _ = run(capsys, "docs", "--format", "github")
    assert "::warning file=docs/a.md,line=1,col=11,endLine=1,endColumn=14,title=vq-lsp typo::possible typo" in out


def test_sarif_has_the_schemas_required_fields(workspace, capsys):
    (workspace / "docs" / "review.md").write_text(  # an opinion, so a tone hint is among the results
        "This film was a complete waste of time: the acting was dreadful, the plot made no sense, and I "
        "walked out bored and angry. The worst thing I have seen all year.\n"
    )
    code, out, _ = run(capsys, "docs", "--format", "sarif")
    log = json.loads(out)
    # required by the SARIF 2.1.0 schema: sarifLog.version and runs; run.tool; tool.driver; driver.name;
    # result.message (with text); physicalLocation.artifactLocation; region lines/columns are integers >= 1
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (sarif_run,) = log["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "vq-lsp" and {r["id"] for r in driver["rules"]} >= {"typo", "sentiment"}
    results = sarif_run["results"]
    assert results and code == 1
    for r in results:
        assert isinstance(r["message"]["text"], str) and r["level"] in ("none", "note", "warning", "error")
        assert r["ruleId"] in {rule["id"] for rule in driver["rules"]}
        (loc,) = r["locations"]
        region = loc["physicalLocation"]["region"]
        assert loc["physicalLocation"]["artifactLocation"]["uri"] in ("docs/a.md", "docs/b.md", "docs/review.md")
        assert all(
            isinstance(region[k], int) and region[k] >= 1 for k in ("startLine", "startColumn", "endLine", "endColumn")
        )
    assert {r["level"] for r in results if r["ruleId"] == "typo"} == {"warning"}


def test_configuration_dictionaries_and_ignore_comments_are_honoured(workspace, capsys):
    (workspace / "vq-lsp.toml").write_text(
        'words = ["mornning"]\nexclude = ["docs/skip/**"]\n[diagnostics]\nsentiment = false\n'
    )
    (workspace / ".vq-lsp-words.txt").write_text("# team words\n")
    (workspace / "docs" / "skip").mkdir()
    (workspace / "docs" / "skip" / "c.md").write_text(TYPOS)
    (workspace / "docs" / "ignored.md").write_text("<!-- vq-lsp-disable-next-line typo -->\n" + TYPOS)
    code, out, _ = run(capsys, "docs")
    assert out.splitlines() == [line for line in out.splitlines() if line.startswith("docs/a.md:1:11: warning typo")]
    assert code == 1
    (workspace / ".vq-lsp-words.txt").write_text("# team words\nteh\n")
    assert run(capsys, "docs")[:2] == (0, "")
    (workspace / "vq-lsp.toml").write_text('[diagnostics]\ntypo-severity = "hint"\n')
    code, out, _ = run(capsys, "docs")
    assert code == 0 and "docs/b.md:3:33: hint typo" in out  # hints do not fail the default --fail-on warning


def test_a_paragraph_without_words_gets_no_tone_even_when_any_length_may(workspace, capsys):
    """toneMinWords 0 and every tone shown: the prose paragraphs get one, a rule of stars or dashes none."""
    (workspace / "vq-lsp.toml").write_text("[diagnostics]\nsentiment-threshold = 0.0\ntone-min-words = 0\n")
    (workspace / "rules.txt").write_text("The film was a delight from start to finish.\n\n***\n\n  -- \n\nIt was.\n")
    (workspace / "rules.md").write_text("The film was a delight from start to finish.\n\n  -- \n\n...\n\nIt was.\n")
    code, out, err = run(capsys, "rules.txt", "rules.md", "--fail-on", "never")
    tones = [line.split(": ")[0] for line in out.splitlines() if " sentiment " in line]
    assert code == 0 and sorted(tones) == ["rules.md:1:1", "rules.md:7:1", "rules.txt:1:1", "rules.txt:7:1"], out


def test_a_word_the_workspace_uses_consistently_is_no_typo_in_any_file(workspace, capsys):
    one = "# Engine\n\nThe engine keeps its dtype with the state, and every edit reads it from there.\n"
    (workspace / "docs" / "engine.md").write_text(one)
    code, out, _ = run(capsys, "docs/engine.md", "--format", "json")
    assert [f["message"].split("'")[1] for f in json.loads(out) if f["kind"] == "typo"] == ["dtype"]  # alone
    (workspace / "docs" / "model.md").write_text(
        "# Model\n\nA model's dtype is float32 unless it was exported in another dtype.\n"
    )
    (workspace / "docs" / "moved.md").write_text("I went to teh store.\n\nThen I went to teh bank and teh park.\n")
    code, out, _ = run(capsys, "docs/engine.md", "docs/model.md", "docs/moved.md", "--format", "json")
    words = [f["message"].split("'")[1] for f in json.loads(out) if f["kind"] == "typo"]
    assert words == ["teh", "teh", "teh"]  # three files together: dtype is the writer's word, teh a slip


def test_a_malformed_configuration_file_is_one_warning(workspace, capsys):
    (workspace / "vq-lsp.toml").write_text("[diagnostics]\ntypo-threshold = 'high'\n")
    code, out, err = run(capsys, "docs/a.md")
    assert "vq-lsp.toml: diagnostics.typoThreshold = 'high' is invalid" in err and code == 1
    assert "Traceback" not in err


def test_the_console_script_and_the_pre_commit_hook(workspace):
    env = {**os.environ, "PYTHONPATH": str(Path(check.__file__).resolve().parents[2])}
    proc = subprocess.run(
        [VQ_LSP, "check", "docs/a.md", "docs/image.txt"], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 1 and "docs/a.md:1:11: warning typo" in proc.stdout
    assert "docs/image.txt: skipped: a binary file" in proc.stderr and "Traceback" not in proc.stderr
    hooks = (Path(check.__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "entry: vq-lsp check" in hooks and "id: vq-lsp-check" in hooks
