"""`vq-lsp score` in one process against `--ray` with 1 and 2 workers, on the same revisions, in one run.

    python -m benchmarks.ray_scoring [--docs 8] [--revisions 4] [--max-chars 8000] [--workers 1 2]
                                     [--model DIR] [--data DIR] [--out benchmarks/results]

The input is the first `--docs` Rust book chapters of `revisions/rust_book_chapters.jsonl.gz` whose
revisions stay within `--max-chars` characters (one 2,048-token window or so), each with its first
`--revisions` revisions (real edit histories; a document is a chain that one
worker scores in order). Each path scores the same revision list with one torch thread per
process: the single-process `BatchScorer`, then `RayScorer` on a local cluster with N workers.
The single-process path runs first and again last, so drift in the machine's load shows. Reported
per path: start-up (model load; for Ray the cluster start and the workers' own model loads),
scoring time, documents and revisions per second of scoring and end to end, the CPU time the
scoring took (the driver's, or the workers' together), and whether the rows equal the first
single-process rows (wall-clock `seconds` aside).
Needs the [cluster] extra: pip install -e ".[cluster]".
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import torch

import inference
from benchmarks.common import data_dir, markdown_table, run_benchmark
from inference import argtypes
from vq_lsp.scoring import ray as ray_batch
from vq_lsp.scoring.scorer import BatchScorer
from vq_lsp.settings import DiagnosticSettings

ENGINE = {"dtype": "float64", "context": "window", "layout": "full"}  # both paths: the engine the results name


def corpus(data: Path, docs: int, revisions: int, max_chars: int) -> list[tuple[str, str, str]]:
    """(document, label, text): the first `docs` chapters whose revisions all stay within `max_chars`
    characters, `revisions` each, document after document."""
    out, taken = [], 0
    with gzip.open(data / "revisions" / "rust_book_chapters.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts = [r["text"] for r in row["revisions"][:revisions]]
            if max(map(len, texts)) <= max_chars:
                out += [(row["doc"], str(i), t) for i, t in enumerate(texts)]
                taken += 1
            if taken == docs:
                return out
    raise SystemExit(f"ray_scoring.py: error: only {taken} chapters have revisions of at most {max_chars} characters")


def stripped(rows) -> list[dict]:
    return [{k: v for k, v in r.as_json().items() if k != "seconds"} for r in rows]


def run(args) -> dict:
    try:
        ray = ray_batch.require_ray()
    except ray_batch.RayUnavailable as e:
        raise SystemExit(f"ray_scoring.py: error: {e}") from None
    torch.set_num_threads(1)
    revs = corpus(data_dir(args.data), args.docs, args.revisions, args.max_chars)
    docs = len({name for name, _, _ in revs})
    hints = DiagnosticSettings()
    results = {
        "command": "python -m benchmarks.ray_scoring " + " ".join(args.argv),
        "cpus": os.cpu_count(),
        "documents": docs,
        "revisions": len(revs),
        "characters": sum(len(t) for _, _, t in revs),
        "loadavg_start": os.getloadavg(),
        "paths": [],
    }

    def single_process(label: str) -> list[dict]:
        t0 = time.perf_counter()
        scorer = BatchScorer(inference.load_model(args.model, device="cpu", **ENGINE), hints=hints)
        start = time.perf_counter() - t0
        t0, cpu0 = time.perf_counter(), time.process_time()
        rows = stripped(scorer.score(revs))
        results["paths"].append(
            {
                "path": label,
                "workers": 1,
                "start_s": start,
                "scoring_s": time.perf_counter() - t0,
                "cpu_s": time.process_time() - cpu0,
                "tokens": scorer.summary.tokens,
            }
        )
        print(f"{label}: {results['paths'][-1]['scoring_s']:.1f} s", flush=True)
        return rows

    single = single_process("single process (first)")
    model_path = inference.load_model(args.model, device="cpu").path  # a folder, also for an installed model's name
    results["paths"][-1]["rows_equal"] = True
    t0 = time.perf_counter()
    ray_batch.connect(ray, ray_batch.LOCAL, workers=max(args.workers), threads=1)
    cluster_s = time.perf_counter() - t0
    try:
        for workers in args.workers:
            t0 = time.perf_counter()
            scorer = ray_batch.RayScorer(ray_batch.LOCAL, workers, model_path, 1, ENGINE, hints=hints)
            start = time.perf_counter() - t0
            cpu0 = ray.get([a.cpu_seconds.remote() for a in scorer.actors])
            t0 = time.perf_counter()
            rows, cpu = [], []
            for row in scorer.score(revs):
                rows.append(row)
                if len(rows) == len(revs):  # before score() ends and stops the workers
                    cpu = ray.get([a.cpu_seconds.remote() for a in scorer.actors])
            rows = stripped(rows)
            results["paths"].append(
                {
                    "path": "--ray",
                    "workers": workers,
                    "cluster_start_s": cluster_s,
                    "start_s": start + cluster_s,
                    "workers_start_s": start,
                    "scoring_s": time.perf_counter() - t0,
                    "rows_equal": rows == single,
                    "cpu_s": sum(cpu) - sum(cpu0),
                    "tokens": scorer.summary.tokens,
                }
            )
            print(
                f"--ray {workers} workers: {results['paths'][-1]['scoring_s']:.1f} s, rows equal: {rows == single}",
                flush=True,
            )
    finally:
        ray.shutdown()
    last = single_process("single process (last)")
    results["paths"][-1]["rows_equal"] = last == single
    results["loadavg_end"] = os.getloadavg()
    return results


def report(r: dict) -> str:
    singles = [p["scoring_s"] for p in r["paths"] if p["path"].startswith("single")]
    base = sum(singles) / len(singles)
    rows = []
    for p in r["paths"]:
        total = p["start_s"] + p["scoring_s"]
        start = (
            f"{p['start_s']:.1f} s"
            if p["path"].startswith("single")
            else f"{p['start_s']:.1f} s (cluster {p['cluster_start_s']:.1f} s + workers {p['workers_start_s']:.1f} s)"
        )
        rows.append(
            [
                p["path"],
                str(p["workers"]),
                start,
                f"{p['scoring_s']:.1f} s",
                f"{r['documents'] / p['scoring_s']:.3f}",
                f"{r['revisions'] / p['scoring_s']:.2f}",
                f"{base / p['scoring_s']:.2f}x",
                f"{p['cpu_s']:.1f} s",
                f"{r['documents'] / total:.3f}",
                "yes" if p["rows_equal"] else "NO",
            ]
        )
    return (
        "\n".join(
            [
                f"`{r['command']}`",
                "",
                f"{r['documents']} documents, {r['revisions']} revisions ({r['characters']:,} characters, "
                f"{r['paths'][0]['tokens']:,} tokens scored), bundled model, float64, one torch thread per process; "
                f"{r['cpus']} CPUs, load average {r['loadavg_start'][0]:.2f} at the start and "
                f"{r['loadavg_end'][0]:.2f} at the end",
                "",
                markdown_table(
                    [
                        "path",
                        "workers",
                        "start-up",
                        "scoring",
                        "documents/s (scoring)",
                        "revisions/s (scoring)",
                        "scoring speed vs single (mean of both)",
                        "CPU time of scoring",
                        "documents/s (end to end)",
                        "rows equal single",
                    ],
                    rows,
                ),
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=argtypes.positive_int, default=8, help="documents (Rust book chapters)")
    p.add_argument("--revisions", type=argtypes.positive_int, default=4, help="revisions per document")
    p.add_argument(
        "--max-chars",
        type=argtypes.positive_int,
        default=8000,
        help="only chapters whose revisions have at most this many characters (about 2,000 tokens)",
    )
    p.add_argument("--workers", type=argtypes.positive_int, nargs="+", default=[1, 2])
    return run_benchmark("ray_scoring", p, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
