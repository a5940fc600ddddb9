"""Hostile input for the raw stdio client: hypothesis strategies for malformed JSON-RPC, and
the check that the server survives each message and answers every request it can identify.

A case is (bytes, expected): the bytes go to the server's stdin as they are; `expected` is
  ("id", X)  a request whose id X (int or str) must get a response (result or error),
  ("null",)  a message whose id cannot be known (not JSON, not an object, a bad id, a broken
             frame) and must get an error response with id null,
  ("none",)  a notification or a response: no answer is due, but the server must live on.
After each case a sentinel request goes out and must be answered, which also proves that the
stream is still in sync. Shared by tests/reliability/test_fuzz.py and the summary benchmark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import strategies as st

from .rawclient import RawClient, encode, frame
from .scenarios import expect

DOC = "file:///tmp/vq/fuzz.txt"  # opened by the fuzz session; cases may edit or break it
SENTINEL = "file:///tmp/vq/fuzz-sentinel.txt"  # only the sentinel request touches it
METHODS = [
    "textDocument/hover",
    "textDocument/codeLens",
    "vqLsp/documentScores",
    "workspace/executeCommand",
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "initialize",
    "workspace/didChangeConfiguration",
    "$/cancelRequest",
    "$/setTrace",
    "vqLsp/unknown",
    "",
    "textDocument/",
]
URIS = [
    DOC,
    "",
    "not a uri",
    "file://",
    "file:///tmp/vq/%zz",
    "::",
    "file:///tmp/vq/\u0000nul.txt",
    "file:///tmp/vq/\ud800.txt",
    "file:///" + "x" * 5000,
    "untitled:Untitled-1",
    "file:///tmp/vq/é 😀.md",
]
NUMBERS = st.one_of(
    st.integers(-(2**40), 2**40),
    st.sampled_from([-1, 0, 2**31, 2**53 + 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
)
TEXTS = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["\x00", "a\x00b", "\ud800", "\udfff x", "😀", "\r\n\r"]),
    st.builds(lambda ch, n: ch * n, st.sampled_from(["a", " ", "é", "😀", "\n", "ab "]), st.integers(10_000, 300_000)),
)  # gigantic single lines (and a few long ones)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def positions(draw):
    return {"line": draw(st.one_of(NUMBERS, JSON)), "character": draw(st.one_of(NUMBERS, JSON))}


@st.composite
def params(draw, method: str):
    """Params near the method's real shape, with wrong types, bad URIs and out-of-range values."""
    uri = draw(st.one_of(st.sampled_from(URIS), JSON))
    doc = draw(st.sampled_from([{"uri": uri}, {"uri": uri, "version": draw(NUMBERS)}, uri, None]))
    rng = {"start": draw(positions()), "end": draw(positions())}
    shapes = {
        "textDocument/hover": {"textDocument": doc, "position": draw(positions())},
        "textDocument/codeLens": {"textDocument": doc},
        "vqLsp/documentScores": draw(st.sampled_from([{"uri": uri}, {"textDocument": doc}, [uri], uri])),
        "workspace/executeCommand": {
            "command": draw(st.sampled_from(["vqLsp.verify", "nope", 5])),
            "arguments": draw(st.lists(JSON, max_size=3)),
        },
        "textDocument/didOpen": {
            "textDocument": {
                "uri": uri,
                "languageId": draw(st.sampled_from(["plaintext", 7, None])),
                "version": draw(NUMBERS),
                "text": draw(TEXTS),
            }
        },
        "textDocument/didChange": {
            "textDocument": doc,
            "contentChanges": draw(
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries({"range": st.just(rng), "text": TEXTS}),
                        st.fixed_dictionaries({"text": TEXTS}),
                        JSON,
                    ),
                    max_size=3,
                )
            ),
        },
        "textDocument/didClose": {"textDocument": doc},
    }
    return shapes.get(method, {})


