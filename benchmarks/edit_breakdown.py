"""Where a one-token edit's time goes: the engine's steps, timed over real edits.

    python -m benchmarks.edit_breakdown [--model DIR] [--pairs 10] [--edits 25] [--seed 0]
        [--lengths 1536 2048] [--dtype float32] [--layout full] [--context window] [--threads 1]
        [--out benchmarks/results]

Why: an edit costs a part that grows with the rows after it in its window (each is moved by the changed keys
and its codes checked: the scan) and a part that grows with the rows whose code flipped (each is
recomputed over every key, finished through its FFN, and given a new next-token surprise). Which
part dominates says how much faster a model that flips less would make the engine, and what an
engine change has to attack.

Data: the old side of --pairs revision pairs of 1,536-2,048 tokens, drawn as the model card's
paper protocol draws them (`training.protocol.revision_pairs`: the revision histories in
$VQ_LSP_DATA/revisions, which no training stage reads), each one window of 2,048 tokens as in
`benchmarks.paper_table` (`--context paragraph`: each paragraph its own window, as the server runs
it; window, the default, is the paper's setting). On each, --edits
random single-token replacements (a token of the text put in another place), applied in turn and
timed, after three untimed ones. Every step of `inference.engine.layer.update_layer`, the plan and
the heads' refresh is wrapped in a clock for the run (synchronised on a GPU); "other" is the rest
of `IncrementalDocument.apply`.

Reported: per step, mean ms per edit and its share; the medians of the later rows (after the edit in
its window) and of the rows recomputed per layer; and a least-squares fit of each edit's time to a
constant, the later rows and the rows recomputed (summed over layers).
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np
import torch

from benchmarks import common
from training.protocol import LENGTHS, revision_pairs
from vq_lsp.engine_flags import add_engine_flags

WARMUP = 3

# (module, function, label): the steps clocked, in the order an update runs them
STEPS = (
    ("passes", "plan_edit", "plan (host)"),
    ("layer", "_dirty_qkv", "q, k, v of the dirty rows"),
    ("layer", "_move_affected_rows", "later rows moved by the changed keys"),
    ("layer", "_near_ties_in_place", "near-ties among the moved rows"),
    ("layer", "_recompute_in_full", "rows recomputed over every key"),
    ("layer", "_next_rows", "codes checked, next rows read"),
    ("layer", "_finish_next_rows", "next rows finished (output, FFN)"),
    ("passes", "update_heads", "heads: surprise and tone of changed rows"),
)


@dataclass
class EditRecord:
    """One timed edit: its wall clock, each step's, and how much it touched."""

    seconds: float
    steps: dict[str, float]
    later_rows: int
    dirty_per_layer: list[int]


class StepClock:
    """Wraps the engine's step functions in clocks for as long as `installed` is entered."""

    def __init__(self, device: torch.device) -> None:
        self.sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.seconds: dict[str, float] = defaultdict(float)

    def _clocked(self, fn: Callable, label: str) -> Callable:
        def clocked(*args, **kwargs):
            self.sync()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[label] += time.perf_counter() - t0

        return clocked

    @contextmanager
    def installed(self):
        from inference.engine import layer, passes

        modules = {"layer": layer, "passes": passes}
        saved = [(modules[m], name, getattr(modules[m], name)) for m, name, _ in STEPS]
        for (module, name, fn), (_, _, label) in zip(saved, STEPS):
            setattr(module, name, self._clocked(fn, label))
        try:
            yield self
        finally:
            for module, name, fn in saved:
                setattr(module, name, fn)

    def take(self) -> dict[str, float]:
        out, self.seconds = dict(self.seconds), defaultdict(float)
        return out


def random_replacement(ids: list[int], rng: random.Random):
    """One token replaced by a token of the text that differs from it."""
    from inference import Splice

    at = rng.randrange(len(ids))
    token = next(t for t in (ids[rng.randrange(len(ids))] for _ in range(100)) if t != ids[at])
    return Splice(at, at + 1, [token])


def rows_after(doc, start: int) -> int:
    """Rows after token `start` in its window: the rows an edit there moves (with paragraph
    context, the rest of its paragraph; in one window of 2,048 tokens, the rest of the document)."""
    return next(b - start for a, b in doc.window_bounds if a <= start < b)


