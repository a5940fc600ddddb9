"""Live typing: replay real keystroke sessions into the real `vq-lsp` and measure what a writer feels.

    python -m benchmarks.typing_replay --sessions=4 --speed 1 4 --engine incremental full

Each CoAuthor session ($VQ_LSP_DATA/typing/, format in $VQ_LSP_DATA/README.md) is a prompt
and a list of timed Quill deltas. --sessions are drawn at random (seeded); with --max-events N
each replays a window of N consecutive events (--start first, or at a seeded random event: the
events before it are applied offline and the document is opened with the text they left).
Every event that changes the text is sent as one `textDocument/didChange` (each Quill op an LSP
range edit in UTF-16 code units, applied in order) at the recorded pace divided by --speed.
Recorded gaps longer than --pause-cap seconds are cut to it before scaling: a writer's long
pauses (reading, thinking) only add time in which the server is idle once it has caught up; the
report counts the cut gaps that fell while the server was still behind, to show that they don't.

Per keystroke: latency from sending its didChange to the first publishDiagnostics whose
version is at least its own (the server coalesces, and does not publish a version that is
already superseded); staleness, how many versions behind the shown hints are at the moment the
writer presses the key (0: up to date); content staleness in ms, how long ago the oldest edit was
sent that the shown hints' content does not yet reflect (hints moved through newer edits state
the newest version; their `data.version` names the version whose state chose them); and every
published diagnostic is checked against the text of the version it states (a surprise hint must
cover the word it quotes, a tone hint a non-blank run inside one paragraph). Per session: server CPU time
(user + system of the server process, all threads, read from /proc/PID/stat: engine, hints, JSON and pygls all count)
from the first keystroke to the final diagnostics, divided by keystrokes and by engine updates
(`updates` of vqLsp/documentScores). At the end of each replay the server's state must verify
against a full pass (command vqLsp.verify: codes equal, tokens match its text, no rebuild), be at
the final version, and have the token count of the text the replay expects.

Every configuration (--engine incremental | full: the server's `fullRecompute` setting, the same
server recomputing every update from scratch; times --speed) runs in its own server process,
all started up front; each session is replayed in every configuration before the next one, so
background load on the machine falls on all of them alike. Writes STEM.md, STEM.json and
STEM_latency_cdf.png (--out STEM).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import os
import random
import re
import shlex
import shutil
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import REPO, data_dir, markdown_table, percentile, recorded_command

EMBED = "\ufffc"  # a Quill embed (an image) has length 1; the replay keeps a placeholder character there
DEFAULT_SESSIONS = "typing/coauthor_sessions.jsonl.gz"


# ----------------------------------------------------------------- Quill delta -> LSP changes
def utf16_units(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def advance(text: str, i: int, units: int) -> int:
    """The char index `units` UTF-16 code units after char index i (a non-BMP char is 2 units)."""
    j = i + units
    if j <= len(text) and utf16_units(text[i:j]) == units:  # no surrogate pairs on the way: the fast path
        return j
    j = i
    while units > 0:
        if j >= len(text):
            raise ValueError(f"a Quill op runs past the end of the text ({units} code units left)")
        units -= 2 if ord(text[j]) > 0xFFFF else 1
        j += 1
    if units < 0:
        raise ValueError(f"a Quill op splits the surrogate pair at char {j - 1}")
    return j


def lsp_position(text: str, i: int) -> dict:
    """LSP position of char index i: line (\\n, \\r\\n and \\r end a line) and UTF-16 column."""
    before = text[:i]
    if before.endswith("\r") and text[i : i + 1] == "\n":
        raise ValueError(f"char {i} lies inside a CRLF: no LSP position names it")
    line = before.count("\n") + before.count("\r") - before.count("\r\n")
    start = max(before.rfind("\n"), before.rfind("\r")) + 1
    return {"line": line, "character": utf16_units(before[start:])}


def delta_changes(text: str, ops: list[dict]) -> tuple[list[dict], str]:
    """LSP content changes for one Quill delta, in order (each applies to the text the previous
    one left), and the new text. Quill counts lengths in UTF-16 code units, as LSP does."""
    changes, i = [], 0  # i: char index of Quill's cursor in the text as edited so far
    for op in ops:
        if "retain" in op:
            i = advance(text, i, int(op["retain"]))
        elif "insert" in op:
            s = op["insert"] if isinstance(op["insert"], str) else EMBED
            pos = lsp_position(text, i)
            changes.append({"range": {"start": pos, "end": pos}, "text": s})
            text, i = text[:i] + s + text[i:], i + len(s)
        elif "delete" in op:
            j = advance(text, i, int(op["delete"]))
            changes.append({"range": {"start": lsp_position(text, i), "end": lsp_position(text, j)}, "text": ""})
            text = text[:i] + text[j:]
        else:
            raise ValueError(f"unknown Quill op {op!r}")
    return changes, text


def apply_delta(text: str, ops: list[dict]) -> str:
    """The Quill delta applied directly in UTF-16 code units (an oracle for the tests)."""
    units, out, i = text.encode("utf-16-le"), [], 0
    for op in ops:
        if "retain" in op:
            out.append(units[2 * i : 2 * (i + op["retain"])])
            i += op["retain"]
        elif "insert" in op:
            out.append((op["insert"] if isinstance(op["insert"], str) else EMBED).encode("utf-16-le"))
        elif "delete" in op:
            i += op["delete"]
    out.append(units[2 * i :])
    return b"".join(out).decode("utf-16-le")


# ----------------------------------------------------------------- sessions
@dataclass
class Keystroke:
    at: float  # seconds after the first replayed event at the recorded pace, gaps capped
    changes: list[dict]
    source: str  # "user" or "api" (an accepted model suggestion)
    capped: bool = False  # the recorded gap before this event was longer than the pause cap
    text: str = ""  # the text after this event (to check published ranges against)


@dataclass
class Replay:
    session: str
    first_event: int  # index of the first replayed event in the session
    open_text: str
    keystrokes: list[Keystroke]
    final_text: str
    skipped: int  # events that change no text (formatting only)


def load_sessions(path: Path, count: int, seed: int) -> list[dict]:
    """`count` sessions drawn at random (seeded) from a sessions file, in file order."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    if count >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), count))
    return [rows[i] for i in keep]


