"""Keystroke-to-publish in a long Markdown document: what word hints cost per keystroke.

    python -m benchmarks.typing_word_hints [--words 10000] [--keystrokes 120] [--cpu 0] [--state-layout auto|lean|full]
                                           [--over-limit]

Builds a Markdown document of about --words words from real technical Markdown in
$VQ_LSP_DATA/revisions/ (the latest Art of Command Line README, then Rust book chapters until
the count is reached), opens it in the real `vq-lsp` server (one torch thread; pinned to one
CPU core with --cpu when `taskset` exists) and types a sentence into a paragraph in its middle,
one character per didChange. Each keystroke waits for the publish of its own version (computed
for it, not moved through later edits) before the next is sent, so every latency is one
keystroke's full cost: text sync, the engine update, choosing the hints, and JSON.

With --over-limit the document is instead about --over-limit-mb megabytes (the same Markdown
repeated), more tokens than `maxDocumentTokens`: the server keeps only its text and publishes no
hints, and the figures say what a keystroke costs there and how much memory the server holds
beyond its size (resident memory before the open, after it and after the typing).

The same file runs against another checkout (`PYTHONPATH=OTHER python benchmarks/typing_word_hints.py`)
for a before/after comparison on the same machine. Writes STEM.json and prints one Markdown row.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, data_dir, percentile, recorded_path
from benchmarks.typing_replay import Server, lsp_position, server_command
from vq_lsp.engine_flags import add_engine_flags

SENTENCE = "Writers who type here expect the hints of this paragraph to follow them without delay. "


def document(data: Path, words: int) -> str:
    """About `words` words of real Markdown: the README, then Rust book chapters."""
    parts = []
    with gzip.open(data / "revisions" / "art_of_command_line_README_en.jsonl.gz", "rt", encoding="utf-8") as f:
        parts.append(json.loads(f.readline())["revisions"][-1]["text"])
    with gzip.open(data / "revisions" / "rust_book_chapters.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if sum(len(p.split()) for p in parts) >= words:
                break
            parts.append(json.loads(line)["revisions"][-1]["text"])
    text = "\n\n".join(p.strip() for p in parts) + "\n"
    cut = text.split(" ")
    while len(" ".join(cut).split()) > words * 1.02:  # trim at a paragraph break near the target
        text = text[: text.rfind("\n\n", 0, int(len(text) * 0.98))] + "\n"
        cut = text.split(" ")
    return text


def insertion_point(text: str) -> int:
    """The end of the first prose paragraph (a line of ordinary words) past the middle."""
    at = len(text) // 2
    while True:
        end = text.find("\n\n", at)
        start = text.rfind("\n\n", 0, end) + 2
        para = text[start:end]
        if para[:1].isalpha() and "`" not in para and len(para.split()) >= 12:
            return end
        at = end + 2


def over_limit_document(data: Path, megabytes: float) -> str:
    """The benchmark's document repeated to about `megabytes` MB of text (UTF-8)."""
    unit = document(data, 10000)
    size = int(megabytes * 1_000_000)
    return "\n".join([unit] * max(1, -(-size // len(unit.encode()))))


def _checkout(pythonpath: str | None) -> str:
    """Where the server's code comes from, as the results file records it (no machine paths)."""
    if not pythonpath:
        return "the installed vq-lsp"
    return "this checkout" if Path(pythonpath).resolve() == REPO.resolve() else "another checkout (PYTHONPATH)"


def rss_mb(pid: int) -> float:
    """Resident memory of a process (VmRSS in /proc/PID/status), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(args) -> dict:
    data = data_dir(args.data)
    text = over_limit_document(data, args.over_limit_mb) if args.over_limit else document(data, args.words)
    cmd = server_command(args.model, 1)
    if args.cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(args.cpu)] + cmd
    server = Server()
    await server.start(cmd, {"device": args.device, "stateLayout": args.state_layout, "sizing": args.sizing})
    await asyncio.sleep(2.0)  # the model and Harper load after initialize
    rss_before = rss_mb(server.pid)
    uri = "file:///bench/typing_word_hints.md"
    server.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}
    )
    t0 = time.perf_counter()
    await server.wait(lambda: server.shown.get(uri, 0) >= 1, args.timeout)
    open_s = time.perf_counter() - t0
    rss_open = rss_mb(server.pid)
    at = insertion_point(text)
    typed = (" " + args.sentence * 4)[: args.keystrokes]
    latency = []
    for k, ch in enumerate(typed):
        version = k + 2
        pos = lsp_position(text, at)
        sent = time.perf_counter()
        server.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": pos, "end": pos}, "text": ch}],
            },
        )
        text, at = text[:at] + ch + text[at:], at + 1
        await server.wait(lambda: server.content.get(uri, 0) >= version, args.timeout)
        latency.append((time.perf_counter() - sent) * 1000)
        await asyncio.sleep(args.gap_ms / 1000)
    rss_typed = rss_mb(server.pid)
    # a text over the limit has no state to ask about
    scores = {} if args.over_limit else await server.request("vqLsp/documentScores", {"uri": uri}, args.timeout)
    await server.stop()
    warm = latency[args.warmup :]
    return {
        "words": len(text.split()),
        "text_mb": round(len(text.encode()) / 1e6, 2),
        "tokens": scores.get("tokens"),
        "rss_mb_before_open": round(rss_before, 1),
        "rss_mb_after_open": round(rss_open, 1),
        "rss_mb_after_typing": round(rss_typed, 1),
        "keystrokes": len(warm),
        "warmup_keystrokes": args.warmup,
        "open_seconds": round(open_s, 2),
        "p50_ms": round(percentile(warm, 0.5), 1),
        "p95_ms": round(percentile(warm, 0.95), 1),
        "max_ms": round(max(warm), 1),
        "engine_update_seconds": (scores.get("cost") or {}).get("seconds"),
        "vq_lsp": recorded_path(Path(sys.modules["vq_lsp"].__file__).parent) if "vq_lsp" in sys.modules else None,
        "server_code": _checkout(os.environ.get("PYTHONPATH")),  # where the server's vq_lsp comes from
        "latency_ms": [round(x, 2) for x in latency],
        "args": vars(args) | {"out": recorded_path(args.out)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--words", type=int, default=10000)
    ap.add_argument("--keystrokes", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=5, help="first keystrokes left out of the figures")
    ap.add_argument("--gap-ms", type=float, default=30.0, help="pause after each publish before the next key")
    ap.add_argument("--device", default="cpu", help="the server's torch device setting ('cpu', 'cuda', 'cuda:N')")
    add_engine_flags(ap, "state_layout", "sizing")
    ap.add_argument("--cpu", type=int, default=0, help="core to pin the server to (taskset); -1: no pinning")
    ap.add_argument("--over-limit", action="store_true", help="type into a text over maxDocumentTokens instead")
    ap.add_argument("--over-limit-mb", type=float, default=2.0, help="size of the --over-limit text (MB)")
    ap.add_argument(
        "--sentence",
        default=SENTENCE,
        help="what is typed (repeated): a confusable in it ('they took there departure') is read on while the "
        "words after it are typed",
    )
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "typing_word_hints")
    args = ap.parse_args(argv)
    if args.cpu is not None and args.cpu < 0:
        args.cpu = None
    import vq_lsp  # noqa: F401  (which checkout the server runs is recorded)

    result = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result | {"label": args.label}, indent=1, default=str))
    print(
        f"| {args.label} | {result['words']} | {result['tokens']} | {result['keystrokes']} | {result['p50_ms']} | "
        f"{result['p95_ms']} | {result['max_ms']} | {result['rss_mb_before_open']} | {result['rss_mb_after_typing']} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