def run(args) -> dict:
    import inference

    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.precision)
    model = common.load_for_window(args.model, 2048, args.device, dtype, args.state_layout, args.context)
    encode = model.tokenizer.encode
    pairs, _ = revision_pairs(
        common.data_dir(args.data), lambda texts: [encode(t) for t in texts], args.pairs, args.seed, tuple(args.lengths)
    )
    rng = random.Random(args.seed)
    clock = StepClock(model.device)
    records: list[EditRecord] = []
    with clock.installed():
        for old, _new in pairs:
            doc = inference.IncrementalDocument(model, old)
            for i in range(WARMUP + args.edits):
                splice = random_replacement(doc.token_ids, rng)
                later = rows_after(doc, splice.start)
                clock.take()
                t0 = time.perf_counter()
                res = doc.apply([splice])
                seconds = time.perf_counter() - t0
                steps = clock.take()
                if i >= WARMUP:
                    records.append(EditRecord(seconds, steps, later, list(res.cost.dirty_per_layer)))
    return {
        "model": common.recorded_path(model.path),
        "setting": f"windows of up to 2,048 tokens, {args.context} context, {args.precision}, "
        f"{args.state_layout} state, {args.threads} thread(s)",
        "command": common.command_line("edit_breakdown", args.argv),
        "hardware": f"one {platform.machine()} CPU" if model.device.type == "cpu" else torch.cuda.get_device_name(),
        "edits": [asdict(r) for r in records],
        "fit": fit(records),
    }


def fit(records: list[EditRecord]) -> dict:
    """Least squares: ms per edit = constant + per_1000_later_rows * later/1000 + per_recomputed_row * rows."""
    later = np.array([r.later_rows for r in records], dtype=float) / 1000
    dirty = np.array([sum(r.dirty_per_layer) for r in records], dtype=float)
    ms = np.array([r.seconds for r in records]) * 1e3
    coef, *_ = np.linalg.lstsq(np.c_[np.ones_like(ms), later, dirty], ms, rcond=None)
    return {"constant_ms": coef[0], "ms_per_1000_later_rows": coef[1], "ms_per_recomputed_row": coef[2]}


def report(results: dict) -> str:
    edits = results["edits"]
    total = np.mean([e["seconds"] for e in edits]) * 1e3
    labels = [label for _, _, label in STEPS]
    means = {label: np.mean([e["steps"].get(label, 0.0) for e in edits]) * 1e3 for label in labels}
    means["other (validation, positions, bookkeeping)"] = total - sum(means.values())
    rows = [[label, f"{ms:.2f}", f"{100 * ms / total:.0f}%"] for label, ms in means.items()]
    rows.append(["whole edit", f"{total:.2f}", "100%"])
    dirty = np.median([e["dirty_per_layer"] for e in edits], axis=0)
    f = results["fit"]
    summary = (
        f"{len(edits)} single-token replacements; median {np.median([e['seconds'] for e in edits]) * 1e3:.2f} ms, "
        f"median later rows {np.median([e['later_rows'] for e in edits]):.0f}, median rows recomputed per layer "
        + " / ".join(f"{x:.0f}" for x in dirty)
        + f". Fit: ms per edit = {f['constant_ms']:.2f} + {f['ms_per_1000_later_rows']:.2f} per 1,000 later rows + "
        f"{f['ms_per_recomputed_row']:.3f} per row recomputed (summed over layers)."
    )
    return "\n".join(
        [
            "# Where a one-token edit's time goes",
            "",
            f"`{results['command']}`",
            "",
            f"Model: {results['model']}; {results['setting']}; {results['hardware']}.",
            "",
            common.markdown_table(["step", "ms per edit (mean)", "share"], rows),
            "",
            summary,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=10, help="revision pairs whose old side is edited")
    p.add_argument("--edits", type=int, default=25, help="timed single-token edits on each")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lengths", type=int, nargs=2, default=list(LENGTHS), help="tokens with BOS, both versions")
    add_engine_flags(
        p,
        "device",
        "threads",
        "precision",
        "state_layout",
        "context",
        aliases={"precision": ("--dtype",), "state_layout": ("--layout",)},
        defaults={"context": "window"},
    )
    return common.run_benchmark("edit_breakdown", p, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