def prepare(row: dict, max_events: int = 0, start: str = "first", pause_cap: float = 2.0, seed: int = 0) -> Replay:
    """The replay of one session: events before the window are applied offline (the editor opens
    the document as it stood then); the window's events become keystrokes with capped gaps."""
    events = row["events"]
    n = len(events) if max_events <= 0 else min(max_events, len(events))
    first = 0 if start == "first" else random.Random(f"{seed}:{row['session']}").randrange(len(events) - n + 1)
    text = row["prompt"]
    for _, _, ops in events[:first]:
        text = delta_changes(text, ops)[1]
    open_text, keystrokes, skipped, at, last, capped = text, [], 0, 0.0, None, False
    for t_ms, source, ops in events[first : first + n]:
        if last is not None:
            gap = max(t_ms - last, 0) / 1000
            at += min(gap, pause_cap)
            capped = capped or gap > pause_cap
        last = t_ms
        changes, new = delta_changes(text, ops)
        if new == text:
            skipped += 1
            continue
        text = new
        keystrokes.append(Keystroke(at, changes, source, capped, text))
        capped = False
    return Replay(row["session"], first, open_text, keystrokes, text, skipped)


# ----------------------------------------------------------------- a minimal LSP client over stdio
def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """`vq-lsp` in a subprocess, spoken to in raw JSON-RPC so that the client adds little work
    (the machine's cores are shared with the server) and every message gets its arrival time."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.published: dict[str, list[tuple[float, int]]] = {}  # uri -> (arrival, version), in order
        self.shown: dict[str, int] = {}  # uri -> version of the newest diagnostics
        self.content: dict[str, int] = {}  # uri -> version whose engine state chose the newest diagnostics
        self.diagnostics: dict[str, list[tuple[int, list]]] = {}  # uri -> (version, diagnostics) per publish
        self.messages: list[tuple[int, str]] = []  # window/showMessage and logMessage (type, text)
        self.stderr: deque[str] = deque(maxlen=50)
        self._futures: dict[int, asyncio.Future] = {}
        self._ids = 0
        self._event = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    async def start(self, cmd: list[str], options: dict, timeout: float = 300.0) -> str:
        """Start, initialize, and wait until the model is loaded; returns the server's load message."""
        self.proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=2**26,
        )
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._drain_stderr())]
        caps = {
            "textDocument": {"publishDiagnostics": {"versionSupport": True}},
            "general": {"positionEncodings": ["utf-16"]},
        }
        await self.request(
            "initialize",
            {"processId": os.getpid(), "rootUri": None, "capabilities": caps, "initializationOptions": options},
            timeout,
        )
        self.notify("initialized", {})
        loaded = await self.wait(
            lambda: next((m for _, m in self.messages if "loaded" in m or "Hints are off" in m), None), timeout
        )
        if "Hints are off" in loaded:
            raise RuntimeError(loaded)
        return loaded

    async def stop(self) -> None:
        try:
            await self.request("shutdown", None, 30)
            self.notify("exit", None)
            await asyncio.wait_for(self.proc.wait(), 30)
        except (asyncio.TimeoutError, RuntimeError, ConnectionError):
            self.proc.kill()
            await self.proc.wait()
        for t in self._tasks:
            t.cancel()

    def _send(self, msg: dict) -> None:
        body = json.dumps(msg, ensure_ascii=False).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params, timeout: float = 600.0):
        self._ids += 1
        fut = self._futures[self._ids] = asyncio.get_running_loop().create_future()
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return await asyncio.wait_for(fut, timeout)

    async def wait(self, cond, timeout: float):
        """Wait until cond() returns something truthy (re-checked on every incoming message)."""
        deadline = time.monotonic() + timeout
        while not (result := cond()):
            if self.proc.returncode is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}): {' | '.join(self.stderr)}")
            self._event.clear()
            try:
                await asyncio.wait_for(self._event.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise TimeoutError("timed out waiting on the server") from None
        return result

    async def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while (line := await out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if line == b"" or length is None:
                self._event.set()
                return
            body = await out.readexactly(length)
            arrived = time.perf_counter()
            self._handle(json.loads(body), arrived)
            self._event.set()

    def _handle(self, msg: dict, arrived: float) -> None:
        method = msg.get("method")
        if method is None:  # a response
            fut = self._futures.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                if "error" in msg:
                    fut.set_exception(RuntimeError(f"LSP error: {msg['error']}"))
                else:
                    fut.set_result(msg.get("result"))
        elif method == "textDocument/publishDiagnostics":
            p = msg["params"]
            self.published.setdefault(p["uri"], []).append((arrived, p.get("version")))
            if p.get("version") is not None:  # a closed document's diagnostics are cleared without a version
                self.shown[p["uri"]] = p["version"]
                # hints moved through newer edits state the newest version; data.version says
                # which version's state chose them (no diagnostics: the stated version)
                chosen = [d["data"]["version"] for d in p["diagnostics"] if isinstance(d.get("data"), dict)]
                self.content[p["uri"]] = min(chosen, default=p["version"])
                self.diagnostics.setdefault(p["uri"], []).append((p["version"], p["diagnostics"]))
        elif method in ("window/showMessage", "window/logMessage"):
            self.messages.append((msg["params"]["type"], msg["params"]["message"]))
        elif "id" in msg:  # a request from the server: nothing to configure, nothing to register
            items = (msg.get("params") or {}).get("items")
            self._send({"jsonrpc": "2.0", "id": msg["id"], "result": [None] * len(items) if items else None})

    async def _drain_stderr(self) -> None:
        while line := await self.proc.stderr.readline():
            self.stderr.append(line.decode(errors="replace").rstrip())


def server_command(model: str | None, threads: int, server: str | None = None) -> list[str]:
    """The installed `vq-lsp serve` (or another command that speaks LSP over stdio, for variants)."""
    exe = Path(sys.executable).parent / "vq-lsp"
    found = str(exe) if exe.exists() else shutil.which("vq-lsp")
    # without an installed console script (a checkout on PYTHONPATH): the same command as a module
    base = shlex.split(server) if server else ([found] if found else [sys.executable, "-m", "vq_lsp"]) + ["serve"]
    return base + ["--threads", str(threads)] + (["--model", model] if model else [])


# ----------------------------------------------------------------- one session
@dataclass
class SessionResult:
    session: str
    engine: str
    speed: float
    first_event: int
    keystrokes: int
    api_events: int
    skipped: int
    tokens: int
    seconds: float  # wall time of the replay (first keystroke sent to final diagnostics)
    cpu_seconds: float  # server CPU over the same span
    updates: int  # engine updates the server ran (coalescing makes them fewer than keystrokes)
    rebuilds: int
    publishes: int
    verified: bool
    verify: dict
    last_cost: dict  # the server's cost record of its last update
    capped_gaps: int  # keystrokes after a gap cut to the pause cap
    capped_while_busy: int  # ... of which the server had not yet published hints for the one before
    latency_ms: list[float] = field(repr=False)
    staleness: list[int] = field(repr=False)
    lateness_ms: list[float] = field(repr=False)  # how late the client sent each keystroke
    staleness_ms: list[float] = field(repr=False)  # age of the oldest edit the shown hints' content lacks
    wrong_ranges: int = 0  # published diagnostics whose range misses their characters at the stated version
    checked_ranges: int = 0


async def replay(
    server: Server, rep: Replay, uri: str, speed: float, engine: str, expected_tokens: int, timeout: float = 600.0
) -> SessionResult:
    """Type one session into an initialized server; check the end state; close the document."""
    server.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1, "text": rep.open_text}},
    )
    await server.wait(lambda: server.shown.get(uri, 0) >= 1, timeout)
    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    sent, staleness, lateness, stale_ms = [], [], [], []
    for k, ks in enumerate(rep.keystrokes):
        version = k + 2
        target = t0 + ks.at / speed
        if (delay := target - time.perf_counter()) > 0:
            await asyncio.sleep(delay)
        now = time.perf_counter()
        staleness.append(version - 1 - server.shown[uri])
        content = server.content.get(uri, 1)
        stale_ms.append(0.0 if content >= version - 1 else (now - sent[content + 1 - 2]) * 1000)
        lateness.append((now - target) * 1000)
        server.notify(
            "textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": ks.changes}
        )
        sent.append(now)
    final = len(rep.keystrokes) + 1
    await server.wait(lambda: server.shown[uri] >= final, timeout)
    cpu1, t1 = server.cpu_seconds(), time.perf_counter()
    scores = await server.request("vqLsp/documentScores", {"uri": uri}, timeout)
    check = await server.request("workspace/executeCommand", {"command": "vqLsp.verify", "arguments": [uri]}, timeout)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    published = [(t, v) for t, v in server.published[uri] if v is not None and v >= 2]
    if any(b[1] < a[1] for a, b in itertools.pairwise(published)):
        raise AssertionError("diagnostics arrived out of version order")
    latency, j = [], 0
    for k, t_sent in enumerate(sent):
        while published[j][1] < k + 2:
            j += 1
        latency.append((published[j][0] - t_sent) * 1000)
    texts = {1: rep.open_text} | {k + 2: ks.text for k, ks in enumerate(rep.keystrokes)}
    wrong, checked = check_ranges(server.diagnostics.pop(uri, []), texts)
    verified = (
        check["codesEqual"]
        and check["tokensMatchText"]
        and not check["rebuilt"]
        and scores["version"] == final
        and scores["tokens"] == expected_tokens
    )
    return SessionResult(
        rep.session,
        engine,
        speed,
        rep.first_event,
        len(rep.keystrokes),
        sum(ks.source == "api" for ks in rep.keystrokes),
        rep.skipped,
        scores["tokens"],
        t1 - t0,
        cpu1 - cpu0,
        scores["updates"],
        scores["rebuilds"],
        len(published),
        verified,
        {k: check[k] for k in ("codesEqual", "tokensMatchText", "maxAbsDiff", "rebuilt")}
        | {"expectedTokens": expected_tokens, "version": scores["version"]},
        scores["cost"],
        sum(ks.capped for ks in rep.keystrokes),
        sum(ks.capped and s > 0 for ks, s in zip(rep.keystrokes, staleness)),
        latency,
        staleness,
        lateness,
        stale_ms,
        wrong,
        checked,
    )


