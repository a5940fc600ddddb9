"""Fault scenarios against the real `vq-lsp` process over the raw stdio client, shared by
tests/reliability/test_faults.py and benchmarks/reliability_summary.py.

Each scenario starts its own server, injects its faults, checks that each one gets a clear
message, leaves no corrupted state (verify against a full pass, text hash) and ends in a
recovery or a clean exit, and returns how many faults it injected. Failures raise
ScenarioFailure (an AssertionError).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from vq_lsp.server.language_server import SETTLE_AFTER_S

from .rawclient import RawClient
from .scenarios import ScenarioFailure, expect, sha256

REPO = Path(__file__).resolve().parents[2]
EXIT_WITHIN_S = 15.0  # the server's own grace for a running engine job is 2 s; the rest is start-up slack
PROSE = (
    "The film was a delight from start to finish, and the cast was wonderful.\n\n"
    "I hated the ending, though; it dragged on and on.\n"
)


def faulty_server(spec: str, args: list[str] | None = None) -> RawClient:
    """The real server with an injected fault (faulty_server.py)."""
    return RawClient(
        command=[sys.executable, "-m", "tests.reliability.faulty_server", *(args or [])],
        env={"VQ_FAULT": spec, "PYTHONPATH": str(REPO)},
    )


@contextlib.contextmanager
def faulty_session(spec: str, model_dir: Path, uri: str, text: str = PROSE) -> Iterator[RawClient]:
    """The server with the fault `spec` over `model_dir`, initialized, with `text` open under `uri` and
    its first hints in; killed at the end whatever happened."""
    with faulty_server(spec, ["--model", str(model_dir)]) as c:
        c.initialize()
        c.open(uri, text)
        c.diagnostics(uri, 1)
        yield c


def messages(c: RawClient, text: str) -> list[dict]:
    return [m["params"] for m in c.notifications("window/showMessage") if text in m["params"]["message"]]


def message(c: RawClient, text: str, timeout: float = 60.0) -> dict:
    return c.wait_for(
        lambda ms: next(
            (m["params"] for m in ms if m.get("method") == "window/showMessage" and text in m["params"]["message"]),
            None,
        ),
        timeout,
        f"a message with {text!r}",
    )


def progress_ends(c: RawClient) -> list[dict]:
    return [m["params"]["value"] for m in c.notifications("$/progress") if m["params"]["value"].get("kind") == "end"]


def check_state(c: RawClient, uri: str, text: str, version: int) -> dict:
    """The document's state verifies against a full pass and the server holds the editor's text."""
    res = c.call("workspace/executeCommand", {"command": "vqLsp.verify", "arguments": [uri]})
    expect("result" in res, f"verify failed: {res}")
    v = res["result"]
    expect(v["version"] == version, f"verify answered for version {v['version']}, not {version}")
    expect(v["textSha256"] == sha256(text), "the server's text differs from the editor's")
    expect(v["codesEqual"] and v["tokensMatchText"] and not v["rebuilt"], f"the state is corrupt: {v}")
    return v


def type_text(c: RawClient, uri: str, text: str, typed: str, version: int, wait: bool = True) -> tuple[str, int]:
    """Type `typed` at the end of the document's first line, a didChange per character."""
    at = text.index("\n")
    for ch in typed:
        version += 1
        c.insert(uri, version, ch, (0, at))
        text = text[:at] + ch + text[at:]
        at += 1
        if wait:
            c.diagnostics(uri, version)
    return text, version


def finish(c: RawClient) -> None:
    code = c.shutdown_and_exit(EXIT_WITHIN_S)
    expect(code == 0, f"exit code {code} after shutdown and exit")


# ----------------------------------------------------------------- model folders
def damaged_copy(model_dir: Path, where: Path, kind: str) -> Path:
    """missing: no folder; truncated: weights cut short; shapes: config promises other shapes."""
    if kind == "missing":
        return where / "no-such-model"
    folder = where / kind
    shutil.copytree(model_dir, folder)
    if kind == "truncated":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:5000])
    elif kind == "shapes":
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, "ffn_dim": cfg["ffn_dim"] * 2}))
    return folder


EXPECTED_REASON = {"missing": "model folder not found", "truncated": "corrupt or truncated", "shapes": "fc1.weight"}


