"""The device memory that graphed sizing's captures take in the server's document, and what a replay saves.

    python -m benchmarks.graph_memory [--device cuda] [--windows 64] [--places 3] [--quick]

Graphed sizing keeps up to `inference.engine.graphs.MAX_GRAPHS` captured passes per window, each
in its own memory pool. Whether `sizing: auto` may choose it on CUDA depends on what those pools
add up to in a long document at the server's context (each paragraph its own window), which the
server's keystroke run cannot show: it types at one place, so one window captures. Here the
server's 10,000-word document (benchmarks.typing_word_hints.document) is opened in the engine at
the server's context, graphed sizing; in `windows` paragraph windows spread over it, at `places`
places each, the same one-token replacement is made three times with other tokens (a shape is run
eagerly when first seen, captured when seen again, replayed after that). Reported: the device's
allocated and reserved memory before and after, per capture, and the worst case (every window
holding the most captures it may keep, at that size); the first and third rounds' times per edit
(eager against replayed); and whether the codes still equal a dense pass. On a CPU captures are
emulated, so the memory figures are None and the rest is a dry run (a test runs `--quick`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import inference
from benchmarks.common import data_dir, load_for_window, median, timed
from benchmarks.typing_word_hints import document
from inference.engine.graphs import MAX_GRAPHS

ROUNDS = 3  # eager, captured, replayed
PLACES = 3  # places edited in each window


@dataclass(frozen=True)
class DeviceMemory:
    """The caching allocator's figures at one moment, in MB (None on a CPU)."""

    allocated_mb: float | None
    reserved_mb: float | None

    @classmethod
    def now(cls, device: torch.device) -> DeviceMemory:
        if device.type != "cuda":
            return cls(None, None)
        torch.cuda.synchronize(device)
        return cls(torch.cuda.memory_allocated(device) / 2**20, torch.cuda.memory_reserved(device) / 2**20)


@dataclass(frozen=True)
class GraphMemory:
    """What the captures of one run took, and what replaying saved."""

    words: int
    tokens: int
    windows: int  # the document's paragraph windows
    windows_edited: int
    places_per_window: int
    eager: int  # first passes run eagerly (a shape seen for the first time), captured, replayed
    captures: int
    replays: int
    before: DeviceMemory
    after: DeviceMemory
    reserved_mb_per_capture: float | None
    worst_case_reserved_mb: float | None  # every window holding MAX_GRAPHS captures of this size
    first_round_p50_ms: float  # the first replacement at each place (eager)
    last_round_p50_ms: float  # the third (replayed, where the second was captured)
    codes_equal: bool


