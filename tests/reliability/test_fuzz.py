"""Hostile input: hypothesis writes malformed JSON-RPC straight into the server's stdin
(broken framing, non-JSON, wrong types, invalid URIs, ranges past the end, negative
positions, gigantic single lines, NUL bytes, lone surrogates). The server never crashes,
answers every request with a result or an error (id null where the id cannot be known), and
stays in sync: a sentinel request after each message is answered."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from .fuzzing import FuzzStats, check_case, messages, start_session
from .rawclient import RawClient, encode

EXAMPLES = int(os.environ.get("VQ_FUZZ_EXAMPLES", "500"))


@pytest.fixture(scope="module")
def server(reliability_model_dir):
    c = RawClient(args=["--model", str(reliability_model_dir)])
    start_session(c)
    yield c
    assert c.shutdown_and_exit() == 0, c.stderr_tail()


def test_hostile_messages(server):
    stats = FuzzStats()

    @settings(
        max_examples=EXAMPLES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(messages())
    def one(case):
        check_case(server, *case, stats)

    one()
    assert not server.undecodable, "the server wrote frames that are not JSON"
    assert not stats.internal, f"unexpected exceptions in handlers: {stats.internal[:3]}"
    assert stats.sent >= EXAMPLES and stats.requests_answered > 0 and stats.null_errors > 0
    print(
        f"\n{stats.sent} hostile messages: {stats.requests_answered} requests answered {stats.codes}, "
        f"{stats.null_errors} errors with id null, server alive"
    )


@pytest.mark.parametrize("declared", [64 * 2**20 + 1, 10**15])
def test_oversized_message_is_skipped_without_allocating_it(reliability_model_dir, declared):
    """A Content-Length over the limit: the body is read and dropped in chunks (memory stays
    flat), the client gets an error, and the stream is in sync after it. A declared length
    that never comes (10**15 bytes) crashed pygls' reader with MemoryError; here the server
    waits for the bytes and exits cleanly when the client closes."""
    c = RawClient(args=["--model", str(reliability_model_dir)])
    try:
        start_session(c)
        rss = c.rss_bytes()
        c.send_raw(b"Content-Length: %d\r\n\r\n" % declared)
        if declared < 10**9:
            chunk = b"x" * 2**20
            for _ in range(declared // len(chunk)):
                c.send_raw(chunk)
            c.send_raw(b"x" * (declared % len(chunk)))
            err = c.wait_for(lambda ms: next((m for m in ms if m.get("id", 0) is None and "error" in m), None))
            assert "larger than the limit" in err["error"]["message"]
            assert "result" in c.call("vqLsp/documentScores", {"uri": "file:///tmp/vq/fuzz-sentinel.txt"})
            assert c.rss_bytes() < rss + 32 * 2**20  # not buffered
            assert c.shutdown_and_exit() == 0
        else:
            c.send_raw(encode({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))  # part of the "body"
            c.close_input()
            assert c.wait_exit(30) == 1 and "MemoryError" not in c.stderr_tail(100_000)
    finally:
        c.kill()


def test_lifecycle_misuse_gets_the_errors_lsp_prescribes(reliability_model_dir):
    """Requests before initialize, a second initialize, a notification sent with an id, and
    requests after shutdown: each answered with an error, nothing processed, exit code 0."""
    c = RawClient(args=["--model", str(reliability_model_dir)])
    try:
        early = c.call("vqLsp/documentScores", {"uri": "file:///tmp/vq/early.txt"})
        assert early["error"]["code"] == -32002
        c.open("file:///tmp/vq/early.txt", "Dropped: sent before initialize.")
        start_session(c)
        again = c.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        assert again["error"]["code"] == -32600 and "already" in again["error"]["message"]
        assert c.call("vqLsp/documentScores", {"uri": "file:///tmp/vq/early.txt"})["error"]["code"] == -32602
        odd = c.call("textDocument/didClose", {"textDocument": {"uri": "file:///tmp/vq/fuzz.txt"}})
        assert odd["error"]["code"] == -32600 and "notification" in odd["error"]["message"]
        assert "result" in c.call("vqLsp/documentScores", {"uri": "file:///tmp/vq/fuzz.txt"})  # not closed
        assert c.call("shutdown")["result"] is None
        assert (
            c.call(
                "textDocument/hover",
                {"textDocument": {"uri": "file:///tmp/vq/fuzz.txt"}, "position": {"line": 0, "character": 0}},
            )["error"]["code"]
            == -32600
        )
        c.notify("exit")
        assert c.wait_exit(30) == 0
    finally:
        c.kill()
