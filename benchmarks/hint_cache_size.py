"""How long the memory budget takes to count the hints' kept results, with many documents open.

    python -m benchmarks.hint_cache_size [--docs 50] [--tokens 2000] [--repeats 7] [--model PATH] [--out FILE]

The server counts them (HintCaches.bytes) on its engine thread before each new build, so a keystroke
in another document can wait for the count. This opens `--docs` Rust book chapters cut to `--tokens`
tokens through the server's document store (its handlers, no client), with the bundled model on the
CPU and the memory budget raised so that no state is dropped (a dropped state takes its document's
last paragraphs with it, so the default budget keeps less), then times the count as the server takes
it (a paragraph's material, a document's last paragraphs, a layout and paragraph spans walked once
and then looked up) against the same count with nothing remembered (every object walked again),
alternated `--repeats` times, and prints the medians and the bytes each counted."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import inference
from benchmarks.common import data_dir, markdown_table
from inference.paths import CACHE_ENV
from tests.documents.server_path import ServerPath
from tests.reliability.scenarios import chapter_documents
from vq_lsp.documents.events import Opened
from vq_lsp.hints.caches import HintCaches, KnownSizes


def from_scratch(kept: HintCaches) -> int:
    """The count with nothing remembered: every kept object walked."""
    return kept.bytes_with(KnownSizes())


def timed(count, kept: HintCaches) -> tuple[float, int]:
    t = time.perf_counter()
    counted = count(kept)
    return (time.perf_counter() - t) * 1000, counted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=50)
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--model", help="a model folder (default: the bundled model)")
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", help="also write the output (with the command) to this markdown file")
    args = p.parse_args(argv)
    model = Path(args.model) if args.model else inference.DEFAULT_MODEL_DIR
    texts = chapter_documents(
        data_dir(args.data), inference.Tokenizer.from_file(model / "tokenizer.json"), args.docs, args.tokens
    )
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[CACHE_ENV] = tmp  # no snapshot of these states reaches the user's cache
        server = ServerPath.with_model(model, memory_budget_mb=1e6)
        try:
            for i, text in enumerate(texts):
                server.process(f"file:///chapters/{i:02d}.md", [Opened(1, "markdown", text)])
            kept = server.docs.hint_caches
            kept.bytes()  # what the server's earlier counts remembered
            runs = {"as the server counts": [], "nothing remembered": []}
            counted = {}
            for _ in range(args.repeats):
                for label, count in (("as the server counts", HintCaches.bytes), ("nothing remembered", from_scratch)):
                    ms, counted[label] = timed(count, kept)
                    runs[label].append(ms)
        finally:
            server.close()
    rows = [
        [label, f"{statistics.median(ms):.1f} ms", f"{counted[label] / 2**20:.1f} MiB"] for label, ms in runs.items()
    ]
    ratio = statistics.median(runs["nothing remembered"]) / statistics.median(runs["as the server counts"])
    lines = [
        f"{args.docs} documents of about {args.tokens} tokens open, "
        f"{'the bundled model' if not args.model else model.name}, one CPU core; "
        f"{args.repeats} counts each, alternated",
        markdown_table(["count", "median", "counted"], rows),
        f"the server's count is {ratio:.1f}x faster",
    ]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text(
            "`python -m benchmarks.hint_cache_size "
            + " ".join(argv or sys.argv[1:])
            + "`\n\n"
            + "\n\n".join(lines)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
