"""Helpers shared by the benchmark scripts: data location, revision pairs, timing, tables."""

from __future__ import annotations

import gzip
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable, Iterator

import torch

REPO = Path(__file__).resolve().parents[1]


def data_dir(explicit: str | None = None) -> Path:
    """--data, else $VQ_LSP_DATA, else ../shared/data beside the repository."""
    return Path(explicit or os.environ.get("VQ_LSP_DATA") or REPO.parent / "shared" / "data")


def revision_histories(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(document name, texts oldest first) from a revisions JSONL file."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield row["doc"], [r["text"] for r in row["revisions"]]


def timed(fn: Callable[[], object], device: torch.device) -> tuple[object, float]:
    """Run fn and return (result, seconds), synchronising CUDA so the time is real."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def median(xs):
    return statistics.median(xs)


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
