"""The VS Code extension's client-side code against the real `vq-lsp`, without VS Code (it cannot
be downloaded here): editors/vscode/out/e2e/server.js maps the package.json settings with the
extension's own `serverSettings`, drives the server over stdio with vscode-jsonrpc, and formats
the answers as the status bar, the cost command and the verify code lens do.

It needs the extension built (`npm ci && npx tsc -p .` in editors/vscode, as .ci/run does before
pytest). Without a build it is skipped, except under CI, where a missing build is a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

VSCODE = Path(__file__).resolve().parents[2] / "editors" / "vscode"
SCRIPT = VSCODE / "out" / "e2e" / "server.js"
VQ_LSP = Path(sys.executable).parent / "vq-lsp"


@pytest.fixture(scope="module")
def session(tmp_path_factory, tiny_model_dir) -> dict:
    node = shutil.which("node")
    if node is None or not SCRIPT.exists() or not (VSCODE / "node_modules").is_dir():
        message = "editors/vscode is not built: run `npm ci && npx tsc -p .` there"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path_factory.mktemp("vscode") / "out.json"
    try:
        env = {**os.environ, "VQ_LSP_CACHE_DIR": str(out.parent / "vq-lsp-cache")}  # a fresh snapshot cache
        proc = subprocess.run(
            [node, str(SCRIPT), str(VQ_LSP), str(tiny_model_dir), str(out)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=200,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the e2e client did not finish in 200 s: {e.stderr}")
    if not out.exists():
        pytest.fail(f"no result (exit {proc.returncode}): {proc.stderr[-3000:]}")
    result = json.loads(out.read_text())
    assert "error" not in result, f"{result['error']}; messages: {result['messages']}; {proc.stderr[-2000:]}"
    assert proc.returncode == 0
    return result


def test_server_accepts_every_mapped_setting(session):
    # the server shows a warning for every unknown or invalid setting it gets
    assert [m for m in session["messages"] if m["type"] <= 2] == []


def test_settings_reach_the_server(session):
    diags = session["diagnostics"]
    assert len([d for d in diags if d["code"] == "sentiment"]) == 2  # threshold 0: both paragraphs
    assert len([d for d in diags if d["code"] == "surprise"]) == 2  # maxSurpriseHints = 2
    after = session["afterSettings"]
    assert [d["code"] for d in after] == ["sentiment", "sentiment"]  # surprise switched off on change


def test_status_bar_and_cost_statistics_read_the_real_answer(session):
    scores = session["scores"]
    label = max(scores["scores"], key=scores["scores"].get)
    assert session["statusText"] == f"$(pulse) {label} {scores['scores'][label]:.2f}"
    assert f"{scores['tokens']} tokens, 2 paragraphs, version 2" in session["statusTooltip"]
    assert "MACs incremental vs" in session["costSummary"]  # version 2 was an incremental update
    assert (
        "dirty positions per layer: " + ", ".join(map(str, scores["cost"]["dirty_per_layer"])) in session["formatCost"]
    )


def test_verify_code_lens_result(session):
    assert session["verify"]["ok"] and "equals a full pass" in session["verify"]["text"]


def test_code_lens_shows_the_document_score(session):
    scores = session["scores"]
    label = max(scores["scores"], key=scores["scores"].get)
    (lens,) = session["codeLens"]
    assert lens["command"]["title"].startswith(f"vq-lsp: {label} ")
    assert lens["command"]["command"] == "vqLsp.verify"


def test_cost_statistics_after_a_snapshot_restore_read_as_words(session):
    restored = session["restoredScores"]
    cost = restored["cost"]
    assert set(cost) == {"restore_seconds", "tokens"} and restored["restores"] == 1
    summary = (
        f"restored from a snapshot: {cost['tokens']} tokens in {cost['restore_seconds'] * 1000:.1f} ms "
        "(no incremental update since)"
    )
    assert f"last update: {summary}" in session["restoredStatusTooltip"]
    assert f"last update: {summary}" in session["restoredFormatCost"]
    assert "restores: 1" in session["restoredFormatCost"] and "{" not in session["restoredFormatCost"]
