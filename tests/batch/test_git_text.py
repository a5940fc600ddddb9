"""`vq-lsp score --git FILE --format text`, through the real command on a small repository: each commit
named by date, short hash and subject, the score's change, only the hints new or gone since the previous
commit (`--all-hints`: all of them), a progress bar on a terminal only, and the defaults in `--help`."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch.git_repo import Repo
from vq_lsp.scoring import command
from vq_lsp.scoring.hint_changes import ListedHint, changes, line_map
from vq_lsp.scoring.output import RowWriter
from vq_lsp.scoring.revisions import CommitHeader, parse_raw_log
from vq_lsp.scoring.rows import RevisionRow, TypoRow
from vq_lsp.settings import DiagnosticSettings

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

VQ_LSP = Path(sys.executable).parent / "vq-lsp"
FIRST = "We went to teh market and bought bread.\n\nThe walk home was long and quiet.\n"
SECOND = "A new opening paragraph, where we recieve the guests.\n\n" + FIRST  # 'teh' moves down two lines
THIRD = SECOND.replace("teh", "the")
SUBJECTS = ["First draft", ":memo: an opening paragraph", "Fix a typo"]  # a subject may start with ':'


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[str]]:
    repo = Repo(tmp_path_factory.mktemp("git") / "repo")
    commits = [repo.commit(subject, **{"essay.md": text}) for subject, text in zip(SUBJECTS, (FIRST, SECOND, THIRD))]
    return repo.root / "essay.md", commits


def _score(history, tiny_model_dir, *extra: str, stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    """The console script itself; tones need 1000 words here, so only the typo hints are listed."""
    path, _ = history
    return subprocess.run(
        [
            str(VQ_LSP),
            "score",
            "--git",
            str(path),
            "--model",
            str(tiny_model_dir),
            "--format",
            "text",
            "--tone-min-words",
            "1000",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        timeout=300,
    )


def _revisions(out: str) -> list[list[str]]:
    """The text output cut at each revision's header (the lines that do not start with a space)."""
    blocks: list[list[str]] = []
    for line in out.splitlines():
        if not line.startswith(" "):
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def test_each_commit_lists_only_the_hints_it_added_or_removed(history, tiny_model_dir):
    proc = _score(history, tiny_model_dir)
    assert proc.returncode == 0, proc.stderr
    first, second, third = _revisions(proc.stdout)
    _, commits = history
    assert [block[0] for block in (first, second, third)] == [
        f"2023-11-14 {commit[:10]} {subject}" for commit, subject in zip(commits, SUBJECTS)
    ]
    # the document score, and from the second commit on its change
    assert re.fullmatch(r"  \w+ \d\.\d\d; (\d+) of \1 tokens changed, .*; 1 hint: 1 new, 0 gone", first[1]), first
    assert re.fullmatch(r"  \w+ \d\.\d\d \([+-]\d\.\d\d\); .*; 2 hints: 1 new, 0 gone", second[1]), second
    assert re.fullmatch(r"  \w+ \d\.\d\d \([+-]\d\.\d\d\); .*; 1 hint: 0 new, 1 gone", third[1]), third
    assert first[2:] == ["  + line 1:12: possible typo: 'teh' is unlikely here: " + first[2].split("here: ")[1]]
    assert len(second) == 3 and second[2].startswith("  + line 1:") and "'recieve'" in second[2]  # 'teh' moved: kept
    assert len(third) == 3 and third[2].startswith("  - line 3:12: possible typo: 'teh'")  # its line before the fix
    assert "\r" not in proc.stderr and "3/3" not in proc.stderr  # stderr is a pipe: no progress bar


def test_all_hints_lists_every_hint_of_every_commit(history, tiny_model_dir):
    proc = _score(history, tiny_model_dir, "--all-hints")
    assert proc.returncode == 0, proc.stderr
    first, second, third = _revisions(proc.stdout)
    assert first[2:] == [f"  line 1:12: possible typo: 'teh' is unlikely here: {first[2].split('here: ')[1]}"]
    assert [line.split(": possible typo: ")[1].split(" ")[0] for line in second[2:]] == ["'recieve'", "'teh'"]
    assert second[3].startswith("  line 3:12: ") and second[1].endswith("; 2 hints")
    assert len(third) == 3 and "'recieve'" in third[2]


def test_progress_bar_only_on_a_terminal(history, tiny_model_dir):
    """stderr a terminal: the bar counts the revisions against their known total. The pseudo-terminal here
    reports no width, as under `script` or a task runner; the bar is drawn all the same."""
    main, side = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(VQ_LSP), "score", "--git", str(history[0]), "--model", str(tiny_model_dir)],
            stdout=subprocess.PIPE,
            stderr=side,
            text=True,
        )
        os.close(side)
        screen = b""
        while True:
            ready, _, _ = select.select([main], [], [], 300)
            assert ready, "no output from vq-lsp score in 300 s"
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: the command is done
                break
            if not chunk:
                break
            screen += chunk
        out = proc.communicate(timeout=60)[0]
    finally:
        os.close(main)
    assert proc.returncode == 0, screen
    shown = screen.decode(errors="replace")
    assert "3/3" in shown and "rev" in shown and "\r" in shown, shown
    assert out.count('"type": "revision"') == 3 and "3/3" not in out  # the rows stay clean on stdout


