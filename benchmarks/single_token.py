"""Single-token edits at several document lengths: what each edit dispatches and how long it takes.

    python -m benchmarks.single_token [MODEL_DIR] [--lengths 500 2000 8000] [--edits 40]
        [--dtype float64 float32] [--sizing exact bucketed] [--context window paragraph] [--layout lean full auto]
        [--threads 1] [--out benchmarks/results]

Data: the newest revision of held-out PEPs ($VQ_LSP_DATA/eval/python_peps.jsonl.gz), used only
to have real tokens, cut to each length. The same seeded sequence of single-token edits
(replace, insert, delete in turn, at random places) is applied once per row-set sizing:
  exact     the CPU default: the host reads each layer's next rows (one read per layer), no padding
  bucketed  the CUDA path: shapes padded to buckets, one read per pass (forced here on the CPU)
and per state layout (--layout): full (load_model's default: layer outputs kept; what the server's
default, auto, builds and keeps while its memory budget has room) or lean (recomputed from the
codes: a document whose outputs the budget dropped), with the state's bytes per token after the edits.
Per edit: dispatched torch ops, launches (ops that are not views: about one kernel each on CUDA)
and host syncs (.item(), nonzero, tolist, numpy ...), counted by benchmarks.common.DispatchCounter
on an untimed twin document fed the same edits; and wall clock of the timed document. Beside
them, in the same run and dtype: a dense pass over the document as the engine splits it into
windows (what `verify` runs). Three untimed edits warm each document up first. Each run checks
that the codes still equal a dense pass at the end.

--context compares what a token sees (inference.CONTEXTS): the window (default) or only its own
paragraph, each paragraph then being a window. Its rows add the dense pass of just the window the
edit landed in, timed after every edit (median): the paragraph cache, which is the full recompute
in paragraph context.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from pathlib import Path

import torch

import inference
from benchmarks.common import (
    DispatchCounter,
    data_dir,
    dense_pass,
    markdown_table,
    median,
    percentile,
    timed,
    write_results,
)
from inference.loading import PRECISIONS


def pep_tokens(model, root: Path, n: int) -> list[int]:
    ids: list[int] = []
    with gzip.open(root / "eval" / "python_peps.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            ids += model.tokenizer.encode(json.loads(line)["revisions"][-1]["text"])
            if len(ids) >= n:
                return ids[:n]
    raise SystemExit(f"the PEPs hold only {len(ids)} tokens, fewer than {n}")


def edit_sequence(n_tokens: int, count: int, vocab: int, seed: int):
    """Splices in document coordinates as they are applied: replace, insert, delete in turn."""
    rng, n, out = random.Random(seed), n_tokens, []
    for i in range(count):
        p, kind = rng.randrange(n), i % 3
        out.append(inference.Splice(p, p + (kind != 1), [] if kind == 2 else [rng.randrange(4, vocab)]))
        n += {0: 0, 1: 1, 2: -1}[kind]
    return out


WARMUP = 3


def dense_ms(model, doc) -> float:
    """One dense pass per window of the document, summed (the full recompute an edit would need)."""
    return sum(timed(lambda: dense_pass(model, w.token_ids()), model.device)[1] for w in doc.windows) * 1e3


def edited_window(doc, splice) -> list[int]:
    """The tokens of the window holding the edit's first token (or the last window)."""
    for (_, b), w in zip(doc.window_bounds, doc.windows):
        if splice.start < b:
            return w.token_ids()
    return doc.windows[-1].token_ids()


