"""The language server and `vq-lsp score` show the same hints for the same document.

Both run through their real entry points: the `vq-lsp` process over stdio (its published
diagnostics) and the `vq-lsp score` command (its text output), on the bundled model with the
same precision and thresholds. Tone, typos and unlikely words must match one for one, at the
same places and in the same words; a word shown as a typo is never also shown as an unlikely
word, by either. Both choose under the writer's conventions: a word of the workspace's word list,
a word the document lists in a `vq-lsp-words:` comment and a line an ignore comment silences get
no hint from either, and both show the same grammar lints.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import pytest_lsp

from vq_lsp.cli import main as vq_lsp_main

from .lsp_helpers import CONFIG, diagnostics_for, initialize, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")

SURPRISE_THRESHOLD = 9.0
OPTIONS = {"precision": "float64", "diagnostics": {"surprise": True, "surpriseThreshold": SURPRISE_THRESHOLD}}
WORKSPACE = Path("/tmp/vq")  # the workspace folder lsp_helpers.initialize names
WORKSPACE_WORD, DOCUMENT_WORD, SILENCED = "zorbulated", "snorkelish", "frendly"
DOCUMENT = """# Notes from the weekend

<!-- vq-lsp-words: snorkelish -->

The guide zorbulated the route for us, and the snorkelish lake was the best stop. We could of stayed longer.

<!-- vq-lsp-disable-next-line -->
The frendly baker gave us bread.

We went to teh market early on Saturday, and the whole morning was a wonderful, sunny delight from
start to finish: fresh bread, kind people and music in every street.

| teh | recieve |
|-----|---------|
| becuase | wrod |

The second day was even better. The train was early, the hotel gave us a lovely room, and I could not
beleive how kind the staff were to every guest who asked them for help with there luggage.

```
teh recieve becuase
```
"""

TYPO = re.compile(r"line (\d+):(\d+): (possible typo: '([^']*)'.*)$")
SURPRISE = re.compile(r"line (\d+):(\d+): (unexpected '([^']*)' \(surprise.*)$")
TONE = re.compile(r"line (\d+): (\S+ tone \(.*\))$")
GRAMMAR = re.compile(r"line (\d+):(\d+): (.*\(harper: .*\))$")


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    await initialize(lsp_client, "visual-studio-code", OPTIONS)  # no modelPath: the bundled model
    yield
    await lsp_client.shutdown_session()


def score_hints(folder, capsys) -> tuple[dict[str, set], list[float]]:
    """The hints `vq-lsp score --format text` prints, by kind (0-based positions as in LSP, and each
    message), and the surprise of each typo."""
    argv = ["score", str(folder), "--format", "text", "--precision", "float64"]
    assert vq_lsp_main([*argv, "--surprise-threshold", str(SURPRISE_THRESHOLD)]) == 0
    found: dict[str, set] = {"sentiment": set(), "typo": set(), "surprise": set(), "grammar": set()}
    typo_nats = []
    for line in capsys.readouterr().out.splitlines():
        if m := TYPO.search(line):
            found["typo"].add((int(m[1]) - 1, int(m[2]) - 1, m[4], m[3]))
            typo_nats.append(float(re.findall(r"([\d.]+) nats", m[3])[-1]))  # the word's own surprise
        elif m := SURPRISE.search(line):
            found["surprise"].add((int(m[1]) - 1, int(m[2]) - 1, m[4], m[3]))
        elif m := GRAMMAR.search(line):
            found["grammar"].add((int(m[1]) - 1, int(m[2]) - 1, m[3]))
        elif m := TONE.search(line):
            found["sentiment"].add((int(m[1]) - 1, m[2]))
    return found, typo_nats


def server_hints(diagnostics) -> dict[str, set]:
    """The same sets from the server's diagnostics: where each hint is, and its message word for word."""
    lines = DOCUMENT.split("\n")
    found: dict[str, set] = {"sentiment": set(), "typo": set(), "surprise": set(), "grammar": set()}
    for d in diagnostics:
        start, end = d.range.start, d.range.end
        assert start.line == end.line or d.code == "sentiment"
        word = lines[start.line][start.character : end.character]
        if d.code == "sentiment":
            found["sentiment"].add((start.line, d.message))
        elif d.code == "grammar":
            found["grammar"].add((start.line, start.character, d.message))
        else:
            found[d.code].add((start.line, start.character, word, d.message))
    return found


@pytest.fixture
def workspace_word():
    """The workspace's word list holds WORKSPACE_WORD while the test runs (the server reads its
    workspace files again within a few seconds of a change; `vq-lsp score` reads them at its start)."""
    WORKSPACE.mkdir(exist_ok=True)
    words = WORKSPACE / ".vq-lsp-words.txt"
    words.write_text(WORKSPACE_WORD + "\n")
    yield WORKSPACE
    words.unlink()


async def test_the_server_and_the_scorer_show_the_same_hints(client, workspace_word, tmp_path, capsys, monkeypatch):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "weekend.md").write_text(DOCUMENT)
    uri = (tmp_path / "notes" / "weekend.md").as_uri()
    await asyncio.sleep(3)  # the server's look at its workspace files (every second) has seen the word list
    open_doc(client, uri, DOCUMENT, version=1, language="markdown")
    published = await diagnostics_for(client, uri, 1, timeout=300)
    server = server_hints(published.diagnostics)
    assert all(server.values())  # the document exercises every kind of hint
    assert {word for _, _, word, _ in server["typo"]} >= {"teh", "beleive"}
    typo_at = {(line, col) for line, col, _, _ in server["typo"]}
    assert not typo_at & {(line, col) for line, col, _, _ in server["surprise"]}
    lines = DOCUMENT.split("\n")
    for word in (WORKSPACE_WORD, DOCUMENT_WORD, SILENCED):  # the writer's words and the silenced line
        line = next(i for i, text in enumerate(lines) if word in text)
        assert not [h for kind in ("typo", "surprise") for h in server[kind] if h[0] == line and h[2] == word]
    assert any("could of" in lines[line][col:] for line, col, _ in server["grammar"])

    monkeypatch.chdir(workspace_word)  # `vq-lsp score` reads the workspace's files from its current folder
    scored, typo_nats = score_hints(tmp_path / "notes", capsys)
    assert max(typo_nats) >= SURPRISE_THRESHOLD  # a typo that is also surprising enough: one hint for it
    assert scored == server