def edit_places(bounds: list[tuple[int, int]], windows: int, places: int) -> list[int]:
    """Token offsets of the replacements: `places` spread over each of `windows` windows, the
    windows themselves spread evenly over the document (windows too short for them skipped)."""
    long_enough = [b for b in bounds if b[1] - b[0] > places + 1]
    step = max(1, len(long_enough) // max(1, windows))
    chosen = long_enough[::step][:windows]
    return [a + (b - a) * (k + 1) // (places + 1) for a, b in chosen for k in range(places)]


def graph_counts(doc) -> dict[str, int]:
    """First passes run eagerly, captured and replayed so far over the document's windows."""
    found = [w.graphs for w in doc.windows if w.graphs is not None]
    return {k: sum(getattr(g, k) for g in found) for k in ("eager", "captures", "replays")}


def measure(model, text: str, windows: int, places: int, seed: int) -> GraphMemory:
    """Open `text` in the engine at graphed sizing, make the rounds of replacements, read the memory."""
    model.use_sizing("graphed")
    ids = model.tokenizer.encode(text)
    doc = inference.IncrementalDocument(model, ids)
    where = edit_places(doc.window_bounds, windows, places)
    # replacement tokens from the document's own, never a line break (which would re-cut paragraphs)
    pool = sorted(set(ids) - model.tokenizer.line_break_ids)
    rng = random.Random(seed)
    before = DeviceMemory.now(model.device)
    counts_before = graph_counts(doc)
    rounds: list[list[float]] = []
    for _ in range(ROUNDS):
        times = []
        for p in where:
            k = rng.randrange(len(pool))
            new = pool[k] if pool[k] != doc.token_id_array()[p] else pool[(k + 1) % len(pool)]
            times.append(timed(lambda: doc.apply([inference.Splice(p, p + 1, [new])]), model.device)[1] * 1e3)
        rounds.append(times)
    after = DeviceMemory.now(model.device)
    counts = {k: v - counts_before[k] for k, v in graph_counts(doc).items()}
    per_capture = None
    if after.reserved_mb is not None and counts["captures"]:
        per_capture = (after.reserved_mb - before.reserved_mb) / counts["captures"]
    return GraphMemory(
        words=len(text.split()),
        tokens=len(ids),
        windows=doc.window_count,
        windows_edited=len(where) // max(1, places),
        places_per_window=places,
        eager=counts["eager"],
        captures=counts["captures"],
        replays=counts["replays"],
        before=before,
        after=after,
        reserved_mb_per_capture=per_capture,
        worst_case_reserved_mb=None if per_capture is None else per_capture * MAX_GRAPHS * doc.window_count,
        first_round_p50_ms=median(rounds[0]),
        last_round_p50_ms=median(rounds[-1]),
        codes_equal=doc.verify().codes_equal,
    )


def run(model_dir, device: str, precision: str, data: str | None, words: int, windows: int, places: int, seed: int):
    """The measurement with a model of its own, loaded at the server's context (paragraph windows of
    up to 2,048 tokens), as a JSON-ready dict."""
    model = load_for_window(model_dir, 2048, device, precision, context="paragraph")
    text = document(data_dir(data), words)
    result = measure(model, text, windows, places, seed)
    return asdict(result) | {"device": str(model.device), "dtype": str(model.dtype).removeprefix("torch.")}


def line(result: dict) -> str:
    """One Markdown paragraph of the figures."""
    mem = result["after"]["reserved_mb"]
    memory = (
        "captures take no device memory on a CPU (emulated)"
        if mem is None
        else f"device memory reserved {result['before']['reserved_mb']:.0f} MB before, {mem:.0f} MB after, "
        f"{result['reserved_mb_per_capture']:.2f} MB per capture; every window holding {MAX_GRAPHS} such "
        f"captures: {result['worst_case_reserved_mb']:.0f} MB"
    )
    return (
        f"Graphed sizing at the server's context ({result['device']}, {result['dtype']}), {result['words']:,} words "
        f"({result['tokens']:,} tokens, {result['windows']} paragraph windows), {result['places_per_window']} places "
        f"in each of {result['windows_edited']} windows, {ROUNDS} one-token replacements at each: "
        f"{result['eager']} first passes eager, {result['captures']} captured, {result['replays']} replayed; "
        f"{memory}. Per edit, p50: first round {result['first_round_p50_ms']:.2f} ms, "
        f"last round {result['last_round_p50_ms']:.2f} ms; codes equal to a dense pass: "
        f"{'yes' if result['codes_equal'] else 'NO'}."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", choices=list(inference.loading.PRECISIONS), default="float32")
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--words", type=int, default=10000)
    ap.add_argument("--windows", type=int, default=64, help="paragraph windows edited")
    ap.add_argument("--places", type=int, default=PLACES, help="places edited in each window")
    ap.add_argument("--quick", action="store_true", help="a small document and few edits (a dry run on a CPU)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    words, windows, places = (400, 4, 2) if args.quick else (args.words, args.windows, args.places)
    result = run(args.model, args.device, args.precision, args.data, words, windows, places, args.seed)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(line(result))
    return 0 if result["codes_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
