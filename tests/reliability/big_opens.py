"""The storm of big opens: hostile messages mixed with opens of documents whose state alone is
over the memory budget, then requests on a small document. Shared by
tests/reliability/test_big_opens.py and benchmarks/reliability_summary.py.

Before the fix, such documents were built, evicted and rebuilt in turn (a settings change
rebuilt every evicted document, in order, on the one engine thread): a hover on a small
document went unanswered for minutes and the server burned CPU long after the storm. Now a
document over the whole budget is refused once with a message, a settings change rebuilds
nothing, and builds yield to requests window by window.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.typing_replay import process_cpu_seconds as cpu_seconds

from .rawclient import RawClient, change_params, frame
from .scenarios import expect

SMALL = "file:///tmp/vq/storm-small.txt"


@dataclass
class BigOpenResult:
    messages: int = 0
    big_opens: int = 0
    big_tokens: int = 0
    hover_seconds: list[float] = field(default_factory=list)  # small-document hovers right after the storm
    refused_messages: int = 0  # "more than the whole memory budget" messages
    idle_after_s: float = 0.0  # the quiet window starts this long after the storm
    idle_window_s: float = 0.0
    idle_cpu_seconds: float = 0.0  # server CPU seconds used in that window
    storm_cpu_seconds: float = 0.0  # from the first storm message to the first hover answer

    @property
    def hover_p50(self) -> float:
        return statistics.median(self.hover_seconds)


def _hostile(rng: random.Random, big_uris: list[str], n: int) -> bytes:
    """One of a varied set of unwelcome messages (edits, settings flips, bad JSON, bad ranges)."""
    uri = rng.choice(big_uris)
    kind = n % 6
    if kind == 0:  # a settings flip: used to rebuild every evicted document
        body = {
            "jsonrpc": "2.0",
            "method": "workspace/didChangeConfiguration",
            "params": {
                "settings": {
                    "vqLsp": {
                        "diagnostics": {
                            "sentimentThreshold": rng.choice([0.5, 0.75, 0.9]),
                            "surprise": rng.random() < 0.5,
                        }
                    }
                }
            },
        }
    elif kind == 1:  # a keystroke into a big document
        body = {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": change_params(uri, 1000 + n, rng.choice("ab "), (0, 0), (0, 0)),
        }
    elif kind == 2:  # a request about a big document (no state: an error, at once)
        body = {"jsonrpc": "2.0", "id": f"big-{n}", "method": "vqLsp/documentScores", "params": {"uri": uri}}
    elif kind == 3:
        return frame(b"{not json" + bytes([rng.randrange(256)]))
    elif kind == 4:  # a range far past the end
        body = {
            "jsonrpc": "2.0",
            "id": f"hover-{n}",
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": 10**9, "character": -1}},
        }
    else:
        body = {"jsonrpc": "2.0", "id": f"odd-{n}", "method": "vqLsp/unknown", "params": [1, None, "x"]}
    return frame(json.dumps(body))


def big_document(data_dir: Path, tokenizer, tokens: int) -> tuple[str, int]:
    """Real prose of at least `tokens` tokens (Rust book chapters, last revisions, joined)."""
    import gzip

    parts, n = [], 0
    with gzip.open(data_dir / "revisions" / "rust_book_chapters.jsonl.gz", "rt") as f:
        for line in f:
            parts.append(json.loads(line)["revisions"][-1]["text"])
            n = len(tokenizer.encode("\n\n".join(parts)))
            if n >= tokens:
                return "\n\n".join(parts), n
    raise AssertionError(f"the chapters hold only {n} tokens")


def big_open_storm(
    c: RawClient,
    small_text: str,
    big_text: str,
    big_tokens: int,
    messages: int = 300,
    big_opens: int = 12,
    hovers: int = 5,
    idle_after: float = 2.0,
    idle_window: float = 3.0,
    seed: int = 0,
    timeout: float = 60.0,
) -> BigOpenResult:
    """Send the storm to an initialized server, then time hovers on a small document and
    measure the server's CPU in a quiet window after it."""
    rng = random.Random(seed)
    out = BigOpenResult(messages=messages, big_opens=big_opens, big_tokens=big_tokens)
    c.open(SMALL, small_text)
    c.diagnostics(SMALL, 1, timeout)
    big_uris = [f"file:///tmp/vq/storm-big-{i}.txt" for i in range(big_opens)]
    every = max(1, messages // big_opens)
    cpu0 = cpu_seconds(c.proc.pid)
    opened = 0
    for n in range(messages):
        if n % every == 0 and opened < big_opens:
            c.open(big_uris[opened], big_text.replace("the", f"the{opened}", 1))
            opened += 1
        else:
            c.send_raw(_hostile(rng, big_uris[: max(1, opened)], n))
    for k in range(hovers):
        t0 = time.perf_counter()
        res = c.call(
            "textDocument/hover", {"textDocument": {"uri": SMALL}, "position": {"line": 0, "character": 1}}, timeout
        )
        out.hover_seconds.append(time.perf_counter() - t0)
        if k == 0:
            out.storm_cpu_seconds = cpu_seconds(c.proc.pid) - cpu0
        expect(
            "result" in res and res["result"] and "document:" in res["result"]["contents"]["value"],
            f"no hover on the small document after the storm: {res}",
        )
    last = c.call("vqLsp/documentScores", {"uri": SMALL}, timeout)  # everything queued before it is done
    expect("result" in last, f"documentScores on the small document failed: {last}")
    out.refused_messages = sum(
        "more than the whole memory budget" in m["params"]["message"] for m in c.notifications("window/showMessage")
    )
    expect(
        out.refused_messages == big_opens,
        f"{out.refused_messages} over-budget messages for {big_opens} opens (one each, never repeated)",
    )
    time.sleep(idle_after)
    out.idle_after_s, out.idle_window_s = idle_after, idle_window
    cpu1 = cpu_seconds(c.proc.pid)
    time.sleep(idle_window)
    out.idle_cpu_seconds = cpu_seconds(c.proc.pid) - cpu1
    expect(
        out.idle_cpu_seconds < 0.1 * idle_window,
        f"the server used {out.idle_cpu_seconds:.2f} CPU-s in {idle_window:.0f} s after the storm (not idle)",
    )
    return out
