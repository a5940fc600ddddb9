"""The document you are in comes first, end to end over stdio and by order of events (never by
wall time): a hover on a small document whose state was dropped is answered before the long
documents queued before it are built; a document closed while its build waits is never built;
a hover on a paused (out of sync) document answers at once and says why; an out-of-range
version is rejected at the door with one warning line, never a traceback."""

from __future__ import annotations

import pytest

import inference
from tests.documents.server_path import ServerPath
from tests.reliability.rawclient import RawClient
from vq_lsp.documents.events import Opened

PARA = "This paragraph talks about a film that many people liked a lot. " * 6
BIG = "\n\n".join([PARA] * 80)  # about 22 windows of 256 tokens
SMALL = "file:///tmp/vq/first-small.txt"
SMALL_TEXT = "A short note about a lovely film.\n"


def big_uri(i: int) -> str:
    return f"file:///tmp/vq/first-big-{i}.txt"


def big_text(i: int) -> str:
    return BIG.replace("film", f"film{i}", 1)


def hover(c: RawClient, uri: str) -> dict:
    return c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 3}})


def published(c: RawClient, uri: str) -> list[dict]:
    return [m["params"] for m in c.notifications("textDocument/publishDiagnostics") if m["params"]["uri"] == uri]


def builds_begun(c: RawClient) -> list[str]:
    """The messages of every build $/progress begun ("<uri>: N windows")."""
    return [
        m["params"]["value"].get("message", "")
        for m in c.notifications("$/progress")
        if m["params"]["value"].get("kind") == "begin" and "building" in m["params"]["value"].get("title", "")
    ]


def wait_build_begun(c: RawClient, uri: str) -> None:
    c.wait_for(lambda ms: any(msg.startswith(uri) for msg in builds_begun(c)), what=f"the build of {uri}")


@pytest.fixture()
def server(model_dir, tmp_path):
    c = RawClient(env={"VQ_LSP_CACHE_DIR": str(tmp_path / "cache")})
    yield c
    c.kill()


def test_a_hover_on_a_dropped_small_document_overtakes_queued_builds(server, model_dir, gpt2):
    path = ServerPath.with_model(model_dir, device=None, snapshots=False)  # the server's model, as it loads it
    docs = path.docs
    big = inference.estimate_state_bytes(docs.model, gpt2.encode(big_text(0)))
    path.process(SMALL, [Opened(1, "plaintext", SMALL_TEXT)])
    small = docs.states[SMALL].bytes()
    path.close()
    budget_mb = (big + 0.5 * small) / 2**20  # one long document fits, not with the note beside it
    c = server
    c.initialize({"modelPath": str(model_dir), "memoryBudgetMb": budget_mb, "snapshots": False})
    c.open(SMALL, SMALL_TEXT)
    c.diagnostics(SMALL, 1)
    for i in range(3):
        c.open(big_uri(i), big_text(i))
    first = c.wait_for(lambda ms: next((m for m in builds_begun(c)), None), what="a long build")
    res = hover(c, SMALL)
    assert "document:" in res["result"]["contents"]["value"]
    done = [u for u in map(big_uri, range(3)) if published(c, u)]
    assert not done, f"the hover waited for the builds of {done} (the first began: {first})"
    scores = c.call("vqLsp/documentScores", {"uri": SMALL})["result"]
    assert scores["evictions"] >= 1, "the premise: the small document's state had been dropped"
    for i in range(3):
        c.diagnostics(big_uri(i), 1)  # every long document still gets its hints
    assert c.shutdown_and_exit() == 0


def test_a_document_closed_while_its_build_waits_is_never_built(server, model_dir):
    c = server
    c.initialize({"modelPath": str(model_dir), "snapshots": False})
    for i in range(3):
        c.open(big_uri(i), big_text(i))
    c.notify("textDocument/didClose", {"textDocument": {"uri": big_uri(1)}})
    c.wait_for(
        lambda ms: any(p.get("version") is None and p["diagnostics"] == [] for p in published(c, big_uri(1))),
        what="the close of the second document",
    )
    for i in (0, 2):
        c.diagnostics(big_uri(i), 1)
    assert not any(msg.startswith(big_uri(1)) for msg in builds_begun(c))
    assert not [p for p in published(c, big_uri(1)) if p["diagnostics"]]
    assert c.shutdown_and_exit() == 0


def test_a_hover_on_a_paused_document_answers_at_once_and_says_why(server, model_dir):
    c = server
    c.initialize({"modelPath": str(model_dir), "snapshots": False})
    c.open(SMALL, SMALL_TEXT)
    c.diagnostics(SMALL, 1)
    c.insert(SMALL, 2, "x", (10**6, 0))
    c.open(big_uri(0), big_text(0))
    wait_build_begun(c, big_uri(0))
    res = hover(c, SMALL)
    text = res["result"]["contents"]["value"]
    assert "paused" in text and "reopen" in text
    assert not published(c, big_uri(0)), "the hover waited for another document's build"
    quick = c.call(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": SMALL},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}},
            "context": {
                "diagnostics": [
                    {
                        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}},
                        "message": "typo",
                        "source": "vq-lsp",
                        "code": "typo",
                    }
                ]
            },
        },
    )
    assert quick.get("result") == []
    assert c.shutdown_and_exit() == 0
    assert "Traceback" not in c.stderr_tail(10**6)


def test_an_out_of_range_version_is_rejected_at_the_door(server, model_dir):
    c = server
    c.initialize({"modelPath": str(model_dir), "snapshots": False})
    c.open(SMALL, SMALL_TEXT)
    c.diagnostics(SMALL, 1)
    c.insert(SMALL, 2**40, "x")
    c.open("file:///tmp/vq/first-huge-version.txt", "Hello.", version=-(2**40))
    c.wait_for(
        lambda ms: any("rejected a change" in m["params"]["message"] for m in c.notifications("window/showMessage")),
        what="the rejected change",
    )
    res = hover(c, SMALL)
    assert "paused" in res["result"]["contents"]["value"]  # the lost change paused the document
    assert c.shutdown_and_exit() == 0
    log = c.stderr_tail(10**6)
    assert "Traceback" not in log and "should be in range" not in log
    rejected = [line for line in log.splitlines() if "not an LSP integer" in line]
    assert len(rejected) == 2, rejected  # one line each
    assert all(p.get("version") in (None, 1) for p in published(c, SMALL))
