"""Only the protocol reaches the editor: whatever a library prints to standard output, the session goes on.

Harper prints a debugging line to file descriptor 1 for some sentences ("I am looking forward to
dinner as a treat" prints `gerund_form: ...`); any native library may do the same. On the LSP
stream such a line breaks the framing and the editor drops the session. The server here runs
with a wrapper that makes every Harper lint also write to fd 1 from C (`puts`) and from another
thread (`os.write`), on top of Harper's own print; hints must keep arriving for every version,
and `vq-lsp check` must keep printing parsable JSON and SARIF.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from .lsp_helpers import VQ_LSP, change, diagnostics_for, make_client, model_loaded, open_doc

# Sentences that make Harper print to fd 1. Linting every paragraph of the data folder's 344
# Gutenberg books and the revision histories' technical Markdown that has "forward to" (the
# phrase of the only debugging print found in harper-py's library) found one kind of print, `gerund_form: ...`,
# in three books; their sentences are kept here (public domain) beside the first one reported.
HARPER_PRINTS = [
    "I am looking forward to dinner as a treat.",
    "Plato, like ourselves, is looking forward to changes in the moral and religious world.",
    "We are looking forward to Christmas with great eagerness.",
    "He was probably, in his heart, looking forward to heaven as simply the better alternative.",
]

# Every Harper lint also prints from C and from a second thread, as a misbehaving native library would.
NOISY_SERVER = """
import ctypes, os, sys, threading
import harper

libc = ctypes.CDLL(None)
_Linter = harper.Linter


class NoisyLinter:
    def __init__(self, *args, **kwargs):
        self._inner = _Linter(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def lint(self, *args, **kwargs):
        libc.puts(b"native library output")
        libc.fflush(None)
        t = threading.Thread(target=os.write, args=(1, b"Content-Length: 5\\r\\n\\r\\nnoise"))
        t.start()
        t.join()
        return self._inner.lint(*args, **kwargs)


harper.Linter = NoisyLinter
from vq_lsp.cli import main

sys.exit(main(sys.argv[1:]))
"""

CONFIG = ClientServerConfig(server_command=[sys.executable, "-c", NOISY_SERVER], client_factory=make_client)
URI = "file:///tmp/vq-stdout/notes.md"


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            initialization_options={"device": "cpu", "diagnostics": {"grammar": True}},
            workspace_folders=[types.WorkspaceFolder(uri="file:///tmp/vq-stdout", name="notes")],
        )
    )
    await model_loaded(lsp_client)
    yield
    await lsp_client.shutdown_session()


def words_flagged(published: types.PublishDiagnosticsParams, text: str, code: str) -> list[str]:
    lines = text.split("\n")
    return [
        lines[d.range.start.line][d.range.start.character : d.range.end.character]
        for d in published.diagnostics
        if d.code == code
    ]


@pytest.mark.asyncio(loop_scope="module")
async def test_printing_libraries_never_break_the_session(client):
    text = "\n\n".join(HARPER_PRINTS) + "\n"
    open_doc(client, URI, text, version=1, language="markdown")
    await diagnostics_for(client, URI, 1)
    version = 1
    for word in ("recieve", "wierd", "becuase"):  # a misspelling typed after each print is still flagged
        line = text.count("\n")
        text += f"\nThen I {word} it.\n"
        version += 1
        change(client, URI, version, (line, 0, line, 0, f"\nThen I {word} it.\n"))
        published = await diagnostics_for(client, URI, version)
        assert word in words_flagged(published, text, "typo")


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_check_output_parses_when_harper_prints(tmp_path, fmt):
    doc = tmp_path / "notes.md"
    doc.write_text("\n\n".join(HARPER_PRINTS) + "\n\nThe the cat sat on teh mat.\n")
    run = subprocess.run(
        [VQ_LSP, "check", "--format", fmt, str(doc)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode in (0, 1), run.stderr
    report = json.loads(run.stdout)
    findings = report if fmt == "json" else report["runs"][0]["results"]
    assert findings, "the planted errors were not reported"
    assert "gerund_form" in run.stderr  # Harper's own print, moved to standard error
