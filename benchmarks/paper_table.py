"""The paper's Table 2 protocol on real PEP revisions, plus a paragraph-cache baseline.

    python -m benchmarks.paper_table [MODEL_DIR] [--pairs 500] [--seed 0] [--imdb 1000]
        [--context window|paragraph] [--out DIR]

Data: $VQ_LSP_DATA/eval/python_peps.jsonl.gz (evaluation only: nothing is tuned on it).
Consecutive revision pairs whose old and new versions have 1536-2048 tokens (BOS included);
`--pairs` of them drawn at random (seeded), or all if fewer. Three scenarios, each measured
side by side in one run on the same model:
  entire revision  process the new revision given the old one's state;
  atomic           pick a random modified location, apply the changes before it to the old
                   revision's state, then one single-token edit there, and measure that edit;
  first 5%         one single-token replacement at a random place in the first 5% of tokens;
  one hunk         pick one of the revision's changes (a contiguous hunk of the diff) at random,
                   apply the changes before it to the old revision's state, then that whole hunk,
                   and measure it: an edit as a writer makes one, of any size.
Against: (a) a dense pass; (b) prefix-KV reuse by a softmax OPT of the same shape, recomputing
from the first edited token; (c) a paragraph cache: the dense model re-run only on the
paragraphs that changed, each scored alone. (c) loses context across paragraphs; its price is
shown on IMDB test: accuracy of whole-document scoring vs the token-weighted mean of
independently scored paragraphs. Reported: median reduction in MACs and median wall-clock
speedup of the incremental engine over each baseline; two plots like the paper's figures.

MACs are counted for every pair (the baselines' by formula, the engine's by running it); wall
clock is timed for the engine on every pair and for the baselines on the first --timed-pairs
pairs (a dense float64 pass takes seconds here), so time medians are over those pairs.
--workers N splits the pairs over N processes of one thread each. --context paragraph runs the engine
as the server does by default, each paragraph its own window: it then computes what the paragraph
cache computes, and its time against that baseline is an edit's cost where a writer meets it (the
default, window, is the paper's protocol: a token reads the text before it in its window).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

import inference
from benchmarks.common import (
    data_dir,
    dense_pass,
    load_for_window,
    markdown_table,
    median,
    prefix_macs,
    prefix_reuse_seconds,
    recorded_path,
    softmax_twin,
    timed,
)
from benchmarks.optional import can_plot, require
from inference import Splice, argtypes
from inference.document import span_probs
from training.protocol import paragraph_runs
from vq_lsp.engine_flags import add_engine_flags

BASELINES = ("dense", "prefix", "paragraph")
SCENARIOS = ("atomic", "one hunk", "first 5%", "entire revision")


@dataclass(frozen=True)
class Hunk:
    """One hunk of a revision's diff: the hunks before it (old coordinates), it (in the coordinates
    after them) and how many tokens the text has after them."""

    before: list[Splice]
    splice: Splice
    tokens_before: int


@dataclass
class Sample:
    """One measured edit: the engine's cost and each baseline's, plus where and how much changed."""

    inc_macs: int
    inc_s: float
    base_macs: dict[str, int] = field(default_factory=dict)
    base_s: dict[str, float] = field(default_factory=dict)
    changed_fraction: float = 0.0
    location: float = 0.0


def pep_pairs(model, root: Path, lo: int, hi: int) -> list[tuple[list[int], list[int]]]:
    """Consecutive revision pairs with lo <= tokens + BOS <= hi on both sides."""
    pairs = []
    with gzip.open(root / "eval" / "python_peps.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            texts = [r["text"] for r in json.loads(line)["revisions"]]
            ids = [model.tokenizer.encode(t) for t in texts]
            for a, b in zip(ids, ids[1:]):
                if a != b and lo <= len(a) + 1 <= hi and lo <= len(b) + 1 <= hi:
                    pairs.append((a, b))
    return pairs


def fork(doc: inference.IncrementalDocument) -> inference.IncrementalDocument:
    """An independent copy of a document's state (the model and its constants are shared)."""
    m = doc.model
    return copy.deepcopy(doc, memo={id(m): m, id(m.net): m.net, id(m.consts): m.consts})