def line_starts_of(text: str) -> list[int]:
    """Char index of every line's start (lines end at \\n, \\r\\n, \\r), written independently of
    the server's textsync."""
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]


def char_index(text: str, starts: list[int], line: int, units: int) -> int:
    """Char index of an LSP position (UTF-16 columns)."""
    return advance(text, starts[line], units)


def check_ranges(published: list[tuple[int, list]], texts: dict[int, str]) -> tuple[int, int]:
    """(wrong, checked): a surprise hint must cover the word it quotes, and a tone hint a
    non-blank run inside one paragraph, in the text of the version its publish states."""
    wrong = checked = 0
    for version, diagnostics in published:
        text = texts.get(version)
        if text is None:
            continue
        starts = line_starts_of(text)  # once per publish, not per diagnostic
        for d in diagnostics:
            r = d["range"]
            try:
                a = char_index(text, starts, r["start"]["line"], r["start"]["character"])
                b = char_index(text, starts, r["end"]["line"], r["end"]["character"])
            except (IndexError, ValueError):
                wrong += 1
                continue
            chars = text[a:b]
            if d.get("code") == "surprise":
                ok = d["message"].startswith(f"unexpected {chars!r}")
            else:
                ok = bool(chars.strip()) and not re.search(r"\n[ \t\r]*\n", chars)
            wrong += not ok
            checked += 1
    return wrong, checked