def bad_model_folders(model_dir: Path, tmp: Path) -> int:
    """Start with a missing model folder, recover, then switch to a truncated one and one with
    mismatched shapes, recovering each time: a clear error, no hints (not wrong ones) while
    there is no model, requests answered with the reason, then exact hints again."""
    with RawClient(args=["--model", str(damaged_copy(model_dir, tmp, "missing"))]) as c:
        c.initialize({"diagnostics": {"sentimentThreshold": 0.0}})  # with a model, every paragraph gets a hint
        uri, version, text = "file:///tmp/vq/no-model.txt", 1, PROSE
        c.open(uri, text)
        for kind in ["missing", "truncated", "shapes"]:
            if kind != "missing":
                c.notify(
                    "workspace/didChangeConfiguration",
                    {"settings": {"vqLsp": {"modelPath": str(damaged_copy(model_dir, tmp, kind))}}},
                )
            msg = message(c, EXPECTED_REASON[kind])
            expect(msg["type"] == 1 and "cannot load the model" in msg["message"], f"unclear error: {msg}")
            text, version = type_text(c, uri, text, " Yes.", version, wait=False)
            expect(c.diagnostics(uri, version)["diagnostics"] == [], "hints without a model")
            got = c.call("vqLsp/documentScores", {"uri": uri})
            expect(
                "error" in got and "cannot load the model" in got["error"]["message"], f"scores without a model: {got}"
            )
            hover = c.call(
                "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}}
            )
            expect(hover.get("result", "missing") is None, f"hover without a model: {hover}")
            ends = len(progress_ends(c))

            def hints_published(ms):
                return [
                    m["params"]
                    for m in ms
                    if m.get("method") == "textDocument/publishDiagnostics"
                    and m["params"]["uri"] == uri
                    and m["params"]["diagnostics"]
                ]

            before = len(hints_published(c.messages))
            c.notify("workspace/didChangeConfiguration", {"settings": {"vqLsp": {"modelPath": str(model_dir)}}})
            c.wait_for(
                lambda ms, ends=ends: (
                    len(progress_ends(c)) > ends and "loaded" in progress_ends(c)[-1].get("message", "")
                ),
                what="the good model to load",
            )
            published = c.wait_for(lambda ms, before=before: hints_published(ms)[before:], what="hints after recovery")
            expect(published[-1]["version"] == version, "hints after recovery are not for the latest version")
            check_state(c, uri, text, version)
        finish(c)
        return 3


# ----------------------------------------------------------------- faults inside the server
def engine_fault_mid_update(model_dir: Path) -> int:
    """The engine raises in the middle of an incremental update (layer 2 of the 2nd edit): the
    document is rebuilt from its text, the user is told, typing goes on, the state is exact."""
    uri, text = "file:///tmp/vq/engine-fault.txt", PROSE
    with faulty_session("layer:5", model_dir, uri, text) as c:
        text, version = type_text(c, uri, text, " Truly a gem.", 1)
        msg = message(c, "could not update")
        expect("injected fault" in msg["message"] and "rebuilt" in msg["message"], f"unclear message: {msg}")
        scores = c.call("vqLsp/documentScores", {"uri": uri})["result"]
        expect(scores["rebuilds"] == 1 and scores["version"] == version, f"after the fault: {scores}")
        check_state(c, uri, text, version)
        finish(c)
        return 1


def handler_faults(model_dir: Path) -> int:
    """One server, three faults, each hit once. A full pass (opening the 2nd document) raises;
    building diagnostics raises after an engine update; a hover raises. The first two are
    reported, the state is rebuilt and hints are published for that version without another
    edit; the hover gets an error response and the next hover works."""
    first, second = "file:///tmp/vq/first.txt", "file:///tmp/vq/second.txt"
    with faulty_session("build:2,hints:3,hover:1", model_dir, first) as c:  # build 1, hints 1
        # another text: the same text would get a copy of the first document's state, not a build
        second_text = PROSE.replace("film", "play")
        c.open(second, second_text)  # build 2 fails; the retry: build 3, hints 2
        c.diagnostics(second, 1)
        msg = message(c, "internal error on " + second)
        expect("injected fault" in msg["message"] and "rebuilding" in msg["message"], f"unclear message: {msg}")
        text, version = type_text(c, first, PROSE, "!", 1, wait=False)  # hints 3 fails; the retry: hints 4
        c.diagnostics(first, version)
        msg = message(c, "internal error on " + first)
        expect("injected fault" in msg["message"], f"unclear message: {msg}")
        text, version = type_text(c, first, text, "?", version)
        where = {"textDocument": {"uri": first}, "position": {"line": 0, "character": 3}}
        failed = c.call("textDocument/hover", where)
        expect("error" in failed and "injected fault" in failed["error"]["message"], f"faulty hover: {failed}")
        worked = c.call("textDocument/hover", where)
        expect("document:" in worked["result"]["contents"]["value"], f"hover after the fault: {worked}")
        check_state(c, first, text, version)
        check_state(c, second, second_text, 1)
        finish(c)
        return 3


def repeating_fault(model_dir: Path) -> int:
    """Building diagnostics fails on every call from the 2nd on: reported once, retried once,
    then one message that hints resume when an edit succeeds, and no retry loop; requests still
    answer and the engine state stays exact."""
    uri, text = "file:///tmp/vq/hints-always.txt", PROSE
    with faulty_session("hints:2:0", model_dir, uri, text) as c:
        text, version = type_text(c, uri, text, "abc", 1, wait=False)
        message(c, "resume when an edit succeeds")
        got = c.call("vqLsp/documentScores", {"uri": uri})  # the engine side still works
        expect(got.get("result", {}).get("version") == version, f"scores while hints fail: {got}")
        time.sleep(1.0)  # a retry loop would show up as more messages by now
        errors = messages(c, "internal error on")
        expect(len(errors) == 2, f"{len(errors)} error messages for a repeating fault (want 2: the first, giving up)")
        check_state(c, uri, text, version)
        finish(c)
        return 1