@st.composite
def messages(draw) -> tuple[bytes, tuple]:
    """One hostile message and what the server owes for it."""
    kind = draw(st.sampled_from(["structured", "structured", "structured", "raw body", "framing"]))
    if kind == "raw body":  # not JSON-RPC at all: bytes, invalid UTF-8, raw surrogates, JSON non-objects
        body = draw(
            st.one_of(
                st.binary(max_size=300),
                st.sampled_from(
                    [
                        b"{",
                        b"[1, 2]",
                        b'"text"',
                        b"null",
                        b"\xed\xa0\x80",
                        b'{"jsonrpc": "2.0", "id": 1, "method": "x\xff"}',
                        b"[" * 100_000,
                        b"\x00" * 50,
                        b"{}",
                    ]
                ),
                st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass")),
            )
        )
        return frame(body), _expected_for_body(body)
    if kind == "framing":  # broken headers; each case resynchronises by itself (see below)
        case = draw(
            st.sampled_from(
                [
                    "no length",
                    "bad length",
                    "negative",
                    "garbage line",
                    "glued",
                    "short body",
                    "lowercase",
                    "bare newlines",
                ]
            )
        )
        good = {
            "jsonrpc": "2.0",
            "id": draw(st.integers(1, 10**6)),
            "method": "vqLsp/documentScores",
            "params": {"uri": SENTINEL},
        }
        body = json.dumps(good).encode()
        if case == "no length":  # headers without Content-Length: nothing to read; dropped
            return b"Content-Type: application/json\r\n\r\n", ("none",)
        if case == "bad length":
            return b"Content-Length: abc\r\n\r\n", ("null",)
        if case == "negative":
            return b"Content-Length: -5\r\n\r\n", ("null",)
        if case == "garbage line":  # a stray line before a good frame's headers: ignored
            return b"hello there\r\n" + encode(good), ("id", good["id"])
        if case == "glued":  # a good frame right after junk without a newline: found again
            return b'{"junk": true}' + encode(good), ("id", good["id"])
        if case == "short body":  # Content-Length shorter than the body: a parse error, then resync
            return b"Content-Length: %d\r\n\r\n" % (len(body) // 2) + body + b"\r\n", ("null",)
        if case == "lowercase":  # header names are case-insensitive
            return b"content-length: %d\r\n\r\n" % len(body) + body, ("id", good["id"])
        return b"Content-Length: %d\n\n" % len(body) + body, ("id", good["id"])  # bare newlines
    # mostly near-valid requests for real methods, with every envelope field sometimes broken
    roll = lambda: draw(st.integers(0, 99))  # noqa: E731  (a weighted choice that shrinks well)
    msg = {"jsonrpc": "2.0" if roll() < 90 else draw(st.sampled_from(["1.0", 2, None, ""]))}
    r = roll()
    method = draw(st.sampled_from(METHODS)) if r < 80 else draw(JSON) if r < 90 else None
    if r < 90:
        msg["method"] = method
    r = roll()
    has_id = r < 85
    if has_id:
        msg["id"] = draw(st.integers(1, 10**9)) if r < 60 else draw(st.text(max_size=20)) if r < 75 else draw(JSON)
    r = roll()
    if r < 95:
        msg["params"] = draw(params(method if isinstance(method, str) else "")) if r < 75 else draw(JSON)
    if msg.get("method") in ("shutdown", "exit") or (
        not has_id and msg.get("method") in ("initialize", "workspace/didChangeConfiguration")
    ):
        msg["method"] = "textDocument/didChange"  # these would end or reconfigure the session
    body = json.dumps(msg).encode()
    return frame(body), _expected_for_body(body)


def _expected_for_body(body: bytes) -> tuple:
    """What JSON-RPC 2.0 requires in answer to one framed body."""
    try:
        msg = json.loads(body)
    except (ValueError, RecursionError):
        return ("null",)  # parse error
    if not isinstance(msg, dict):
        return ("null",)  # invalid request
    if "id" not in msg:
        return ("null",) if "method" not in msg else ("none",)  # nothing at all / a notification
    msg_id = msg["id"]
    if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
        return ("null",)  # an id that cannot be echoed
    if "method" not in msg and msg.get("jsonrpc") == "2.0":
        return ("none",)  # a response to a request the server never sent
    return ("id", msg_id)


@dataclass
class FuzzStats:
    sent: int = 0
    requests_answered: int = 0
    null_errors: int = 0
    codes: dict = field(default_factory=dict)  # error code (or "result") -> count, for the answered requests
    internal: list = field(default_factory=list)  # messages of internal errors (-32603): unexpected exceptions


def start_session(c: RawClient) -> None:
    c.initialize({"diagnostics": {"sentimentThreshold": 0.0}})
    c.open(DOC, "The film was fine.\n\nThe ending was not.\n")
    c.open(SENTINEL, "A sentinel paragraph.\n")
    c.diagnostics(SENTINEL, 1)


def check_case(c: RawClient, data: bytes, expected: tuple, stats: FuzzStats, timeout: float = 60.0) -> None:
    """Send one hostile message, then a sentinel request; the server must answer what it owes."""
    before = len(c.messages)  # cases reuse ids: only answers that came after this count
    c.send_raw(data)
    sentinel = c.response(
        c.request("vqLsp/documentScores", {"uri": SENTINEL}, f"sentinel-{stats.sent}"), timeout, before
    )
    expect("result" in sentinel, f"the sentinel failed after {data[:200]!r}: {sentinel}")
    expect(c.alive(), f"the server died on {data[:200]!r}")
    if expected[0] == "id":
        answer = c.response(expected[1], timeout, before)
        expect(
            "result" in answer or ("error" in answer and isinstance(answer["error"].get("code"), int)),
            f"a malformed answer to {data[:200]!r}: {answer}",
        )
        stats.requests_answered += 1
        code = "result" if "result" in answer else answer["error"]["code"]
        stats.codes[code] = stats.codes.get(code, 0) + 1
        if code == -32603:
            stats.internal.append((data[:300], answer["error"]["message"][:300]))
    elif expected[0] == "null":
        got = [m for m in c.messages[before:] if "id" in m and m["id"] is None and "error" in m]
        expect(len(got) >= 1, f"no error response (id null) to {data[:200]!r}")
        stats.null_errors += 1
    stats.sent += 1