class Bench:
    def __init__(self, model, twin) -> None:
        self.model, self.twin, self.cfg, self.dev = model, twin, model.config, model.device
        self.timing = True  # time the baselines too (MACs are always counted)

    def baselines(
        self, sample: Sample, new: list[int], first_edit: int, changed_paras: list[tuple[int, int]]
    ) -> Sample:
        """Measure (a) dense, (b) prefix reuse from `first_edit`, (c) re-running `changed_paras` alone."""
        cfg = self.cfg
        keep = 1 + first_edit
        sample.base_macs["dense"] = inference.dense_macs(cfg, len(new) + 1)
        sample.base_macs["prefix"] = prefix_macs(cfg, len(new) + 1, keep)
        sample.base_macs["paragraph"] = sum(inference.dense_macs(cfg, b - a + 1) for a, b in changed_paras)
        if self.timing:
            sample.base_s["dense"] = timed(lambda: dense_pass(self.model, new), self.dev)[1]
            sample.base_s["prefix"] = prefix_reuse_seconds(self.twin, cfg, new, keep, self.dev)
            sample.base_s["paragraph"] = sum(
                timed(lambda: dense_pass(self.model, new[a:b]), self.dev)[1] for a, b in changed_paras
            )
        return sample

    def paragraphs_touching(self, ids: list[int], lo: int, hi: int) -> list[tuple[int, int]]:
        runs = paragraph_runs(self.model, ids)
        return [(a, b) for a, b in runs if a < max(hi, lo + 1) and b > lo] or [runs[-1]]

    def entire(
        self, old_doc: inference.IncrementalDocument, new: list[int]
    ) -> tuple[Sample, inference.IncrementalDocument]:
        doc, old = fork(old_doc), old_doc.token_ids
        splices = inference.diff(old, new)
        res, secs = timed(lambda: doc.apply(splices), self.dev)  # synchronised: the device's work counts
        # changed regions in the new revision's coordinates
        regions, shift = [], 0
        for sp in splices:
            a = sp.start + shift
            regions.append((a, a + len(sp.new_ids)))
            shift += len(sp.new_ids) - (sp.end - sp.start)
        touched = sorted({p for lo, hi in regions for p in self.paragraphs_touching(new, lo, hi)})
        changed = sum(max(sp.end - sp.start, len(sp.new_ids)) for sp in splices)
        sample = Sample(
            res.cost.incremental_macs,
            secs,
            changed_fraction=changed / len(new),
            location=regions[0][0] / len(new),
        )
        return self.baselines(sample, new, regions[0][0], touched), doc

    def single_edit(self, doc: inference.IncrementalDocument, splice: Splice) -> Sample:
        """One splice applied to `doc` and timed, beside the baselines' cost of the same edit."""
        res, secs = timed(lambda: doc.apply([splice]), self.dev)
        ids = doc.token_ids
        changed = max(splice.end - splice.start, len(splice.new_ids))
        sample = Sample(
            res.cost.incremental_macs, secs, changed_fraction=changed / len(ids), location=splice.start / len(ids)
        )
        lo = min(splice.start, len(ids) - 1)
        return self.baselines(sample, ids, lo, self.paragraphs_touching(ids, lo, lo + len(splice.new_ids)))

    @staticmethod
    def hunk_at(old: list[int], new: list[int], rng: random.Random) -> Hunk:
        """A random hunk of the old-to-new diff, after the hunks before it."""
        splices = inference.diff(old, new)
        k = rng.randrange(len(splices))
        tokens_before = len(inference.apply_splices(old, splices[:k]))
        shift, sp = tokens_before - len(old), splices[k]
        return Hunk(splices[:k], Splice(sp.start + shift, sp.end + shift, sp.new_ids), tokens_before)

    def atomic(self, old_doc: inference.IncrementalDocument, new: list[int], rng: random.Random) -> Sample:
        hunk = self.hunk_at(old_doc.token_ids, new, rng)
        at, sp = hunk.splice.start, hunk.splice
        if sp.new_ids:
            edit = Splice(at, at + (sp.end > sp.start), sp.new_ids[:1])
        else:
            edit = Splice(at, at + 1, [])
        if hunk.tokens_before == 1 and not edit.new_ids:
            edit = Splice(0, 1, [new[0]])
        if hunk.before:
            old_doc.apply(hunk.before)
        return self.single_edit(old_doc, edit)

    def one_hunk(self, old_doc: inference.IncrementalDocument, new: list[int], rng: random.Random) -> Sample:
        """One whole hunk of the revision, after the hunks before it (applied untimed)."""
        hunk = self.hunk_at(old_doc.token_ids, new, rng)
        if hunk.before:
            old_doc.apply(hunk.before)
        return self.single_edit(old_doc, hunk.splice)

    def first_five(self, doc: inference.IncrementalDocument, rng: random.Random) -> Sample:
        ids = doc.token_ids
        at = rng.randrange(max(1, len(ids) // 20))
        token = next(t for t in (ids[rng.randrange(len(ids))] for _ in range(100)) if t != ids[at])
        return self.single_edit(doc, Splice(at, at + 1, [token]))


def imdb_context_check(model, root: Path, n: int, seed: int) -> dict:
    """Accuracy on IMDB test of whole-review scoring vs the mean of paragraphs scored alone."""
    rows = [json.loads(line) for line in gzip.open(root / "imdb" / "imdb_test.jsonl.gz", "rt", encoding="utf-8")]
    rows = random.Random(seed).sample(rows, min(n, len(rows)))
    labels = model.config.labels
    pos_index = labels.index("positive") if "positive" in labels else len(labels) - 1
    cap = model.config.window_tokens - 1
    whole = para = multi = 0
    for row in rows:
        text = row["text"].replace("<br /><br />", "\n\n").replace("<br />", "\n")
        ids = model.tokenizer.encode(text)[:cap]
        whole_logp = dense_pass(model, ids)[1][0, 1:].sum(0)  # summed token class log-probabilities
        whole += int(span_probs(whole_logp, len(ids))[pos_index] > 0.5) == row["label"]
        runs = [r for r in paragraph_runs(model, ids) if r[1] > r[0]]
        multi += len(runs) > 1
        alone_logp = sum(dense_pass(model, ids[a:b])[1][0, 1:].sum(0) for a, b in runs)
        para += int(span_probs(alone_logp, len(ids))[pos_index] > 0.5) == row["label"]
    return {
        "reviews": len(rows),
        "multi_paragraph": multi,
        "whole_accuracy": whole / len(rows),
        "paragraph_mean_accuracy": para / len(rows),
    }


def summarise(results: dict[str, list[Sample]]) -> list[list[str]]:
    rows = []
    for scenario in SCENARIOS:
        samples = results[scenario]
        if not samples:
            continue
        row = [scenario, str(len(samples)), f"{median([s.inc_macs for s in samples]) / 1e6:.1f}"]
        timed_ = [s for s in samples if s.base_s]
        row.append(str(len(timed_)))
        for b in BASELINES:
            row.append(f"{median([s.base_macs[b] / max(1, s.inc_macs) for s in samples]):.1f}x")
            row.append(f"{median([s.base_s[b] / s.inc_s for s in timed_]):.1f}x" if timed_ else "-")
        rows.append(row)
    return rows


def plot(results: dict[str, list[Sample]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for scenario, attr, xlabel, name in (
        ("entire revision", "changed_fraction", "fraction of modified tokens", "reduction_vs_modified_fraction.png"),
        ("atomic", "location", "relative location of the edit", "reduction_vs_edit_location.png"),
    ):
        samples = results[scenario]
        if not samples:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        x = [getattr(s, attr) for s in samples]
        for b, marker in zip(BASELINES, "o^s"):
            ax.scatter(
                x,
                [s.base_macs[b] / max(1, s.inc_macs) for s in samples],
                s=12,
                marker=marker,
                label={"dense": "vs dense pass", "prefix": "vs prefix-KV reuse", "paragraph": "vs paragraph cache"}[b],
                alpha=0.7,
            )
        ax.set_yscale("log")
        ax.axhline(1, color="grey", lw=0.8)
        if attr == "changed_fraction":
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("reduction in MACs (x)")
        ax.set_title(f"VQ-OPT incremental, {scenario} edits")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        paths.append(out / name)
    return paths


def measure_pairs(job: dict) -> dict[str, list[Sample]]:
    """Run the three scenarios on job["pairs"] ((index, old, new, timed) tuples) in this process."""
    torch.set_num_threads(job["threads"])
    torch.manual_seed(job["seed"])
    model = load_for_window(job["model_dir"], 2048, job["device"], job["dtype"], job["layout"], job["context"])
    if job.get("imdb"):
        return {"imdb": imdb_context_check(model, job["root"], job["imdb"], job["seed"])}
    bench = Bench(model, softmax_twin(model.config, model.device, job["dtype"]))
    results: dict[str, list[Sample]] = {s: [] for s in SCENARIOS}
    for index, old, new, timing in job["pairs"]:
        rng = random.Random(job["seed"] * 1_000_003 + index)  # per pair: results do not depend on --workers
        bench.timing = timing
        old_doc = inference.IncrementalDocument(model, old)
        hunk_doc = fork(old_doc)
        entire, doc = bench.entire(old_doc, new)
        results["entire revision"].append(entire)
        results["first 5%"].append(bench.first_five(doc, rng))
        results["atomic"].append(bench.atomic(old_doc, new, rng))
        results["one hunk"].append(bench.one_hunk(hunk_doc, new, rng))
    return results


def run_all(chosen, args, dtype, root: Path) -> tuple[dict[str, list[Sample]], dict | None]:
    """Pairs in small strided chunks (plus the IMDB check) over --workers processes; merged results."""
    from tqdm import tqdm

    base = {
        "model_dir": args.model_dir,
        "device": args.device,
        "dtype": dtype,
        "seed": args.seed,
        "layout": args.state_layout,
        "context": args.context,
        "threads": args.threads,
    }
    indexed = [(i, o, n, i < args.timed_pairs) for i, (o, n) in enumerate(chosen)]
    chunks = max(1, min(len(indexed), 20 * args.workers))
    jobs = [{**base, "pairs": indexed[c::chunks]} for c in range(chunks)]
    if args.imdb:
        jobs.insert(0, {**base, "imdb": args.imdb, "root": root})
    parts = []
    with tqdm(total=len(jobs), desc="jobs", disable=not sys.stderr.isatty()) as bar:
        if args.workers == 1:
            done = map(measure_pairs, jobs)
        else:
            import multiprocessing as mp

            pool = mp.get_context("spawn").Pool(args.workers)
            done = pool.imap_unordered(measure_pairs, jobs)
        for part in done:
            parts.append(part)
            bar.update(1)
        if args.workers > 1:
            pool.close()
    check = next((part["imdb"] for part in parts if "imdb" in part), None)
    return {s: [x for part in parts for x in part.get(s, [])] for s in SCENARIOS}, check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--pairs", type=argtypes.positive_int, default=500)
    ap.add_argument(
        "--timed-pairs", type=argtypes.non_negative_int, default=100, help="pairs whose baselines are also timed"
    )
    ap.add_argument(
        "--workers", type=argtypes.int_range(1, 256), default=1, help="processes (one thread each when more than one)"
    )
    ap.add_argument("--seed", type=argtypes.seed, default=0)
    ap.add_argument(
        "--imdb", type=argtypes.non_negative_int, default=1000, help="IMDB test reviews for the context check (0: skip)"
    )
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    add_engine_flags(
        ap,
        "device",
        "threads",
        "precision",
        "context",
        "state_layout",
        notes={
            "threads": "(each worker's, when --workers is more than one)",
            "context": "(window is the paper's protocol; paragraph, the server's default, computes what the "
            "paragraph cache computes)",
        },
        defaults={"context": "window"},
        aliases={"precision": ("--dtype",), "state_layout": ("--layout",)},
    )
    args = ap.parse_args()
    require("paper_table.py", "transformers", why="the prefix-KV baseline is a transformers OPT")
    plots = can_plot("paper_table.py")
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.precision)
    root, out = data_dir(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = load_for_window(args.model_dir, 2048, args.device, dtype)
    pairs = pep_pairs(model, root, 1536, 2048)
    chosen = random.Random(args.seed).sample(pairs, min(args.pairs, len(pairs)))
    results, check = run_all(chosen, args, dtype, root)

    header = ["scenario", "edits", "median MMACs (ours)", "timed edits"] + [
        f"{what} vs {b}" for b in ("dense", "prefix-KV", "paragraph cache") for what in ("MACs", "time")
    ]
    table = markdown_table(header, summarise(results))
    lines = [
        f"model: {recorded_path(model.path)}  data: {len(chosen)} of {len(pairs)} PEP revision pairs of "
        "1536-2048 tokens, "
        f"seed {args.seed}  device: {model.device}  dtype: {args.precision}  context: {args.context}  "
        f"layout: {args.state_layout}  "
        f"workers: {args.workers} "
        f"(threads each: {args.threads})",
        "cells: median over edits of (baseline / incremental); above 1x the engine is cheaper; "
        "time medians over the timed edits",
        "",
        table,
    ]
    if check:
        lines += [
            "",
            f"IMDB test, {check['reviews']} reviews ({check['multi_paragraph']} with several paragraphs): "
            f"whole-document accuracy {check['whole_accuracy']:.3f}, mean of paragraphs scored alone "
            f"{check['paragraph_mean_accuracy']:.3f}",
        ]
    print(write_results(results, lines, out, plots))


def write_results(results: dict[str, list[Sample]], lines: list[str], out: Path, plots: bool) -> str:
    """paper_table.json and .md first, then the plots (their paths added to the .md): a plotting
    failure after an hour of measuring loses nothing."""
    raw = {s: [vars(x) for x in results[s]] for s in SCENARIOS}
    (out / "paper_table.json").write_text(json.dumps(raw) + "\n")
    (out / "paper_table.md").write_text("\n".join(lines) + "\n")
    if plots:
        lines = lines + [f"plot: {recorded_path(path)}" for path in plot(results, out)]
        (out / "paper_table.md").write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
