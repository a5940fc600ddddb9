"""`vq-lsp score --git` on small real repositories: renames, merges, deletions, binary content, bad paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.batch.git_repo import Repo
from vq_lsp.scoring import command
from vq_lsp.scoring.revisions import from_git, git_history

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

A = "The film was slow.\n\nThe actors tried hard.\n"
B = "The film was slow and dull.\n\nThe actors tried hard.\n"
C = "The film was quick and bright.\n\nThe actors tried very hard.\n"
D = "A side branch rewrote the ending.\n"


def _texts(path: Path, **kw) -> tuple[list[str], list[str], list[str]]:
    warnings, notes = [], []
    revs = list(from_git(path, warnings.append, notes.append, **kw))
    return [text for _, _, text in revs], warnings, notes


@pytest.fixture()
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "repo")


def test_rename_history_gives_every_content_in_order(repo):
    """A renamed file: two edits, a rename, one more edit -> the three contents, oldest first."""
    c1 = repo.commit("first", **{"old.md": A})
    c2 = repo.commit("edit", **{"old.md": B})
    repo.git("mv", "old.md", "essay.md")
    repo.commit("rename")
    c4 = repo.commit("edit again", **{"essay.md": C})
    texts, warnings, notes = _texts(repo.root / "essay.md")
    assert texts == [A, B, C]
    assert warnings == []
    assert "old.md -> essay.md" in notes[0] and "4 commits" in notes[0] and "3 distinct" in notes[0]
    labels = [label for _, label, _ in from_git(repo.root / "essay.md", print)]
    assert labels == [c1[:10], c2[:10], c4[:10]]


def test_rename_into_another_folder_with_an_edit(repo):
    """git pairs a renamed-and-edited file with its old name when most lines are kept (its 50% rule)."""
    body = "".join(f"Paragraph {i} keeps its words.\n\n" for i in range(8))
    first, second, third = A + body, B + body, C + body
    repo.commit("first", **{"notes.txt": first})
    (repo.root / "docs").mkdir()
    repo.git("mv", "notes.txt", "docs/essay.md")
    (repo.root / "docs" / "essay.md").write_text(second)
    repo.git("add", "docs/essay.md")
    repo.commit("move and edit")
    repo.commit("edit", **{"docs__essay.md": third})
    texts, warnings, notes = _texts(repo.root / "docs" / "essay.md")
    assert texts == [first, second, third] and warnings == []
    assert "notes.txt -> docs/essay.md" in notes[0]


def test_scorer_rows_follow_the_rename(repo, tiny_model_dir, capsys):
    repo.commit("first", **{"old.md": A})
    repo.commit("edit", **{"old.md": B})
    repo.git("mv", "old.md", "essay.md")
    repo.commit("rename")
    repo.commit("edit again", **{"essay.md": C})
    code = command.main(["--git", str(repo.root / "essay.md"), "--model", str(tiny_model_dir), "--verify"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    revisions = [r for r in rows if r["type"] == "revision"]
    assert len(revisions) == 3 and all(r["verified"] for r in revisions)
    assert revisions[1]["changed_tokens"] < revisions[1]["tokens"]  # an edit of the previous revision, not afresh
    assert "followed old.md -> essay.md" in err and "Traceback" not in err


def _merge_repo(repo: Repo) -> None:
    repo.commit("first", **{"essay.md": A})
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side 1", **{"essay.md": B})
    repo.commit("side 2", **{"essay.md": D})
    repo.git("checkout", "-q", "main")
    repo.commit("unrelated", **{"other.txt": "x\n"})
    repo.clock += 60
    repo.git("merge", "-q", "--no-ff", "--no-edit", "side")
    repo.commit("after merge", **{"essay.md": C})


def test_merges_first_parent_by_default(repo):
    _merge_repo(repo)
    texts, warnings, notes = _texts(repo.root / "essay.md")
    assert texts == [A, D, C]  # the merge is one revision: the side branch's steps are not on the main line
    assert "first-parent" in notes[0] and warnings == []


def test_merges_all_includes_the_side_branch(repo):
    _merge_repo(repo)
    texts, _, notes = _texts(repo.root / "essay.md", merges="all")
    assert texts == [A, B, D, C]
    assert "all history" in notes[0]


def test_deleted_then_restored(repo):
    repo.commit("first", **{"essay.md": A})
    repo.commit("delete", **{"essay.md": None})
    repo.commit("restore", **{"essay.md": B})
    texts, warnings, notes = _texts(repo.root / "essay.md")
    assert texts == [A, B] and warnings == []
    assert any("restored after its deletion" in n for n in notes)


def test_deleted_file_still_has_a_history(repo):
    repo.commit("first", **{"essay.md": A})
    repo.commit("edit", **{"essay.md": B})
    repo.commit("delete", **{"essay.md": None})
    texts, warnings, _ = _texts(repo.root / "essay.md")
    assert texts == [A, B]
    assert any("deleted in" in w and "not restored" in w for w in warnings)


def test_binary_revision_is_reported_and_skipped(repo):
    repo.commit("first", **{"essay.md": A})
    repo.commit("oops", **{"essay.md": b"\x00\x01\x02binary\x00"})
    repo.commit("fixed", **{"essay.md": C})
    texts, warnings, _ = _texts(repo.root / "essay.md")
    assert texts == [A, C]
    assert len(warnings) == 1 and "binary" in warnings[0] and "essay.md@" in warnings[0]


def test_unchanged_content_across_a_revert_is_still_a_revision(repo):
    """A -> B -> A: the third commit changed the content (back), so it is a revision."""
    repo.commit("first", **{"essay.md": A})
    repo.commit("edit", **{"essay.md": B})
    repo.commit("revert", **{"essay.md": A})
    assert _texts(repo.root / "essay.md")[0] == [A, B, A]


@pytest.mark.parametrize(
    "case, expected",
    [
        ("outside", "not inside a git repository"),
        ("untracked", "git does not know this path"),
        ("staged", "staged but not committed"),
        ("missing", "git does not know this path"),
        ("folder", "is a folder"),
        ("empty repo", "no commits yet"),
    ],
)
def test_bad_paths_are_clear_errors(tmp_path, case, expected, capsys):
    repo = Repo(tmp_path / "repo")
    if case != "empty repo":
        repo.commit("first", **{"essay.md": A})
    target = {
        "outside": tmp_path / "loose.md",
        "untracked": repo.root / "new.md",
        "staged": repo.root / "staged.md",
        "missing": repo.root / "nope" / "never.md",
        "folder": repo.root,
        "empty repo": repo.root / "x.md",
    }[case]
    if case in ("outside", "untracked", "staged", "empty repo"):
        target.write_text(A)
    if case == "staged":
        repo.git("add", "staged.md")
    if case == "empty repo":
        repo.git("add", "x.md")
    with pytest.raises(ValueError, match=expected):
        git_history(target)
    code = command.main(["--git", str(target), "--model", str(tmp_path / "no-model")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("vq-lsp score: error: ") and expected in err and "Traceback" not in err


def test_missing_git_program_is_a_clear_error(repo, monkeypatch):
    repo.commit("first", **{"essay.md": A})
    monkeypatch.setenv("PATH", str(repo.root / "no-bin"))
    with pytest.raises(ValueError, match="needs the `git` program"):
        git_history(repo.root / "essay.md")
