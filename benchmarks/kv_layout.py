"""How a window keeps its keys and values: one row's attention over every key, per layout.

    python -m benchmarks.kv_layout [--model DIR] [--tokens 2000] [--calls 200] [--repeats 3]
        [--dtype float32] [--threads 1] [--out benchmarks/results]

Why: after an edit the engine recomputes the edited row (and every row whose code flipped) over
every key of each layer, q.K then gelu(weights).V, once per layer. A row reads every key and value
of the window, a few MiB, which the rest of the edit has pushed out of the caches: the read pattern
decides the time. Two layouts of the same numbers, with the bundled model's shapes (d, heads,
layers) and --tokens rows per layer:
  fused rows        (L, S, 3d): a row's q, k and v side by side; a head's keys are 64-number pieces
                    spread 3d numbers apart
  head-major        (L, 3, H, S, hd): what WindowState keeps; a head's keys are one block
Each call takes the next layer (cycling over the L layers) after a write of 64 MiB elsewhere that
evicts the caches, as the rest of an edit does; the layouts alternate call by call, --repeats times.
The numbers are random (only the layout is measured); both layouts give the same sums (checked).
Reported: median us per call (q.K, gelu, weights.V of one row over every key, every head) and the
ratio.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import inference
from benchmarks.common import command_line, markdown_table, run_benchmark

EVICT_BYTES = 64 << 20
FUSED, HEAD_MAJOR = "fused rows (L, S, 3d)", "head-major (L, 3, H, S, hd)"


def layouts(L: int, H: int, S: int, hd: int, dtype: torch.dtype, gen: torch.Generator) -> dict:
    """The same q|k|v numbers in both layouts: per layer, (the last row's queries (H, 1, hd), keys
    (H, hd, S), values (H, S, hd)) as views of each layout's storage."""
    head_major = torch.randn(L, 3, H, S, hd, generator=gen, dtype=dtype)
    row_major = head_major.permute(0, 3, 1, 2, 4).reshape(L, S, 3 * H * hd).contiguous()
    d = H * hd
    fused = [
        (
            t[-1:, :d].view(1, H, hd).transpose(0, 1),
            t[:, d : 2 * d].view(S, H, hd).permute(1, 2, 0),
            t[:, 2 * d :].view(S, H, hd).transpose(0, 1),
        )
        for t in row_major
    ]
    blocks = [(t[0][:, -1:], t[1].transpose(1, 2), t[2]) for t in head_major]
    return {FUSED: fused, HEAD_MAJOR: blocks}


def one_row_sums(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """What the engine computes for a row recomputed in full: gelu(q.K) V over every key, all heads."""
    return torch.bmm(F.gelu(torch.bmm(q, keys)), values)


def run(args) -> dict:
    torch.set_num_threads(args.threads)
    cfg = inference.load_model(args.model).config
    dtype = getattr(torch, args.dtype)
    H, L = cfg.num_attention_heads, cfg.num_hidden_layers
    forms = layouts(L, H, args.tokens, cfg.hidden_size // H, dtype, torch.Generator().manual_seed(0))
    agree = max(
        (one_row_sums(*forms[HEAD_MAJOR][l]) - one_row_sums(*forms[FUSED][l])).abs().max().item() for l in range(L)
    )
    evict = torch.zeros(EVICT_BYTES // 4)
    seconds: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.repeats):
        for call in range(args.calls):
            for name, per_layer in forms.items():
                evict.add_(1.0)
                t = time.perf_counter()
                one_row_sums(*per_layer[call % L])
                seconds[name].append(time.perf_counter() - t)
    us = {name: float(np.median(s)) * 1e6 for name, s in seconds.items()}
    return {
        "command": command_line("kv_layout", args.argv),
        "hardware": f"one {platform.machine()} CPU, {args.threads} thread(s)",
        "shape": f"{L} layers, {H} heads of {cfg.hidden_size // H}, {args.tokens} rows, {args.dtype}",
        "calls": args.calls * args.repeats,
        "median_us": us,
        "ratio": us[FUSED] / us[HEAD_MAJOR],
        "largest_difference": agree,
    }


def report(r: dict) -> str:
    rows = [[name, f"{us:.0f}"] for name, us in r["median_us"].items()]
    return (
        f"One row's attention over every key (q.K, gelu, weights.V, every head), caches evicted before each call: "
        f"{r['shape']}, {r['hardware']}, {r['calls']} calls per layout, alternated.\n"
        f"`{r['command']}`\n\n"
        + markdown_table(["layout", "median us per call"], rows)
        + f"\n\nfused rows / head-major: {r['ratio']:.2f}x; largest difference between the layouts' sums "
        f"{r['largest_difference']:.1e}\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--threads", type=int, default=1)
    return run_benchmark("kv_layout", p, sys.argv[1:] if argv is None else argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
