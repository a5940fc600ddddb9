"""Restore from a snapshot vs rebuild: the engine state of a 2,000-token document, side by side.

    python -m benchmarks.snapshots [--model PATH] [--tokens 2000] [--repeats 5] [--threads 1]
                                   [--precisions float32 float64] [--state-layout lean|full]
                                   [--out benchmarks/results/snapshots.md]

The document is the start of a Rust book chapter (the revisions data), cut to --tokens tokens.
Rebuild: `IncrementalDocument(model, ids)`, the dense pass the server runs for a document it
has no state for. Restore: what the server runs instead when a snapshot holds those tokens
(vq_lsp/documents/snapshots.py: key from the model fingerprint and the ids, read, checks, CRC), from a
file in the page cache (a file just written, as when a document is closed and reopened; a cold
disk adds its read time). The server writes on a background thread; "write s" is that
thread's time. Both are timed in the same run, alternating, median of --repeats;
the restored state must be exact: verify() passes, and scores and per-token surprise equal the
rebuilt state's bit for bit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import inference
from benchmarks.common import data_dir, markdown_table, revision_histories
from inference import snapshot
from vq_lsp.documents.snapshots import SnapshotStore


def document_ids(model: inference.LoadedModel, data: Path, tokens: int) -> list[int]:
    for _, texts in revision_histories(data / "revisions" / "rust_book_chapters.jsonl.gz"):
        ids = model.tokenizer.encode(texts[-1])
        if len(ids) >= tokens:
            return ids[:tokens]
    raise SystemExit(f"no chapter of {tokens} tokens in {data}")


def measure(model: inference.LoadedModel, ids: list[int], repeats: int) -> dict:
    """Rebuild and restore of one document, alternating, in one precision."""
    t0 = time.perf_counter()
    snapshot.fingerprint(model)
    fingerprint_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        store = SnapshotStore(Path(tmp), background=False)  # write_s: the whole write, not its queueing
        doc = inference.IncrementalDocument(model, ids)  # warm-up (allocator, kernels)
        t0 = time.perf_counter()
        assert store.save(doc, 1e12)
        write_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in Path(tmp).iterdir())
        rebuild, restore = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            built = inference.IncrementalDocument(model, ids)
            rebuild.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            back = store.load(model, ids)
            restore.append(time.perf_counter() - t0)
            assert back is not None, "the snapshot was not restored"
        check = back.verify()
        exact = (
            check.codes_equal
            and back.scores == built.scores
            and back.surprise(0, back.n_tokens) == built.surprise(0, built.n_tokens)
        )
    return {
        "windows": len(doc.windows),
        "state": doc.state_bytes(),
        "size": size,
        "write_s": write_s,
        "fingerprint_s": fingerprint_s,
        "rebuild": rebuild,
        "restore": restore,
        "exact": exact,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="model folder or installed name (default: the bundled model)")
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads for both (default 1)")
    p.add_argument(
        "--precisions",
        nargs="+",
        choices=["float32", "float64"],
        default=["float32", "float64"],
        help="engine precisions to measure, one row each (the server serves float32 by default)",
    )
    p.add_argument(
        "--state-layout",
        choices=inference.LAYOUTS,
        default="auto",
        help="the engine state's layout (default auto: the server's, which writes the snapshots)",
    )
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", help="also write the table (with the command) to this markdown file")
    args = p.parse_args(argv)
    load_before = os.getloadavg()[0]
    torch.set_num_threads(args.threads)
    rows, runs, exact = [], [], True
    mib = 2**20
    for precision in args.precisions:
        model = inference.load_model(
            args.model, device="cpu", dtype=getattr(torch, precision), layout=args.state_layout
        )
        ids = document_ids(model, data_dir(args.data), args.tokens)
        r = measure(model, ids, args.repeats)
        rb, rs = statistics.median(r["rebuild"]), statistics.median(r["restore"])
        exact &= r["exact"]
        rows.append(
            [
                precision,
                str(len(ids)),
                str(r["windows"]),
                f"{r['state'] / mib:.1f}",
                f"{r['size'] / mib:.1f}",
                f"{rb:.3f}",
                f"{rs:.3f}",
                f"{rb / rs:.1f}x",
                f"{r['write_s']:.3f}",
                f"{r['fingerprint_s']:.3f}",
                "yes" if r["exact"] else "NO",
            ]
        )
        runs.append(
            f"{precision}: rebuild runs (s) {', '.join(f'{x:.3f}' for x in r['rebuild'])}; "
            f"restore runs (s) {', '.join(f'{x:.3f}' for x in r['restore'])}"
        )
    table = markdown_table(
        [
            "precision",
            "tokens",
            "windows",
            "state MiB",
            "snapshot MiB",
            "rebuild s",
            "restore s",
            "restore speedup",
            "write s",
            "fingerprint s",
            "exact (verify, scores, surprise)",
        ],
        rows,
    )
    name = args.model or "bundled"
    text = (
        f"Model {name}, {args.state_layout} state layout, {args.threads} torch thread(s), "
        f"median of {args.repeats} alternating runs (restore "
        f"from the page cache); the fingerprint is hashed once per model load. Machine load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs).\n\n{table}\n\n"
        + "\n".join(runs)
        + "\n"
    )
    print(text)
    if args.out:
        command = "python -m benchmarks.snapshots " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.out).write_text(f"# Snapshot restore vs rebuild\n\n`{command.strip()}`\n\n{text}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
