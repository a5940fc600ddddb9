"""Where a float32 document's codes part from a dense pass's: the first edit after which they do,
and for each differing code how far apart its two candidate codes lie, in units in the last place.

    python -m benchmarks.float32_ties [--sizing exact bucketed] [--tokens 2000] [--per-kind 60]
        [--seed 5] [--model DIR] [--data DIR] [--out benchmarks/results]

The edits are `benchmarks.gpu_session`'s one-token edits (replace, insert and delete in turn at
seeded random places in a 2,000-token held-out PEP, one window), applied one at a time at each
sizing, float32, one thread, with the codes compared with a dense pass after every edit. At the
first difference, per differing code: the layer, the VQ head, the dense pass's code and the
engine's, and both codes' distances as the engine holds them and as the dense pass's attention
sums give them for that row alone. Two codes a unit in the last place apart are a tie no
recomputation can settle the way a dense pass over every row does (docs/engine.md, "Near-ties
closer than float32 can tell apart").
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass

import numpy as np
import torch

import inference
from benchmarks import gpu_session
from benchmarks.common import command_line, data_dir, load_for_window, markdown_table, run_benchmark
from inference.engine import dense, rows


@dataclass
class DifferingCode:
    """One code the engine holds that a dense pass at the same positions does not pick."""

    window: int
    layer: int
    row: int
    head: int
    dense_code: int
    engine_code: int
    engine_distances: tuple[float, float]  # (the dense pass's code, the engine's), as the engine holds them
    alone_distances: tuple[float, float]  # the same, from the dense pass's sums of that row alone
    gap_ulps: float  # |difference| of the engine's two distances, in float32 units in the last place


def _distances(state, layer: int, sums_rows: torch.Tensor, head: int, codes: tuple[int, int]) -> tuple[float, float]:
    d = rows.code_distances(state.consts, layer, state.per_vq_head(sums_rows))[0, head]
    return float(d[codes[0]]), float(d[codes[1]])


def differing_codes(doc: inference.IncrementalDocument) -> list[DifferingCode]:
    """Every code of every window that differs from a dense pass at the state's positions."""
    found = []
    for w, state in enumerate(doc.windows):
        order, _, out = dense.dense_at_rest(state)
        # the state keeps unscaled sums where the attention scale is folded into the code map
        unscale = state.cfg.attention_scale if state.consts.scale_exact else 1.0
        for layer, trace in enumerate(out.traces):
            held = state.codes[layer, order]
            for r, h in (trace.codes[0] != held).nonzero().tolist():
                codes = (int(trace.codes[0][r, h]), int(held[r, h]))
                engine = _distances(state, layer, state.layer_views[layer].sums[order[r] : order[r] + 1], h, codes)
                alone_sums = rows.sums_rows(state.cfg, state.consts, layer, trace.s[0][r : r + 1] / unscale)
                ulp = float(np.spacing(np.float32(abs(engine[0]))))
                found.append(
                    DifferingCode(
                        w,
                        layer,
                        r,
                        h,
                        *codes,
                        engine,
                        _distances(state, layer, alone_sums, h, codes),
                        abs(engine[0] - engine[1]) / ulp,
                    )
                )
    return found


def first_difference(model, ids: list[int], edits, sizing: str) -> dict:
    """Apply the edits at `sizing`, checking after each; stop at the first difference."""
    model.use_sizing(sizing)
    doc = inference.IncrementalDocument(model, ids)
    for i, (kind, splice) in enumerate(edits, 1):
        doc.apply([splice])
        if not doc.verify().codes_equal:
            return {"sizing": sizing, "edits": i, "kind": kind, "codes": [asdict(c) for c in differing_codes(doc)]}
    return {"sizing": sizing, "edits": len(edits), "kind": None, "codes": []}


def run(args) -> dict:
    torch.set_num_threads(1)
    model = load_for_window(args.model, gpu_session.WINDOW, "cpu", "float32")
    ids = gpu_session.pep_tokens(model, data_dir(args.data), args.tokens)
    edits = gpu_session.one_token_edits(len(ids), args.per_kind, model.config.vocab_size, args.seed)
    in_place = [e for e in edits if e[0] != "append"]
    runs = [first_difference(model, ids, in_place, sizing) for sizing in args.sizing]
    return {"command": command_line("float32_ties", args.argv), "tokens": len(ids), "runs": runs}


def report(results: dict) -> str:
    lines = [
        "# Where float32 codes part from a dense pass's",
        "",
        f"`{results['command']}`",
        "",
        f"One-token edits in a {results['tokens']:,}-token held-out PEP (one window), float32, one CPU "
        "thread, the codes compared with a dense pass after every edit; at the first difference, each "
        "differing code with its two candidates' distances (the dense pass's code first) and the engine's "
        "gap between them in float32 units in the last place.",
        "",
        "",
    ]
    table = []
    for r in results["runs"]:
        if not r["codes"]:
            table.append([r["sizing"], f"none in {r['edits']}", "", "", "", "", ""])
        for c in r["codes"]:
            table.append(
                [
                    r["sizing"],
                    f"after edit {r['edits']} ({r['kind']})",
                    f"window {c['window']}, layer {c['layer'] + 1}, row {c['row']}, head {c['head'] + 1}",
                    f"{c['dense_code']} / {c['engine_code']}",
                    " / ".join(f"{d:.4f}" for d in c["engine_distances"]),
                    " / ".join(f"{d:.4f}" for d in c["alone_distances"]),
                    f"{c['gap_ulps']:.0f}",
                ]
            )
    header = ["sizing", "first difference", "where", "codes: dense / engine", "engine's distances"]
    header += ["from the dense sums alone", "engine's gap, ulps"]
    return "\n".join(lines) + markdown_table(header, table) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizing", nargs="+", choices=list(inference.engine.SIZINGS), default=["exact", "bucketed"])
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--per-kind", type=int, default=60, help="edits of each kind (replace, insert, delete)")
    ap.add_argument("--seed", type=int, default=5)
    return run_benchmark("float32_ties", ap, sys.argv[1:] if argv is None else argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
