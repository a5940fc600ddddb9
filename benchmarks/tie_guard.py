"""The float32 tie guard, calibrated: how far the engine's code distances drift from a dense pass
as edits accumulate, against the guard each row gets, and what the guard costs per edit.

    python -m benchmarks.tie_guard [--model DIR] [--tokens 2000] [--edits 2000] [--check-every 250]
        [--guard 1e-4:0 1e-5:0 1e-5:5e-4 ...] [--seed 7] [--out benchmarks/results]

A guard is `tie_rel:growth` (inference.loading.TIE_GUARD holds the defaults per dtype): a row is
recomputed in full when two of its codes are within tie_rel * (u^2 + max |c|^2), u being its bound
of |s| per VQ head, which grows by the bound of each move and by the factor 1 + growth per move
(a row's rounding accumulates with the moves since its last full recomputation). The same seeded
single-token edits (replace, insert, delete in turn) on the newest revision of held-out PEPs,
in float32 on one thread. Every --check-every edits: the drift, 4 max_k |p_k - p*_k| over the code
projections p of every row and VQ head (p* from the dense float32 pass's s, products in float64:
a bound of how far the engine's distance gap between two codes can be from the dense pass's),
relative to |s|^2 + max |c|^2 (the largest over rows); the guard's use, that drift over the row's
own guard (largest over rows: below 1, no row's code can differ from the dense pass's through
drift); and codes that differ from the dense pass (verify()).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import inference
from benchmarks.common import data_dir, markdown_table, median, percentile, run_benchmark
from benchmarks.single_token import edit_sequence, pep_tokens
from inference.engine import dense


def drift(model, doc) -> tuple[float, float]:
    """(largest relative drift, largest drift over the row's own guard) over the document's rows."""
    cfg = model.config
    h = cfg.vq_heads
    worst = use = 0.0
    for w in doc.windows:
        order = torch.tensor(w.order)
        with torch.no_grad():
            ids, pos = torch.from_numpy(w.ids_host[w.order]), torch.from_numpy(w.pos_host[w.order])
            out = dense.dense_pass(w, ids, pos)
        for l, tr in enumerate(out.traces):
            s = tr.s[0].double().view(len(w.order), h, -1)
            cb = model.net.layers[l].vq.codebook.double()
            exact = torch.einsum("nhd,hkd->nhk", s, cb)
            err = 4 * (w.proj[l, order].double() - exact).abs().amax(-1)  # (n, h)
            cmax = model.consts.code_sq_max[l].double()
            worst = max(worst, float((err / (s.pow(2).sum(-1) + cmax)).max()))
            u = w.bounds_of(w.sums[l, order]).double()
            use = max(use, float((err / (w.tie_rel * (u * u + cmax))).max()))
    return worst, use


def run(args) -> list[dict]:
    torch.set_num_threads(1)
    records = []
    for guard in args.guard:
        rel, growth = (float(x) for x in guard.split(":"))
        model = inference.load_model(args.model, dtype="float32")
        model.tie_rel, model.tie_growth = rel, growth
        ids = pep_tokens(model, data_dir(args.data), args.tokens)
        doc = inference.IncrementalDocument(model, ids)
        edits = edit_sequence(args.tokens, args.edits, model.tokenizer.vocab_size, args.seed)
        times, ties, checks = [], 0, []
        for i, sp in enumerate(edits, 1):
            t0 = time.perf_counter()
            cost = doc.apply([sp]).cost
            times.append(time.perf_counter() - t0)
            ties += cost.near_ties
            if i % args.check_every == 0:
                worst, use = drift(model, doc)
                checks.append(
                    {"edits": i, "drift": worst, "guard_use": use, "mismatched": doc.verify().mismatched_codes}
                )
                print(guard, checks[-1], flush=True)
        ms = [t * 1e3 for t in times]
        records.append(
            {
                "guard": guard,
                "tie_rel": rel,
                "growth": growth,
                "tokens": args.tokens,
                "seed": args.seed,
                "ms": ms,
                "near_ties": ties,
                "checks": checks,
            }
        )
    return records


def report(records) -> str:
    rows = []
    for r in records:
        rows.append(
            [
                str(r["tie_rel"]),
                str(r["growth"]),
                f"{r['near_ties'] / len(r['ms']):.1f}",
                f"{median(r['ms']):.1f}",
                f"{percentile(r['ms'], 0.9):.1f}",
                f"{sum(r['ms']) / len(r['ms']):.1f}",
                " / ".join(f"{c['drift']:.1e}" for c in r["checks"]),
                " / ".join(f"{c['guard_use']:.2f}" for c in r["checks"]),
                str(sum(c["mismatched"] for c in r["checks"])),
            ]
        )
    steps = ", ".join(str(c["edits"]) for c in records[0]["checks"]) if records else ""
    return "\n".join(
        [
            f"float32, one thread, {records[0]['tokens']}-token PEP, {len(records[0]['ms'])} single-token edits "
            f"(seed {records[0]['seed']}); "
            f"drift and guard use after {steps} edits",
            "",
            markdown_table(
                [
                    "tie_rel",
                    "growth per move",
                    "near-ties per edit",
                    "p50 ms",
                    "p90 ms",
                    "mean ms",
                    "drift (relative)",
                    "guard use (max, must stay < 1)",
                    "codes unequal at checks",
                ],
                rows,
            ),
            "",
        ]
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--edits", type=int, default=2000)
    ap.add_argument("--check-every", type=int, default=250)
    ap.add_argument("--guard", nargs="+", default=["1e-4:0", "1e-5:0", "1e-5:5e-4"])
    ap.add_argument("--seed", type=int, default=7)
    return run_benchmark("tie_guard", ap, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