# ----------------------------------------------------------------- statistics and report
pct = percentile  # the benchmarks' one percentile function (nearest rank)


def summarize(results: list[SessionResult]) -> dict:
    lat = [x for r in results for x in r.latency_ms]
    stale = [x for r in results for x in r.staleness]
    keys = sum(r.keystrokes for r in results)
    cpu = sum(r.cpu_seconds for r in results)
    per_session = [1000 * r.cpu_seconds / r.keystrokes for r in results if r.keystrokes]
    return {
        "sessions": len(results),
        "keystrokes": keys,
        "verified": sum(r.verified for r in results),
        "latency_ms": {q: pct(lat, p) for q, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1))},
        "staleness_versions": {q: pct(stale, p) for q, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1))},
        "staleness_ms": {
            q: pct([x for r in results for x in r.staleness_ms], p)
            for q, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1))
        },
        "wrong_ranges": sum(r.wrong_ranges for r in results),
        "checked_ranges": sum(r.checked_ranges for r in results),
        "stale_share": sum(s > 0 for s in stale) / len(stale),
        "cpu_ms_per_keystroke": 1000 * cpu / keys,
        "cpu_ms_per_keystroke_sessions": {
            q: pct(per_session, p) for q, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
        },
        "cpu_ms_per_update": 1000 * cpu / max(1, sum(r.updates for r in results)),
        "updates_per_keystroke": sum(r.updates for r in results) / keys,
        "publishes_per_keystroke": sum(r.publishes for r in results) / keys,
        "server_busy_share": cpu / sum(r.seconds for r in results),
        "client_lateness_ms_p99": pct([x for r in results for x in r.lateness_ms], 0.99),
        "rebuilds": sum(r.rebuilds for r in results),
        "capped_gaps": sum(r.capped_gaps for r in results),
        "capped_while_busy": sum(r.capped_while_busy for r in results),
    }


