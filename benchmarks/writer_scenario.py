"""The writer's scenario: typing in a short note while an editor restores long chapters in tabs.

A real LSP client over stdio (the raw client of benchmarks/typing_replay.py, which stamps every
message with its arrival time) opens a small Markdown note and types into it at a human pace;
a few seconds in, it opens N long Markdown documents at once (Gutenberg books of 15,000-25,000
words from $VQ_LSP_DATA/gutenberg/), while typing goes on and hovers and code actions are asked
on the note. It reports:
  - the note's didChange-to-publish latency (p50, p95, max): the time from sending a version to
    the first publish that states it or a newer one;
  - hover and code-action latency on the note;
  - each long document's time to its first hints, from its didOpen;
  - peak and resting RSS of the server against its memory budget;
  - the server's CPU seconds in the IDLE_WINDOW_S after the last long document got its hints.

Several server commands can run the same scenario in one go (`--server LABEL=COMMAND`, e.g.
another checkout of the project with PYTHONPATH pointing at it), alternated per N, so that their
figures are side by side from the same machine at the same time. Each run gets a fresh
snapshot cache (VQ_LSP_CACHE_DIR), so no run reads states another one wrote.

    python -m benchmarks.writer_scenario --books 4 12 \\
        --server "new=vq-lsp" --server "old=env PYTHONPATH=/path/to/other/checkout vq-lsp"
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .typing_replay import Server

IDLE_WINDOW_S = 20.0
NOTE_URI = "file:///tmp/vq-writer/note.md"
NOTE_TEXT = (
    "# Notes for chapter three\n\n"
    "The rain had stopped by the time she reached the station, and the platform was empty except "
    "for a porter who seemed to be asleep on his trolley. She thought about the letter again, and "
    "about what her brother would say when he read it. It was not a long letter, but every line of "
    "it had cost her an evening.\n\n"
    "Keep the tone quiet here. The reader should feel the cold before anyone mentions it.\n\n"
)
TYPED = (
    "She folded the letter twice and put it back in her coat, where it would be safe from the weather "
    "and from her own doubts. "
)


@dataclass
class RunResult:
    label: str
    books: int
    budget_mb: float
    keystrokes: int = 0
    edit_latency_s: list[float] = field(default_factory=list)
    hover_latency_s: list[float] = field(default_factory=list)
    code_action_latency_s: list[float] = field(default_factory=list)
    first_hints_s: list[float | None] = field(default_factory=list)  # per book, from its didOpen
    book_words: list[int] = field(default_factory=list)
    rss_baseline: int = 0  # after the note's first hints, before any book
    rss_peak: int = 0
    rss_rest: int = 0  # at the end of the idle window
    idle_cpu_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    rss_trace: list[tuple[float, int]] = field(
        default_factory=list
    )  # (seconds since the lead-in began, MiB), each second


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(round(q * (len(ys) - 1))))]


def books(data_dir: Path, n: int, low: int = 15_000, high: int = 25_000) -> list[tuple[str, str]]:
    """(title, text) of the first n books of the Gutenberg subset with low..high words."""
    out = []
    with gzip.open(data_dir / "gutenberg" / "gutenberg_subset.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            if low <= len(row["text"].split()) <= high:
                out.append((row["title"], row["text"]))
                if len(out) == n:
                    return out
    raise SystemExit(f"only {len(out)} books of {low}-{high} words in the Gutenberg subset")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Note:
    """The note as the client sees it: its text's last line and the version of every keystroke."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.version = 1
        self.lines = NOTE_TEXT.split("\n")
        self.sent: dict[int, float] = {}  # version -> when its didChange was sent

    def type_one(self, ch: str) -> None:
        line = len(self.lines) - 1
        col = len(self.lines[-1].encode("utf-16-le")) // 2
        self.version += 1
        self.lines[-1] += ch
        self.sent[self.version] = time.perf_counter()
        self.server.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": NOTE_URI, "version": self.version},
                "contentChanges": [
                    {
                        "range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}},
                        "text": ch,
                    }
                ],
            },
        )

    def latencies(self) -> list[float]:
        """Per version sent: the time to the first publish stating it or a newer one."""
        pubs = [(t, v) for t, v in self.server.published.get(NOTE_URI, []) if v is not None]
        out = []
        for v, t0 in self.sent.items():
            t1 = next((t for t, pv in pubs if pv >= v and t >= t0), None)
            if t1 is not None:
                out.append(t1 - t0)
        return out