def run(model, ids, edits, sizing: str, edited_dense: bool = False, layout: str = "full") -> dict:
    model.use_sizing(sizing)
    model.consts.keep_outputs = layout != "lean"  # (read when a document is built; "auto" builds full)
    timed_doc = inference.IncrementalDocument(model, ids)
    twin = inference.IncrementalDocument(model, ids)
    for sp in edits[:WARMUP]:
        timed_doc.apply([sp])
        twin.apply([sp])
    times, counts, window_ms = [], [], []
    for sp in edits[WARMUP:]:
        t0 = time.perf_counter()
        timed_doc.apply([sp])
        times.append(time.perf_counter() - t0)
        if edited_dense:
            window_ms.append(timed(lambda: dense_pass(model, edited_window(timed_doc, sp)), model.device)[1] * 1e3)
        with DispatchCounter() as c:
            twin.apply([sp])
        counts.append((c.ops, c.launches, c.syncs))
    ops, launches, syncs = ([c[i] for c in counts] for i in range(3))
    return {
        "sizing": sizing,
        "layout": layout,
        "state_bytes_per_token": timed_doc.state_bytes() / timed_doc.n_tokens,
        "ms": [t * 1e3 for t in times],
        "ops": ops,
        "launches": launches,
        "syncs": syncs,
        "edited_window_dense_ms": window_ms,
        "windows": len(timed_doc.windows),
        "exact": timed_doc.verify().codes_equal and twin.verify().codes_equal,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[500, 2000, 8000])
    ap.add_argument("--edits", type=int, default=40)
    ap.add_argument("--dtype", nargs="+", choices=list(PRECISIONS), default=["float64", "float32"])
    ap.add_argument("--sizing", nargs="+", choices=inference.engine.SIZINGS, default=list(inference.engine.SIZINGS))
    ap.add_argument("--context", nargs="+", choices=inference.CONTEXTS, default=["window"])
    ap.add_argument(
        "--layout",
        nargs="+",
        choices=inference.LAYOUTS,
        default=["full"],
        help="state layouts to compare (inference.LAYOUTS; default full, load_model's default)",
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    root = data_dir(a.data)
    contexts = a.context != ["window"]  # the context columns only when asked for
    rows, records = [], []
    for dtype in a.dtype:
        for context in a.context:
            model = inference.load_model(a.model_dir, device=a.device, dtype=dtype, context=context)
            sizings = a.sizing if model.device.type == "cpu" else ["bucketed"]  # exact sizes are a CPU path
            for n in a.lengths:
                ids = pep_tokens(model, root, n)
                edits = edit_sequence(n, a.edits + WARMUP, model.tokenizer.vocab_size, a.seed)
                doc = inference.IncrementalDocument(model, ids)
                dense = median([dense_ms(model, doc) for _ in range(3)])
                for sizing, layout in [(s, lay) for s in sizings for lay in a.layout]:
                    r = run(model, ids, edits, sizing, edited_dense=contexts, layout=layout)
                    r.update(dtype=dtype, tokens=n, dense_ms=dense, context=context, device=str(model.device))
                    records.append(r)
                    p50 = median(r["ms"])
                    row = [
                        dtype,
                        str(n),
                        sizing,
                        layout,
                        f"{r['state_bytes_per_token']:,.0f}",
                        f"{median(r['ops']):.0f}",
                        f"{median(r['launches']):.0f}",
                        f"{median(r['syncs']):.0f} (max {max(r['syncs'])})",
                        f"{p50:.1f}",
                        f"{percentile(r['ms'], 0.9):.1f}",
                        f"{dense:.1f}",
                        f"{dense / p50:.1f}x",
                    ]
                    if contexts:
                        window = median(r["edited_window_dense_ms"])
                        row = [context, str(r["windows"])] + row + [f"{window:.1f}", f"{window / p50:.1f}x"]
                    rows.append(row + ["yes" if r["exact"] else "NO"])
    dev = records[0]["device"] if records else "?"
    text = "\n".join(
        [
            f"device: {dev}, threads: {a.threads}, {a.edits} single-token edits per row "
            "(replace, insert, delete in turn), "
            f"seed {a.seed}, after {WARMUP} untimed ones; ops, launches and syncs are per-edit medians; dense: a full "
            "pass over every window of the document, median of 3",
            "",
            markdown_table(
                (["context", "windows"] if contexts else [])
                + [
                    "dtype",
                    "tokens",
                    "sizing",
                    "layout",
                    "state B/token",
                    "ops",
                    "launches",
                    "host syncs",
                    "p50 ms",
                    "p90 ms",
                    "dense pass ms",
                    "dense / p50",
                ]
                + (["edited window's dense pass, p50 ms", "that / p50"] if contexts else [])
                + ["codes equal"],
                rows,
            ),
            "",
        ]
    )
    write_results(a.out, "single_token_contexts" if contexts else "single_token", records, text)


if __name__ == "__main__":
    main()