def table(summary: dict[str, dict]) -> str:
    rows = []
    for name, s in summary.items():
        lat, st, cs, sm = (
            s["latency_ms"],
            s["staleness_versions"],
            s["cpu_ms_per_keystroke_sessions"],
            s["staleness_ms"],
        )
        rows.append(
            [
                name,
                str(s["sessions"]),
                str(s["keystrokes"]),
                f"{lat['p50']:.1f} / {lat['p95']:.1f} / {lat['p99']:.1f} / {lat['max']:.0f}",
                f"{st['p50']} / {st['p95']} / {st['p99']} / {st['max']}",
                f"{sm['p50']:.0f} / {sm['p95']:.0f} / {sm['p99']:.0f} / {sm['max']:.0f}",
                f"{s['wrong_ranges']} of {s['checked_ranges']:,}",
                f"{100 * s['stale_share']:.1f}%",
                f"{s['cpu_ms_per_keystroke']:.1f} ({cs['p50']:.1f} / {cs['p95']:.1f} / {cs['p99']:.1f})",
                f"{s['updates_per_keystroke']:.2f}",
                f"{s['cpu_ms_per_update']:.1f}",
                f"{s['verified']}/{s['sessions']}",
            ]
        )
    return markdown_table(
        [
            "config",
            "sessions",
            "keystrokes",
            "latency ms p50 / p95 / p99 / max",
            "staleness (versions) p50 / p95 / p99 / max",
            "content staleness ms p50 / p95 / p99 / max",
            "diagnostics on a wrong range",
            "keystrokes typed on stale hints",
            "server CPU ms / keystroke: all (session p50 / p95 / p99)",
            "engine updates / keystroke",
            "CPU ms / update",
            "sessions verified",
        ],
        rows,
    )