async def one_run(label: str, cmd: list[str], n_books: int, args: argparse.Namespace) -> RunResult:
    res = RunResult(label, n_books, args.budget_mb)
    texts = books(Path(args.data), n_books)
    res.book_words = [len(t.split()) for _, t in texts]
    cache = tempfile.mkdtemp(prefix="vq-writer-cache-")
    os.environ["VQ_LSP_CACHE_DIR"] = cache  # inherited by the server process
    server = Server()
    options = {"memoryBudgetMb": args.budget_mb}
    await server.start(cmd, options)
    note = Note(server)
    server.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": NOTE_URI, "languageId": "markdown", "version": 1, "text": NOTE_TEXT}},
    )
    await server.wait(lambda: server.published.get(NOTE_URI), 300)
    res.rss_baseline = res.rss_peak = rss_bytes(server.pid)
    stop = asyncio.Event()

    async def sample_rss() -> None:
        t0, n = time.monotonic(), 0
        while not stop.is_set():
            rss = rss_bytes(server.pid)
            res.rss_peak = max(res.rss_peak, rss)
            if n % 5 == 0:
                res.rss_trace.append((round(time.monotonic() - t0, 1), rss >> 20))
            n += 1
            await asyncio.sleep(0.2)

    async def type_on() -> None:
        k = 0
        while not stop.is_set():
            note.type_one(TYPED[k % len(TYPED)])
            k += 1
            await asyncio.sleep(args.type_interval)
        res.keystrokes = k

    async def ask() -> None:
        while not stop.is_set():
            await asyncio.sleep(args.ask_every)
            line = len(note.lines) - 1
            pos = {"line": 2, "character": 10}
            t0 = time.perf_counter()
            try:
                await server.request("textDocument/hover", {"textDocument": {"uri": NOTE_URI}, "position": pos}, 300)
                res.hover_latency_s.append(time.perf_counter() - t0)
            except Exception as e:  # an error answer is a result too: say so
                res.errors.append(f"hover: {e}")
            diag = {
                "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 3}},
                "message": "typo",
                "source": "vq-lsp",
                "code": "typo",
            }
            t0 = time.perf_counter()
            try:
                await server.request(
                    "textDocument/codeAction",
                    {"textDocument": {"uri": NOTE_URI}, "range": diag["range"], "context": {"diagnostics": [diag]}},
                    300,
                )
                res.code_action_latency_s.append(time.perf_counter() - t0)
            except Exception as e:
                res.errors.append(f"codeAction: {e}")

    tasks = [asyncio.create_task(sample_rss()), asyncio.create_task(type_on())]
    if args.ask_every > 0:
        tasks.append(asyncio.create_task(ask()))
    await asyncio.sleep(args.lead_in)
    uris = [f"file:///tmp/vq-writer/book-{i}.md" for i in range(n_books)]
    opened = time.perf_counter()
    for uri, (_, text) in zip(uris, texts):
        server.notify(
            "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}
        )
    try:
        await server.wait(lambda: all(server.published.get(u) for u in uris), args.timeout)
    except TimeoutError:
        res.errors.append(f"not every book got hints within {args.timeout:.0f} s")
    res.first_hints_s = [server.published[u][0][0] - opened if server.published.get(u) else None for u in uris]
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(1.0)  # the last keystroke's publish
    res.edit_latency_s = note.latencies()
    cpu0 = server.cpu_seconds()
    t_idle = time.perf_counter()
    while time.perf_counter() - t_idle < IDLE_WINDOW_S:
        res.rss_peak = max(res.rss_peak, rss_bytes(server.pid))
        await asyncio.sleep(0.5)
    res.idle_cpu_s = server.cpu_seconds() - cpu0
    res.rss_rest = rss_bytes(server.pid)
    res.rss_peak = max(res.rss_peak, res.rss_rest)
    await server.stop()
    return res


def table(results: list[RunResult]) -> str:
    mib = 2**20
    head = (
        "| server | books | keystrokes | edit→publish p50 / p95 / max | hover p50 / max | code action p50 / max "
        "| first hints per book (s) | RSS baseline / peak / at rest | budget | CPU in 20 s after the last build |"
    )
    rows = [head, "|" + "---|" * 10]
    for r in results:
        e, h, a = r.edit_latency_s, r.hover_latency_s, r.code_action_latency_s
        first = ", ".join("none" if t is None else f"{t:.1f}" for t in r.first_hints_s)
        ms = lambda x: f"{x * 1000:.0f}"  # noqa: E731
        rows.append(
            f"| {r.label} | {r.books} | {r.keystrokes} "
            f"| {ms(pct(e, 0.5))} / {ms(pct(e, 0.95))} / {ms(max(e, default=0))} ms "
            f"| {ms(pct(h, 0.5))} / {ms(max(h, default=0))} ms | {ms(pct(a, 0.5))} / {ms(max(a, default=0))} ms "
            f"| {first} | {r.rss_baseline / mib:.0f} / {r.rss_peak / mib:.0f} / {r.rss_rest / mib:.0f} MiB "
            f"| {r.budget_mb:.0f} MiB | {r.idle_cpu_s:.1f} s |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--books", type=int, nargs="+", default=[4], help="numbers of long documents, one run each")
    p.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="LABEL=COMMAND",
        help="a server to run the scenario against (repeatable; runs alternate); default: vq-lsp here",
    )
    p.add_argument("--threads", type=int, default=1, help="engine threads of every server (--threads)")
    p.add_argument("--budget-mb", type=float, default=1024.0, help="memoryBudgetMb of every server")
    p.add_argument("--type-interval", type=float, default=0.65, help="seconds between keystrokes")
    p.add_argument("--ask-every", type=float, default=4.0, help="seconds between hover + code action (0: none)")
    p.add_argument("--lead-in", type=float, default=5.0, help="seconds of typing before the books are opened")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for every book's first hints")
    p.add_argument("--data", default=os.environ.get("VQ_LSP_DATA", "data"), help="the data folder ($VQ_LSP_DATA)")
    p.add_argument("--out", help="write the table (markdown) and the raw figures (json beside it) here")
    args = p.parse_args(argv)
    exe = Path(sys.executable).parent / "vq-lsp"
    servers = [s.split("=", 1) for s in args.server] or [["here", str(exe)]]
    results = []
    for n in args.books:
        for label, command in servers:
            cmd = shlex.split(command) + ["serve", "--threads", str(args.threads)]
            print(f"running {label} with {n} books: {' '.join(cmd)}", file=sys.stderr, flush=True)
            r = asyncio.run(one_run(label, cmd, n, args))
            results.append(r)
            print(table([r]).split("\n")[-1], file=sys.stderr, flush=True)
    text = table(results)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps([r.__dict__ for r in results], indent=1))


if __name__ == "__main__":
    main()
