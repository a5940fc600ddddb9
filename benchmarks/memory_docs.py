"""Memory of many open documents in the real server: state bytes per document and per token.

    python -m benchmarks.memory_docs [--model bundled|test|PATH] [--docs 50] [--tokens 2000] [--budget-mb 1024]
                                     [--precision float32|float64] [--state-layout auto|lean|full]
                                     [--out benchmarks/results/memory_docs.md]

Through the real `vq-lsp` process over stdio (pytest-lsp's client), not the states layer: it
opens `--docs` Rust book chapters cut to `--tokens` tokens at once, asks the scores of the ten
opened last (`vqLsp/documentScores` reports the engine-state bytes the server holds), then
edits ten early ones again (evicted by then: rebuilt on demand). It prints the bytes of one live engine
state per document and per token, how many states the budget kept live (with the auto layout, how
many of them it had made lean), and the server's
resident memory (VmRSS from /proc): its baseline after a warm-up document, the most at rest
(after each answer) and the peak (VmHWM, the temporaries of full passes included).
`--model test` is the small random model the reliability tests use (the same tokenizer).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import inference
from benchmarks.common import data_dir, markdown_table
from tests.reliability import scenarios as sc
from tests.server.lsp_helpers import CONFIG, initialize


async def measure(
    model_path: Path | None, data: Path, docs: int, tokens: int, budget_mb: float, precision: str, layout: str
) -> sc.MemoryResult:
    tok = inference.Tokenizer.from_file((model_path or inference.DEFAULT_MODEL_DIR) / "tokenizer.json")
    texts = sc.chapter_documents(data, tok, docs + 1, tokens)
    client = await CONFIG.start()
    try:
        options = {
            "precision": precision,
            "stateLayout": layout,
            **({"modelPath": str(model_path)} if model_path else {}),
        }
        await initialize(client, "neovim", options)
        return await sc.many_documents(client, texts[1:], budget_mb, tok, warmup=texts[0])
    finally:
        await client.shutdown_session()
        await client.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled", help="bundled (default), test, or a model folder")
    p.add_argument("--docs", type=int, default=50)
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--budget-mb", type=float, default=1024.0, help="memoryBudgetMb (the server's default: 1024)")
    p.add_argument(
        "--precision",
        choices=("float32", "float64"),
        default="float32",
        help="the server's precision setting (default float32, the server's default)",
    )
    p.add_argument(
        "--state-layout",
        choices=inference.LAYOUTS,
        default="auto",
        help="the server's stateLayout setting (default auto, the server's default)",
    )
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", help="also write the output (with the command) to this markdown file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model = {"bundled": None, "test": None}.get(args.model, Path(args.model))
        if args.model == "test":
            model = sc.build_test_model(Path(tmp) / "tiny8k")
        res = asyncio.run(
            measure(
                model, data_dir(args.data), args.docs, args.tokens, args.budget_mb, args.precision, args.state_layout
            )
        )
    mib = 2**20
    name = "bundled" if model is None else args.model
    lines = [
        f"model: {name}; {res.documents} documents of about {res.tokens // res.documents} tokens "
        f"({res.tokens:,} tokens), through the real server in {args.precision}, "
        f"{args.state_layout} state layout; one torch thread",
        markdown_table(
            [
                "state per document",
                "state per token",
                "live states (max)",
                "states held (max)",
                "budget",
                "RSS baseline",
                "RSS at rest (max)",
                "RSS peak",
                "evictions seen",
            ],
            [
                [
                    f"{res.bytes_per_document / mib:.1f} MiB",
                    f"{res.bytes_per_token:,.0f} B",
                    f"{res.live_states_max}" + (f" ({res.lean_states} lean)" if args.state_layout == "auto" else ""),
                    f"{res.state_bytes_max / mib:.0f} MiB",
                    f"{res.budget_bytes / mib:.0f} MiB",
                    f"{res.baseline_rss / mib:.0f} MiB",
                    f"{res.rest_rss_max / mib:.0f} MiB",
                    f"{res.peak_rss / mib:.0f} MiB",
                    str(res.evictions),
                ]
            ],
        ),
        "peak RSS by phase: " + ", ".join(f"{k} {v / mib:.0f} MiB" for k, v in res.peaks.items()),
    ]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text(
            "`python -m benchmarks.memory_docs " + " ".join(argv or sys.argv[1:]) + "`\n\n" + "\n\n".join(lines) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