def test_help_states_every_default():
    proc = subprocess.run([str(VQ_LSP), "score", "--help"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # argparse wraps the help
    hints = DiagnosticSettings()  # the server's defaults, which `score` shares
    assert "(default: jsonl)" in text and f"else {hints.sentiment_threshold})" in text
    assert f"else {hints.tone_min_words})" in text
    for action in command.build_parser()._actions:
        if action.option_strings and action.dest != "help":
            assert "default" in (action.help or ""), f"{action.option_strings[0]}: {action.help}"


def test_all_hints_needs_git_text(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        command.parse_args([str(tmp_path), "--all-hints"])
    assert exit_.value.code == 2 and "--all-hints" in capsys.readouterr().err


def _hint(kind: str, word: str, line: int, follows_word: bool = True) -> ListedHint:
    return ListedHint((kind, word), line, follows_word, f"line {line + 1}: {kind} {word}")


def test_a_tone_follows_its_paragraph_through_an_edit_above_it():
    old = "One.\n\nTwo is happy.\n"
    new = "Zero.\n\nOne.\n\nTwo is happy.\n"
    assert line_map(old, new) == {0: 2, 1: 3, 2: 4}
    tone = _hint("tone", "positive", 2, follows_word=False)
    assert changes([tone], [_hint("tone", "positive", 4, follows_word=False)], old, new).kept == 1
    moved = changes([tone], [_hint("tone", "positive", 0, follows_word=False)], old, new)  # another paragraph
    assert moved.kept == 0 and [h.line for h in moved.new] == [0] and [h.line for h in moved.gone] == [2]


def test_a_repeated_word_counts_once_per_occurrence():
    old = "teh cat.\n"
    new = "teh cat.\nteh dog.\n"
    diff = changes([_hint("typo", "teh", 0)], [_hint("typo", "teh", 0), _hint("typo", "teh", 1)], old, new)
    assert diff.kept == 1 and [h.line for h in diff.new] == [1] and diff.gone == []
    # a rewritten line that keeps its typo keeps the hint; a deleted one loses it
    assert changes([_hint("typo", "teh", 0)], [_hint("typo", "teh", 0)], old, "so teh cat.\n").new == []
    gone = changes([_hint("typo", "teh", 0), _hint("typo", "teh", 1)], [_hint("typo", "teh", 0)], new, old)
    assert [h.line for h in gone.gone] == [1]


def _row(label: str, scores: dict[str, float] | None, typos: list[tuple[int, int, str]]) -> RevisionRow:
    """A scorer row with only what the text output reads."""
    return RevisionRow(
        doc="essay.md",
        revision=label,
        index=0,
        tokens=10,
        changed_tokens=10,
        scores=scores,
        typos=[
            TypoRow(line, column, word, "non-word", 9.0, 9.0, ["the"], f"possible typo: {word!r} is unlikely here")
            for line, column, word in typos
        ],
        incremental_macs=1,
        dense_macs=1,
    )


def test_an_empty_commit_restarts_the_comparison():
    """After a commit that empties the file, the next one is compared with nothing: its hints are new,
    and no score change is given."""
    out = io.StringIO()
    labels = ("aaaaaaaaa1", "aaaaaaaaa2", "aaaaaaaaa3")
    commits = {c: CommitHeader(c, "2024-01-0" + c[-1], f"subject {c}") for c in labels}
    writer = RowWriter(out, "text", ("negative", "positive"), commits=commits, changes_only=True)
    writer.row(_row("aaaaaaaaa1", {"negative": 0.3, "positive": 0.7}, [(0, 0, "teh")]), "teh cat\n")
    writer.row(_row("aaaaaaaaa2", None, []), "")
    writer.row(_row("aaaaaaaaa3", {"negative": 0.4, "positive": 0.6}, [(0, 0, "teh")]), "teh cat\n")
    lines = out.getvalue().splitlines()
    assert lines[0] == "2024-01-01 aaaaaaaaa1 subject aaaaaaaaa1"
    assert lines[3:5] == ["2024-01-02 aaaaaaaaa2 subject aaaaaaaaa2", "  empty"]
    assert lines[5] == "2024-01-03 aaaaaaaaa3 subject aaaaaaaaa3"
    assert lines[6].startswith("  positive 0.60; ") and lines[6].endswith("1 hint: 1 new, 0 gone")
    assert lines[7] == "  + line 1:1: possible typo: 'teh' is unlikely here" and len(lines) == 8


def test_log_records_split_at_commits_only():
    """A subject may hold the record separator or start like a raw entry; neither splits or adds a record."""
    blob = "1" * 40
    record = (
        b"\x01"
        + b"a" * 40
        + b"\x002024-05-06T07:08:09+02:00\x00:memo: odd \x01 subject\x00\n"
        + f":100644 100644 {'0' * 40} {blob} M".encode()
        + b"\x00essay.md\x00"
    )
    (rev,) = parse_raw_log(record)
    assert (rev.commit, rev.date, rev.subject) == ("a" * 40, "2024-05-06", ":memo: odd \x01 subject")
    assert (rev.blob, rev.path, rev.status) == (blob, "essay.md", "M")
