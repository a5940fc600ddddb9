"""The same text gets the same scores on every path: `vq-lsp score` over the review drafts,
`vq-lsp check` on the last draft, and the server that was edited from the first draft to it.

All three run through their real entry points on the bundled model in float32. The server's
live state after the edits holds history-dependent positions, but the bundled model reads only
the order of its tokens, so its hints and scores are a fresh open's (what `check` computes) as
soon as they are published, without waiting for the document to settle.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytest_lsp

from vq_lsp.cli import main as vq_lsp_main

from .lsp_helpers import CONFIG, change, diagnostics_for, initialize, open_doc, scores

pytestmark = pytest.mark.asyncio(loop_scope="module")

DRAFTS = Path(__file__).resolve().parents[2] / "examples" / "review"
OPTIONS = {"precision": "float32"}
TONE = re.compile(r"^(\S+) tone \((\d\.\d\d)\)")


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    await initialize(lsp_client, "visual-studio-code", OPTIONS)  # the bundled model
    yield
    await lsp_client.shutdown_session()


def score_rows(capsys) -> list[dict]:
    assert vq_lsp_main(["score", str(DRAFTS), "--precision", "float32"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [r for r in rows if r["type"] == "revision"]


def check_tones(capsys) -> set[tuple[int, str, str]]:
    """(0-based line, label, probability) of the tone findings `vq-lsp check` prints for draft4."""
    vq_lsp_main(["check", str(DRAFTS / "draft4.txt"), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    findings = out if isinstance(out, list) else out["findings"]
    return {(f["line"] - 1, *TONE.match(f["message"]).groups()) for f in findings if f["kind"] == "sentiment"}


def tones_of(diagnostics) -> set[tuple[int, str, str]]:
    return {(d.range.start.line, *TONE.match(d.message).groups()) for d in diagnostics if d.code == "sentiment"}


async def test_score_check_and_an_edited_server_agree_on_the_last_draft(client, capsys):
    texts = [(DRAFTS / f"draft{i}.txt").read_text() for i in range(1, 5)]
    rows = score_rows(capsys)
    assert [r["revision"] for r in rows] == ["draft1.txt", "draft2.txt", "draft3.txt", "draft4.txt"]
    want_tones = check_tones(capsys)
    assert want_tones  # the draft has paragraphs with a tone

    uri = "file:///tmp/vq/review.txt"
    open_doc(client, uri, texts[0], version=1)
    await diagnostics_for(client, uri, 1, timeout=120)
    for version, text in enumerate(texts[1:], 2):  # each draft as the editor's full text
        change(client, uri, version, text)
    live = await diagnostics_for(client, uri, 4, timeout=120)
    assert tones_of(live.diagnostics) == want_tones
    got = await scores(client, uri)
    assert got["version"] == 4
    for label, p in rows[-1]["scores"].items():
        assert abs(got["scores"][label] - p) < 1e-5
