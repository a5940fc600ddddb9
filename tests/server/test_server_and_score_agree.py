"""The language server and `vq-lsp score` show the same hints for the same document.

Both run through their real entry points: the `vq-lsp` process over stdio (its published
diagnostics) and the `vq-lsp score` command (its text output), on the bundled model with the
same precision and thresholds. Tone, typos and unlikely words must match one for one, at the
same places and in the same words; a word shown as a typo is never also shown as an unlikely
word, by either.
"""

from __future__ import annotations

import re

import pytest
import pytest_lsp

from vq_lsp.cli import main as vq_lsp_main

from .lsp_helpers import CONFIG, diagnostics_for, initialize, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")

SURPRISE_THRESHOLD = 9.0
OPTIONS = {"precision": "float64", "diagnostics": {"surprise": True, "surpriseThreshold": SURPRISE_THRESHOLD}}
DOCUMENT = """# Notes from the weekend

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


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    await initialize(lsp_client, "visual-studio-code", OPTIONS)  # no modelPath: the bundled model
    yield
    await lsp_client.shutdown_session()


def score_hints(folder, capsys) -> tuple[set, set, set, list[float]]:
    """(tones, typos, unlikely words) that `vq-lsp score --format text` prints, 0-based as in LSP,
    and the surprise of each typo."""
    assert (
        vq_lsp_main(
            [
                "score",
                str(folder),
                "--format",
                "text",
                "--precision",
                "float64",
                "--surprise-threshold",
                str(SURPRISE_THRESHOLD),
            ]
        )
        == 0
    )
    tones, typos, surprises, typo_nats = set(), set(), set(), []
    for line in capsys.readouterr().out.splitlines():
        if m := TYPO.search(line):
            typos.add((int(m[1]) - 1, int(m[2]) - 1, m[4], m[3]))
            typo_nats.append(float(re.findall(r"([\d.]+) nats", m[3])[-1]))  # the word's own surprise
        elif m := SURPRISE.search(line):
            surprises.add((int(m[1]) - 1, int(m[2]) - 1, m[4], m[3]))
        elif m := TONE.search(line):
            tones.add((int(m[1]) - 1, m[2]))
    return tones, typos, surprises, typo_nats


def server_hints(diagnostics) -> tuple[set, set, set]:
    """The same sets from the server's diagnostics: where each hint is, and its message word for word."""
    lines = DOCUMENT.split("\n")
    tones, typos, surprises = set(), set(), set()
    for d in diagnostics:
        start, end = d.range.start, d.range.end
        assert start.line == end.line or d.code == "sentiment"
        word = lines[start.line][start.character : end.character]
        if d.code == "sentiment":
            tones.add((start.line, d.message))
        elif d.code == "typo":
            typos.add((start.line, start.character, word, d.message))
        elif d.code == "surprise":
            surprises.add((start.line, start.character, word, d.message))
    return tones, typos, surprises


async def test_the_server_and_the_scorer_show_the_same_hints(client, tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "weekend.md").write_text(DOCUMENT)
    uri = (tmp_path / "notes" / "weekend.md").as_uri()
    open_doc(client, uri, DOCUMENT, version=1, language="markdown")
    published = await diagnostics_for(client, uri, 1, timeout=300)
    tones, typos, surprises = server_hints(published.diagnostics)
    assert tones and typos and surprises  # the document exercises every kind of hint
    assert {word for _, _, word, _ in typos} >= {"teh", "beleive"}
    assert not {(line, col) for line, col, _, _ in typos} & {(line, col) for line, col, _, _ in surprises}

    score_tones, score_typos, score_surprises, typo_nats = score_hints(tmp_path / "notes", capsys)
    assert max(typo_nats) >= SURPRISE_THRESHOLD  # a typo that is also surprising enough: one hint for it
    assert score_tones == tones
    assert score_typos == typos
    assert score_surprises == surprises