def cpu_ratios(summary: dict[str, dict], speeds: list[float]) -> list[str]:
    out = []
    for sp in speeds:
        inc, full = summary.get(config_name("incremental", sp)), summary.get(config_name("full", sp))
        if inc and full:
            out.append(
                f"at {sp:g}x: full recompute uses {full['cpu_ms_per_keystroke'] / inc['cpu_ms_per_keystroke']:.1f}x "
                f"the server CPU per keystroke of the incremental engine "
                f"({full['cpu_ms_per_update'] / inc['cpu_ms_per_update']:.1f}x per engine update)"
            )
    return out


def config_name(engine: str, speed: float) -> str:
    return f"{engine} {speed:g}x"


def plot_cdf(results: dict[str, list[SessionResult]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, rs in results.items():
        lat = sorted(x for r in rs for x in r.latency_ms)
        if lat:
            ax.plot(lat, [(i + 1) / len(lat) for i in range(len(lat))], label=f"{name} ({len(lat)} keystrokes)")
    ax.axvline(100, color="grey", ls="--", lw=1)
    ax.text(104, 0.03, "100 ms", color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("keystroke to diagnostics for its version (ms, log scale)")
    ax.set_ylabel("fraction of keystrokes")
    ax.set_title("vq-lsp latency, replayed CoAuthor typing sessions")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------- main
async def run(args, reps: list[Replay], expected: list[int]) -> dict[str, list[SessionResult]]:
    configs = [(e, sp) for sp in args.speed for e in args.engine]
    servers: dict[tuple, Server] = {}
    try:
        for engine, sp in configs:
            s = servers[(engine, sp)] = Server()
            msg = await s.start(
                server_command(args.model, args.threads, args.server),
                {"threads": args.threads, "fullRecompute": engine == "full"},
            )
            print(f"[{config_name(engine, sp)}] {msg}", flush=True)
        results: dict[str, list[SessionResult]] = {config_name(e, sp): [] for e, sp in configs}
        for i, (rep, tokens) in enumerate(zip(reps, expected)):
            for engine, sp in configs:
                uri = f"file:///replay/{rep.session}-{engine}-{sp:g}x.txt"
                r = await replay(servers[(engine, sp)], rep, uri, sp, engine, tokens, args.timeout)
                results[config_name(engine, sp)].append(r)
                print(
                    f"session {i + 1}/{len(reps)} {rep.session[:8]} [{config_name(engine, sp)}] "
                    f"{r.keystrokes} keystrokes, {r.tokens} tokens: latency p50 {pct(r.latency_ms, 0.5):.1f} "
                    f"p95 {pct(r.latency_ms, 0.95):.1f} ms, CPU {1000 * r.cpu_seconds / r.keystrokes:.1f} ms/keystroke,"
                    f" {r.updates} updates, verified {r.verified}",
                    flush=True,
                )
        for (engine, sp), s in servers.items():
            errors = [m for t, m in s.messages if t == 1]
            if errors:
                raise RuntimeError(f"[{config_name(engine, sp)}] server errors: {errors[:3]}")
        return results
    finally:
        for s in servers.values():
            if s.proc is not None:
                await s.stop()


def session_record(r: SessionResult) -> dict:
    """A session for the JSON file: its figures and every keystroke's latency (0.1 ms), not the raw lists."""
    out = {k: v for k, v in asdict(r).items() if k not in ("staleness", "lateness_ms")}
    return out | {"latency_ms": [round(x, 1) for x in r.latency_ms]}


def write_report(results: dict[str, list[SessionResult]], meta: dict, out: Path) -> str:
    """STEM.md (the table and notes), STEM.json (summaries, every session, every latency), the CDF PNG."""
    summary = {name: summarize(rs) for name, rs in results.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_name(out.name + "_latency_cdf.png")
    notes = [*cpu_ratios(summary, meta["speed"])]
    notes += [
        f"{name}: {s['capped_while_busy']} of {s['capped_gaps']} gaps cut to the pause cap fell while the server "
        f"was still busy; server CPU time / wall time {100 * s['server_busy_share']:.0f}%; the client sent "
        f"keystrokes {s['client_lateness_ms_p99']:.1f} ms late at p99"
        for name, s in summary.items()
    ]
    notes.append(
        f"wall time {meta['wall_seconds'] / 60:.1f} min; load average {meta['loadavg_start'][0]:.2f} at the "
        f"start, {meta['loadavg_end'][0]:.2f} at the end ({meta['cpus']} CPUs)"
    )
    notes.append(
        f"latency CDF: {png.relative_to(REPO) if png.is_relative_to(REPO) else png}"
        if meta.get("plots", True)
        else "latency CDF: skipped (matplotlib is not installed)"
    )
    md = "\n".join([f"`{meta['command']}`", "", table(summary), "", *[f"- {n}" for n in notes], ""])
    out.with_name(out.name + ".md").write_text(md)
    sessions = {name: [session_record(r) for r in rs] for name, rs in results.items()}
    out.with_name(out.name + ".json").write_text(
        json.dumps({"meta": meta, "summary": summary, "sessions": sessions}, indent=1, default=str)
    )
    if meta.get("plots", True):  # after the results are on disk: a plotting failure loses nothing
        plot_cdf(results, png)
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions-file", type=Path, help=f"default: DATA/{DEFAULT_SESSIONS} (the dev file)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--sessions", type=int, default=4, help="sessions drawn at random (seeded) from the file")
    ap.add_argument("--speed", type=float, nargs="+", default=[1.0, 4.0], help="pace multipliers (1: as recorded)")
    ap.add_argument("--engine", nargs="+", choices=["incremental", "full"], default=["incremental", "full"])
    ap.add_argument("--max-events", type=int, default=0, help="events per session (0: all)")
    ap.add_argument(
        "--start",
        choices=["first", "random"],
        default="first",
        help="where the --max-events window starts: the recording's first event or a seeded random one",
    )
    ap.add_argument("--pause-cap", type=float, default=2.0, help="recorded gaps longer than this (s) are cut to it")
    ap.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--server", help="server command (default: the installed `vq-lsp serve`)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for any one answer")
    ap.add_argument(
        "--out",
        type=Path,
        default=REPO / "benchmarks" / "results" / "typing_replay",
        help="output stem: STEM.md, STEM.json, STEM_latency_cdf.png",
    )
    args = ap.parse_args(argv)
    from benchmarks.optional import can_plot

    plots = can_plot("typing_replay.py")
    random.seed(args.seed)
    path = args.sessions_file or data_dir(args.data) / DEFAULT_SESSIONS
    rows = load_sessions(path, args.sessions, args.seed)
    reps = [prepare(r, args.max_events, args.start, args.pause_cap, args.seed) for r in rows]
    import inference  # only for the expected token counts (the server loads the same model)

    tok = inference.load_model(args.model, device="cpu").tokenizer
    expected = [len(tok.encode(r.final_text)) for r in reps]
    load0, t0 = os.getloadavg(), time.time()
    results = asyncio.run(run(args, reps, expected))
    meta = {
        "command": shlex.join(
            ["python", "-m", "benchmarks.typing_replay", *recorded_command(sys.argv[1:] if argv is None else argv)]
        ),
        "sessions_file": str(path),
        "wall_seconds": time.time() - t0,
        "loadavg_start": load0,
        "loadavg_end": os.getloadavg(),
        "cpus": os.cpu_count(),
        "plots": plots,
        **{k: v for k, v in vars(args).items() if k not in ("out", "sessions_file")},
    }
    md = write_report(results, meta, args.out)
    print(md)
    bad = [(name, r.session) for name, rs in results.items() for r in rs if not r.verified]
    if bad:
        print(f"NOT VERIFIED: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
