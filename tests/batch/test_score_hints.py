"""`vq-lsp score` hints: markup-aware rows, typo rows, and text output on a terminal."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from vq_lsp.scoring import command

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "review"
MARKDOWN = """# Notes on the plan

We went to teh market and bought bread, then we walked slowly back home together.

| teh | recieve |
|-----|---------|
| becuase | wrod |

Run `teh --recieve` or read https://example.com/teh/recieve first.

```
teh recieve becuase
```
"""


class Terminal(io.StringIO):
    """stdout and stderr of a terminal: one screen, and a tty (so the progress bar is drawn)."""

    def isatty(self) -> bool:
        return True


def test_text_rows_never_share_a_line_with_the_progress_bar(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stdout", term)
    monkeypatch.setattr(sys, "stderr", term)
    assert command.main([str(EXAMPLE), "--format", "text", "--sentiment-threshold", "0", "--tone-min-words", "0"]) == 0
    # what the screen shows: on each line, the text after the last carriage return
    shown = [line.split("\r")[-1] for line in term.getvalue().split("\n")]
    headers = [line for line in shown if "review/draft" in line]
    assert len(headers) == 4 and all(line.startswith("review/draft") for line in headers), headers
    hints = [line for line in shown if " tone (" in line]
    assert hints and all(line.startswith("  line ") for line in hints)
    summary = [line for line in shown if "revisions of 1 document," in line]
    assert len(summary) == 1 and summary[0].startswith("4 revisions"), summary
    assert term.getvalue().endswith("\n")


def test_markdown_rows_hint_prose_only(tmp_path, capsys):
    (tmp_path / "notes.md").write_text(MARKDOWN)
    assert command.main([str(tmp_path), "--surprise-threshold", "0"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    lines = MARKDOWN.splitlines()
    hinted = {(h["line"], h["text"]) for h in row["typos"] + row["surprises"]}
    assert hinted and {line for line, _ in hinted} <= {0, 2, 8}  # the heading and the two paragraphs
    assert {word for line, word in hinted if line == 8} <= {"Run", "or", "read", "first"}  # no code, no URL
    assert (2, "teh") in {(h["line"], h["text"]) for h in row["typos"]}
    for h in row["typos"]:
        assert lines[h["line"]][h["column"] :].startswith(h["text"]) and h["fixes"]
    assert [p["line"] for p in row["paragraphs"]] == [2, 8]  # prose paragraphs: no heading, table or code
    assert row["paragraphs"][0]["words"] == 15


def test_markup_flag_overrides_the_file_name(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text(MARKDOWN)
    assert command.main([str(tmp_path), "--markup", "none"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["typos"] == [] and row["paragraphs"] == [] and row["scores"]
    assert command.main([str(tmp_path), "--markup", "markdown"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert {h["line"] for h in row["typos"]} <= {0, 2, 8} and row["typos"]


def test_text_format_shows_typos_with_fixes(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("We went to teh market and bought bread.\n")
    assert command.main([str(tmp_path), "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "  line 1:12: possible typo: 'teh' is unlikely here: " in out and "likely: 'the'" in out


def test_rows_follow_the_workspace_and_the_writers_comments(tmp_path, capsys, monkeypatch):
    """As `vq-lsp check` does: the word list of the current folder, a word the text lists for itself,
    lines an ignore comment silences, and grammar lints, in the rows and in the text listing."""
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / ".vq-lsp-words.txt").write_text("zorbulated\n")
    text = (
        "<!-- vq-lsp-words: snorkelish -->\n\nThe guide zorbulated the route, and the snorkelish lake was "
        "fine. We could of stayed.\n\n<!-- vq-lsp-disable-next-line -->\nWe went to teh market.\n\n"
        "They went to teh shop.\n"
    )
    (work / "notes" / "a.md").write_text(text)
    monkeypatch.chdir(work)
    assert command.main(["notes"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [t["text"] for t in row["typos"]] == ["teh"] and row["typos"][0]["line"] == 7  # the silenced one: none
    assert [(g["line"], g["text"]) for g in row["grammar"]] == [(2, "could of")]
    assert command.main(["notes", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "(harper: " in out and "zorbulated" not in out and "snorkelish" not in out


def test_rows_count_lines_as_an_editor_does_whatever_the_line_ends(tmp_path, capsys):
    """A file saved with \\r\\n or lone \\r line ends gets the same line and column in every row as
    the same text with \\n: each of the three ends a line, as in an editor and the server."""
    rows = {}
    for name, end in (("unix", "\n"), ("windows", "\r\n"), ("mac", "\r")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "notes.md").write_bytes(MARKDOWN.replace("\n", end).encode())
        assert command.main([str(folder), "--surprise-threshold", "0"]) == 0
        row = json.loads(capsys.readouterr().out.splitlines()[0])
        rows[name] = (
            [(h["line"], h["column"], h["text"]) for h in row["typos"] + row["surprises"]],
            [p["line"] for p in row["paragraphs"]],
        )
    assert rows["unix"][0] and rows["unix"][1] == [2, 8]
    assert rows["windows"] == rows["unix"] and rows["mac"] == rows["unix"]


def test_the_readme_quick_start_shows_what_the_bundled_model_prints(capsys):
    """The README's quick start quotes the last draft's block of `vq-lsp score examples/review --format
    text` at the defaults; a new bundled model that prints something else fails here until it is quoted."""
    readme = (EXAMPLE.parents[1] / "README.md").read_text(encoding="utf-8")
    quoted = readme.split("## Quick start", 1)[1].split("```\n", 2)[1].splitlines()
    assert command.main([str(EXAMPLE), "--format", "text"]) == 0
    printed = capsys.readouterr().out.splitlines()
    last = next(i for i, line in enumerate(printed) if line.startswith("review/draft4.txt:"))
    assert printed[last:] == quoted
