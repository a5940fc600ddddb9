"""Headless Neovim applies the "Add 'X' to the workspace dictionary" quick fix as it applies any code
action (a WorkspaceEdit, no client-side command): the word list is created and edited in a buffer,
and the server, which reads the word list's buffer, drops the typo hint without the file being saved."""

from __future__ import annotations

from pathlib import Path

import inference
from tests.editors.test_nvim import VQ_LSP, drive

DRIVER = Path(__file__).with_name("nvim_dictionary_drive.lua")


def test_neovim_applies_the_add_word_fix_and_the_hint_goes(tmp_path):
    (tmp_path / ".git").mkdir()  # the workspace root the plugin finds
    bundled = Path(inference.__file__).parent / "default_model"
    path = f"{VQ_LSP.parent}:{Path('/usr/bin')}"
    result = drive(DRIVER, tmp_path, bundled, PATH=path, VQ_LSP_USER_DICTIONARY=str(tmp_path / "user-words.txt"))
    assert result["steps"] == ["attached", "typo", "applied", "gone"]
    assert Path(result["root_dir"]) == tmp_path
    assert {
        "Add 'teh' to the workspace dictionary",
        "Add 'teh' to your dictionary",
        "Ignore 'teh' in this document",
    } <= set(result["titles"])
    assert [line for line in result["words_buffer"] if line] == ["teh"]
    assert result["words_modified"] and result["words_attached"]
    on_disk = tmp_path / ".vq-lsp-words.txt"  # the word is in the buffer only: not saved yet
    assert not on_disk.exists() or "teh" not in on_disk.read_text()
