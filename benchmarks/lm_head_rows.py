"""The LM head of the few rows an update changes: which form of the product runs fastest here.

    python -m benchmarks.lm_head_rows [--model DIR] [--dtype float32 float64] [--calls 300]
        [--repeats 3] [--threads 1] [--out benchmarks/results]

After an edit the engine computes the next token's surprise for the rows whose last-layer output
changed: LM logits of a few rows (1 to about 40 for single-token edits), each call streaming the
whole tied embedding (vocab x d). The same seeded sequence of row counts (drawn from 1 to 41) and
the same hidden rows go through each form in turn, --repeats times, interleaved, on the bundled
model's embedding:
  F.linear          what VQOPT.lm_logits runs (the embedding as stored, transposed inside);
  transposed copy   a product with a contiguous (d, vocab) copy;
  padded F.linear   the rows padded with zero rows to a multiple of 4 (their logits dropped);
  engine            inference.LayerConstants.lm_logits, the form the engine picks per device and dtype.
Reported: mean ms per call. The forms agree within rounding (the largest difference is shown).
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import torch
import torch.nn.functional as F

import inference
from benchmarks.common import markdown_table, run_benchmark

ROW_COUNTS = (1, 2, 3, 5, 7, 9, 12, 15, 17, 22, 30, 41)


def forms(consts) -> dict:
    weight = consts.lm_weight
    copy = weight.t().contiguous()

    def padded(h):
        r = h.shape[0]
        pad = -r % 4 if r > 1 else 0
        return F.linear(torch.cat([h, h.new_zeros(pad, h.shape[1])]) if pad else h, weight).narrow(0, 0, r)

    return {
        "F.linear": lambda h: F.linear(h, weight),
        "transposed copy": lambda h: torch.mm(h, copy),
        "padded F.linear": padded,
        "engine": consts.lm_logits,
    }


def run(args) -> list[dict]:
    torch.set_num_threads(args.threads)
    out = []
    for dtype in args.dtype:
        model = inference.load_model(args.model, device=args.device, dtype=dtype)
        d = model.config.hidden_size
        rng = random.Random(0)
        counts = [rng.choice(ROW_COUNTS) for _ in range(args.calls)]
        gen = torch.Generator().manual_seed(0)
        hidden = {r: torch.randn(r, d, generator=gen, dtype=model.dtype).to(model.device) for r in ROW_COUNTS}
        fs = forms(model.consts)
        total = dict.fromkeys(fs, 0.0)
        with torch.no_grad():
            for f in fs.values():  # warm up (the engine's copy is made on first use)
                f(hidden[3])
            for _ in range(args.repeats):
                for name, f in fs.items():
                    t = time.perf_counter()
                    for r in counts:
                        f(hidden[r])
                    if model.device.type == "cuda":
                        torch.cuda.synchronize()
                    total[name] += time.perf_counter() - t
            ref = {r: F.linear(h, model.consts.lm_weight) for r, h in hidden.items()}
            diff = max((f(h) - ref[r]).abs().max().item() for f in fs.values() for r, h in hidden.items())
        n = args.calls * args.repeats
        out.append(
            {
                "dtype": dtype,
                "device": str(model.device),
                "threads": args.threads,
                "calls": n,
                "mean_ms": {k: v / n * 1e3 for k, v in total.items()},
                "max_abs_diff": diff,
            }
        )
    return out


def report(results) -> str:
    names = list(results[0]["mean_ms"])
    rows = [
        [r["dtype"], r["device"]] + [f"{r['mean_ms'][k]:.2f}" for k in names] + [f"{r['max_abs_diff']:.1e}"]
        for r in results
    ]
    head = (
        f"LM logits of 1 to 41 rows (seeded), mean ms per call over {results[0]['calls']} calls per form, "
        f"{results[0]['threads']} thread(s), forms interleaved"
    )
    return head + "\n\n" + markdown_table(["dtype", "device", *names, "largest difference"], rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default=None)
    return run_benchmark("lm_head_rows", p, sys.argv[1:] if argv is None else argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