def settle_fault(model_dir: Path) -> int:
    """Settling an idle document (a second after its last edit) raises on every try: the user is told,
    the state is rebuilt from its text, no settle loop follows, typing goes on and the state is exact."""
    uri, text = "file:///tmp/vq/settle-fault.txt", PROSE
    with faulty_session("settle:1:0", model_dir, uri, text) as c:
        text, version = type_text(c, uri, text, " Truly a gem.", 1)
        msg = message(c, "could not settle")
        expect("injected fault" in msg["message"] and "rebuilding" in msg["message"], f"unclear message: {msg}")
        time.sleep(SETTLE_AFTER_S + 1.0)  # a settle retried by itself would show up as more messages by now
        tries = messages(c, "could not settle")
        expect(len(tries) == 1, f"{len(tries)} messages for one failed settle (want 1)")
        scores = c.call("vqLsp/documentScores", {"uri": uri})["result"]
        expect(scores["rebuilds"] == 1 and scores["version"] == version, f"after the failed settle: {scores}")
        text, version = type_text(c, uri, text, "!", version)  # hints for the next edit
        check_state(c, uri, text, version)
        finish(c)
        return 1


# ----------------------------------------------------------------- the client goes away, the editor quits
def busy(c: RawClient, docs: list[str]) -> None:
    """Queue seconds of engine work: open long documents and type into them without waiting."""
    for i, text in enumerate(docs):
        c.open(f"file:///tmp/vq/busy-{i}.md", text, language="markdown")
    for v in range(2, 300):
        c.insert("file:///tmp/vq/busy-0.md", v, "x")


@contextlib.contextmanager
def busy_session(model_dir: Path, docs: list[str]) -> Iterator[RawClient]:
    """The server over `model_dir`, initialized, with seconds of work queued on `docs` (none when
    empty); killed at the end whatever happened."""
    with RawClient(args=["--model", str(model_dir)]) as c:
        c.initialize()
        if docs:
            busy(c, docs)
        yield c


def exits_cleanly(c: RawClient, code: int, what: str) -> float:
    """Wait for the exit; the code must be `code`, with no crash or traceback on the way out."""
    t0 = time.perf_counter()
    try:
        got = c.wait_exit(EXIT_WITHIN_S)
    except Exception:
        raise ScenarioFailure(f"{what}: the server did not exit within {EXIT_WITHIN_S} s") from None
    err = c.stderr_tail(100_000)
    expect(got == code, f"{what}: exit code {got}, expected {code}; stderr: {err[-1500:]}")
    expect("Fatal Python error" not in err and "Traceback" not in err, f"{what}: a crash on the way out: {err[-2000:]}")
    return time.perf_counter() - t0


def client_dies(model_dir: Path, docs: list[str]) -> int:
    """The client dies in the middle of a message, idle and with work queued; then one that
    vanishes entirely (both pipes closed) while work is queued. Each time: exit code 1 (no
    shutdown came), promptly, no traceback."""
    for with_work in (False, True):
        with busy_session(model_dir, docs if with_work else []) as c:
            c.send_raw(b'Content-Length: 400\r\n\r\n{"jsonrpc": "2.0", "id": 7, "method": "textDocument/ho')
            c.close_input()
            exits_cleanly(c, 1, f"client died mid-message ({'busy' if with_work else 'idle'})")
    with busy_session(model_dir, docs) as c:
        c.close_input()
        c.proc.stdout.close()
        exits_cleanly(c, 1, "client vanished")
        return 3


def shutdown_and_exit_with_work_pending(model_dir: Path, docs: list[str]) -> int:
    """shutdown while seconds of work are queued: answered promptly, later requests get an
    error, exit then ends the process with code 0. exit without shutdown (work queued): code 1."""
    with busy_session(model_dir, docs) as c:
        t0 = time.perf_counter()
        res = c.call("shutdown", None, timeout=EXIT_WITHIN_S)
        expect("result" in res and res["result"] is None, f"shutdown answered {res}")
        expect(time.perf_counter() - t0 < EXIT_WITHIN_S, "shutdown waited for the queued work")
        after = c.call("vqLsp/documentScores", {"uri": "file:///tmp/vq/busy-0.md"})
        expect(after.get("error", {}).get("code") == -32600, f"a request after shutdown got {after}")
        c.notify("exit")
        exits_cleanly(c, 0, "shutdown then exit with work pending")
    with busy_session(model_dir, docs) as c:
        c.notify("exit")
        exits_cleanly(c, 1, "exit without shutdown with work pending")
        return 2
