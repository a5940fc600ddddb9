"""The hostile storm with the server's defaults: 300 unwelcome messages (malformed frames,
didChange with bad ranges and out-of-range versions, hovers on bad URIs) around a dozen opens of
a long document, then one hover on a small open Markdown document.

Unlike the storm of big opens (big_opens.py), the long documents fit the memory budget here
(float32, `memoryBudgetMb` 1024), so they are built. With a FIFO build lock the final hover
waited 44-78 s for every queued build and then answered `null`. What is checked:
- the hover is answered within HOVER_LIMIT_S, with the small document's scores when it is in
  sync and a message saying its hints are paused when the storm's first message (a malformed
  didChange) put it out of sync;
- no traceback in the server's log;
- the server is idle (under IDLE_CPU_SHARE of one core) within IDLE_LIMIT_S after the storm.
  The long documents are opened six texts at a time under twelve opens (each URI twice, each text
  under several URIs): a state alive with the same tokens is reused instead of rebuilt.

Used by tests/reliability/test_hostile_storm.py (the small model, shorter documents) and by hand
at full size with the bundled model:

    VQ_LSP_DATA=... OMP_NUM_THREADS=1 python -m tests.reliability.hostile_storm [--words 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.typing_replay import process_cpu_seconds as cpu_seconds

from .rawclient import RawClient, change_params, frame

SMALL = "file:///tmp/vq/storm-note.md"
SMALL_TEXT = "# Notes\n\nA short, happy note about a lovely film. The actors were wonderful.\n"
HOVER_LIMIT_S = 2.0
IDLE_LIMIT_S = 20.0
IDLE_WINDOW_S = 2.0
IDLE_CPU_SHARE = 0.05  # of one core, over IDLE_WINDOW_S


@dataclass
class StormResult:
    messages: int = 0
    opens: int = 0
    hover_seconds: float = 0.0
    hover_text: str = ""
    idle_after_s: float = float("inf")  # from the storm's last message until a quiet window began
    cpu_after_storm: float = 0.0  # server CPU seconds from the storm's end until idle
    last_build_end_s: float = 0.0  # when (after the storm) the last long build reported its end, within a second
    tracebacks: int = 0
    warnings: int = 0  # log lines at WARNING
    log_lines: int = 0
    cpu_windows: list[float] = field(default_factory=list)  # CPU seconds per second after the storm
    long_uris: list[str] = field(default_factory=list)
    in_sync: bool = False  # the small document was left in sync (else a malformed change paused it)

    def problems(self) -> list[str]:
        """What missed the targets (empty: all met)."""
        out = []
        want = "document:" if self.in_sync else "paused"
        if want not in self.hover_text:
            out.append(f"the final hover does not say {want!r}: {self.hover_text!r}")
        if self.hover_seconds > HOVER_LIMIT_S:
            out.append(f"the final hover took {self.hover_seconds:.2f} s")
        if self.tracebacks:
            out.append(f"{self.tracebacks} tracebacks in the log")
        if self.idle_after_s > IDLE_LIMIT_S:
            out.append(f"not idle within {IDLE_LIMIT_S:.0f} s after the storm; CPU-s per second: {self.cpu_windows}")
        return out


def long_texts(words: int, data_dir: Path | None) -> list[str]:
    """`"word " * words` and, when the data is there, as many words of a Gutenberg book."""
    texts = ["word " * words]
    if data_dir is not None:
        from benchmarks.writer_scenario import books

        _, text = books(data_dir, 1, low=words, high=10**9)[0]
        texts.append(" ".join(text.split(" ")[:words]))
    return texts


def _hostile(rng: random.Random, n: int, big_uris: list[str]) -> bytes:
    """One unwelcome message (bad frames, bad ranges, bad versions, bad URIs, bad positions)."""
    uri = rng.choice(big_uris) if big_uris else SMALL
    kind = n % 7
    if kind == 0:
        return frame(b"{not json" + bytes([rng.randrange(256)]))
    if kind == 1:  # a range far past the end
        body = {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": change_params(uri, 10_000 + n, "x", (10**6, 0), (10**6, 5)),
        }
    elif kind == 2:  # a version outside LSP's integers
        body = {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": change_params(uri, 2**40 + n, "a", (0, 0), (0, 0)),
        }
    elif kind == 3:  # hovers on bad URIs
        bad = rng.choice(
            ["not a uri", "file:///nowhere/never-opened.md", "", "http://x/%zz", "file:///tmp/vq/\u0000.md"]
        )
        body = {
            "jsonrpc": "2.0",
            "id": f"hover-{n}",
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": bad}, "position": {"line": 0, "character": 0}},
        }
    elif kind == 4:  # a negative position
        body = {
            "jsonrpc": "2.0",
            "id": f"neg-{n}",
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": -1, "character": -5}},
        }
    elif kind == 5:  # a header without a usable length, then a well-formed message
        return b"Content-Length: nope\r\n\r\n" + frame(json.dumps({"jsonrpc": "2.0", "method": "$/noop", "params": {}}))
    else:  # wrong types
        body = {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": {"textDocument": 7, "contentChanges": "x"},
        }
    return frame(json.dumps(body))


def hostile_storm(
    c: RawClient,
    texts: list[str],
    messages: int = 300,
    opens: int = 12,
    small_in_sync: bool = False,
    seed: int = 0,
    timeout: float = 120.0,
    wait_s: float = IDLE_LIMIT_S,
) -> StormResult:
    """Send the storm to an initialized server, time the final hover on the small document,
    then wait for the server to go idle; `problems()` says what missed the targets above."""
    rng = random.Random(seed)
    out = StormResult(messages=messages, opens=opens)
    c.open(SMALL, SMALL_TEXT, language="markdown")
    c.diagnostics(SMALL, 1, timeout)
    uris = [f"file:///tmp/vq/storm-long-{i}.md" for i in range(max(1, opens // 2))]
    every = max(1, messages // max(1, opens))
    opened = 0
    for n in range(messages - 1):
        if n == 0 and not small_in_sync:  # a malformed change of the small document: its text is in doubt
            c.send(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didChange",
                    "params": {"textDocument": {"uri": SMALL, "version": 2}, "contentChanges": "oops"},
                }
            )
        elif n % every == 1 and opened < opens:
            uri = uris[opened % len(uris)]
            c.open(uri, texts[opened % len(texts)], version=opened, language="markdown")
            opened += 1
        else:
            c.send_raw(_hostile(rng, n, uris[: max(1, min(opened, len(uris)))] if opened else []))
    out.opens, out.long_uris = opened, uris
    t0 = time.perf_counter()
    res = c.call(
        "textDocument/hover", {"textDocument": {"uri": SMALL}, "position": {"line": 2, "character": 3}}, timeout
    )
    out.hover_seconds = time.perf_counter() - t0
    storm_end, cpu0 = time.monotonic(), cpu_seconds(c.proc.pid)
    out.hover_text = ((res.get("result") or {}).get("contents") or {}).get("value", "")
    prev, builds_ended, last_build_end = cpu0, 0, storm_end
    while time.monotonic() - storm_end < wait_s + IDLE_WINDOW_S:
        time.sleep(1.0)
        now = cpu_seconds(c.proc.pid)
        out.cpu_windows.append(now - prev)
        prev = now
        ended = sum(
            m["params"]["token"].startswith("vq-lsp/build/") and m["params"]["value"].get("kind") == "end"
            for m in c.notifications("$/progress")
        )
        if ended != builds_ended:
            builds_ended, last_build_end = ended, time.monotonic()
            out.last_build_end_s = last_build_end - storm_end
        window = out.cpu_windows[-int(IDLE_WINDOW_S) :]
        if len(window) == int(IDLE_WINDOW_S) and sum(window) <= IDLE_CPU_SHARE * IDLE_WINDOW_S:
            out.idle_after_s = time.monotonic() - storm_end - IDLE_WINDOW_S
            out.cpu_after_storm = now - cpu0
            break
    log = c.stderr_tail(10**9)
    out.tracebacks = log.count("Traceback")
    out.log_lines = log.count("\n")
    out.warnings = log.count("WARNING")
    out.in_sync = small_in_sync
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, default=20_000)
    ap.add_argument("--opens", type=int, default=12)
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--in-sync", action="store_true", help="no malformed change of the small document")
    ap.add_argument("--server", default="vq-lsp", help="the server command (split on spaces)")
    ap.add_argument("--wait", type=float, default=IDLE_LIMIT_S, help="how long to wait for the server to go idle")
    ap.add_argument("--log", type=Path, help="write the server's whole log (INFO) here")
    args = ap.parse_args(argv)
    data = os.environ.get("VQ_LSP_DATA")
    texts = long_texts(args.words, Path(data) if data else None)
    with tempfile.TemporaryDirectory(prefix="vq-storm-cache-") as cache:
        c = RawClient(command=[*args.server.split(), "--log-level", "INFO"], env={"VQ_LSP_CACHE_DIR": cache})
        try:
            c.initialize({})
            res = hostile_storm(c, texts, args.messages, args.opens, small_in_sync=args.in_sync, wait_s=args.wait)
            print(json.dumps(res.__dict__, indent=1))
            print("\n".join(res.problems()) or "all targets met")
            for uri in res.long_uris:  # where each long document stands (a request waits for a build under way)
                try:
                    answer = c.call("vqLsp/documentScores", {"uri": uri}, timeout=5.0)
                    state = "scores" if "result" in answer else answer.get("error", {}).get("message", "")[:100]
                except TimeoutError:
                    state = "still building"
                print(f"{uri}: {state}")
        finally:
            c.kill()
            if args.log:
                args.log.write_bytes(bytes(c.stderr))


if __name__ == "__main__":
    main()
