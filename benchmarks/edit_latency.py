"""Per-edit cost of real revisions at a full window: incremental vs dense vs prefix-KV reuse.

    python -m benchmarks.edit_latency MODEL_DIR [--edits 60] [--window 2048]

Consecutive revisions of real documents ($VQ_LSP_DATA/revisions/) are cut to one window
(the first window_tokens - 1 tokens), diffed into Splice lists, and applied in one run to:
  (a) the incremental engine: one IncrementalDocument per document, fed revision after revision;
  (b) a dense pass of the same model over the new revision (what the engine's verify runs);
  (c) prefix-KV-cache reuse: a softmax OPT of the same shape (transformers, a DynamicCache)
      that keeps the cache of every token before the first edited one and recomputes the rest.
Wall time is measured side by side for every edit; MACs are counted with the same formulas
(inference.costs). All three run in the same dtype, on the same device and threads.

Per edit and method it also reports what the device is asked to do: dispatched torch ops and
host syncs (benchmarks.common.DispatchCounter, a TorchDispatchMode),
and on CUDA the kernel launches and GPU-busy time (torch.profiler). These are counted on an
untimed twin run of the same edit (a second document fed the same revisions, the dense pass and
the prefix reuse run again), so that counting never slows the timed runs. --json writes every
edit's record.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import inference
from benchmarks.common import (
    DispatchCounter,
    cached_call,
    cuda_profile,
    data_dir,
    dense_pass,
    load_for_window,
    markdown_table,
    median,
    p95,
    prefix_macs,
    prefix_reuse_seconds,
    revision_histories,
    softmax_twin,
    timed,
)
from vq_lsp.engine_flags import add_engine_flags

METHODS = ("incremental", "dense", "prefix")


def device_counts(fn, device) -> dict:
    """ops, launches and syncs of one call of fn; on CUDA also its kernels and GPU-busy ms (same call)."""
    with DispatchCounter() as c:
        if device.type == "cuda":
            kernels, busy = cuda_profile(fn)
        else:
            fn()
    out = {"ops": c.ops, "launches": c.launches, "syncs": c.syncs}
    if device.type == "cuda":
        out.update(cuda_kernels=kernels, gpu_busy_ms=busy * 1e3)
    return out


def prefix_counts(twin, cfg, token_ids, keep, device) -> dict:
    """device_counts of the timed part of prefix-KV reuse only (the cache of the kept rows is built first)."""
    from transformers import DynamicCache

    ids = torch.tensor([[cfg.bos_token_id, *token_ids]], device=device)
    keep = max(1, min(keep, ids.shape[1] - 1))
    with torch.no_grad():
        cache = DynamicCache()
        cached_call(twin, ids[:, :keep], cache)
        return device_counts(lambda: cached_call(twin, ids[:, keep:], cache), device)


SOURCES = ("revisions/art_of_command_line_README_en.jsonl.gz", "revisions/rust_book_chapters.jsonl.gz")


def edit_pairs(model: inference.LoadedModel, root: Path, window: int, limit: int):
    """(document, old ids, new ids) for consecutive revisions, each cut to one window."""
    count = 0
    for source in SOURCES:
        for name, texts in revision_histories(root / source):
            prev = None
            for text in texts:
                ids = model.tokenizer.encode(text)
                if len(ids) < window - 1:
                    prev = None
                    continue
                ids = ids[: window - 1]
                if prev is not None and prev != ids:
                    yield name, prev, ids
                    count += 1
                    if count >= limit:
                        return
                prev = ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--edits", type=int, default=60)
    ap.add_argument("--window", type=int, default=2048, help="window length in tokens (BOS included)")
    add_engine_flags(ap, "device", "threads", "precision", aliases={"precision": ("--dtype",)})
    ap.add_argument("--verify", action="store_true", help="check every edit against a dense pass (untimed)")
    ap.add_argument("--no-counts", action="store_true", help="skip the untimed dispatch counts")
    ap.add_argument("--per-edit", action="store_true", help="print one line per edit")
    ap.add_argument("--json", help="write every edit's record (times, MACs, counts) to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.precision)
    model = load_for_window(args.model_dir, args.window, args.device, dtype)
    cfg, dev = model.config, model.device
    twin = softmax_twin(cfg, dev, dtype)

    docs: dict[str, inference.IncrementalDocument] = {}
    twins: dict[str, inference.IncrementalDocument] = {}  # fed the same revisions, for the untimed counts
    rows = {"incremental": [], "dense": [], "prefix": []}
    counts: dict[str, list[dict]] = {m: [] for m in METHODS}
    records = []
    changed, mismatches = [], 0
    for name, old, new in edit_pairs(model, data_dir(args.data), args.window, args.edits):
        doc = docs.get(name)
        if doc is None or doc.token_ids != old:
            doc = docs[name] = inference.IncrementalDocument(model, old)
            if not args.no_counts:
                twins[name] = inference.IncrementalDocument(model, old)
        splices = inference.diff(old, new)
        res = doc.apply(splices)
        rows["incremental"].append((res.cost.seconds, res.cost.incremental_macs))
        changed.append(sum(max(s.end - s.start, len(s.new_ids)) for s in splices))

        _, secs = timed(lambda: dense_pass(model, new), dev)
        rows["dense"].append((secs, inference.dense_macs(cfg, len(new) + 1)))
        keep = 1 + min(sp.start for sp in splices)  # rows before the first edited token (BOS included)
        secs = prefix_reuse_seconds(twin, cfg, new, keep, dev)
        rows["prefix"].append((secs, prefix_macs(cfg, len(new) + 1, keep)))
        if not args.no_counts:  # untimed: what each method asks of the device for this edit
            counts["incremental"].append(device_counts(lambda: twins[name].apply(splices), dev))
            counts["dense"].append(device_counts(lambda: dense_pass(model, new), dev))
            counts["prefix"].append(prefix_counts(twin, cfg, new, keep, dev))
        if args.verify:  # not timed: the exactness contract, checked on the benchmark's own edits
            check = doc.verify()
            mismatches += check.mismatched_codes
        rec = {"doc": name, "changed_tokens": changed[-1], "dirty_per_layer": res.cost.dirty_per_layer}
        for m in METHODS:
            rec[m] = {"ms": rows[m][-1][0] * 1e3, "macs": rows[m][-1][1], **(counts[m][-1] if counts[m] else {})}
        records.append(rec)
        if args.per_edit:
            print(
                f"edit {len(records):3d} {name[:28]:28s} changed {changed[-1]:4d}  "
                + "  ".join(
                    f"{m} {rec[m]['ms']:7.1f} ms"
                    + (f" {rec[m]['ops']:5d} ops {rec[m]['syncs']:3d} syncs" if counts[m] else "")
                    + (
                        f" {rec[m]['cuda_kernels']:5d} kernels {rec[m]['gpu_busy_ms']:.2f} ms busy"
                        if "cuda_kernels" in rec[m]
                        else ""
                    )
                    for m in METHODS
                ),
                flush=True,
            )

    n = len(changed)
    if n == 0:
        raise SystemExit("no revision pairs of a full window found in the data")
    inc_t, inc_m = median([t for t, _ in rows["incremental"]]), median([m for _, m in rows["incremental"]])
    table = []
    cuda = dev.type == "cuda" and not args.no_counts
    for label, key in (
        ("incremental (VQ-OPT engine)", "incremental"),
        ("dense pass (VQ-OPT)", "dense"),
        ("prefix-KV reuse (softmax OPT)", "prefix"),
    ):
        ts, ms = [t for t, _ in rows[key]], [m for _, m in rows[key]]
        row = [
            label,
            f"{median(ts) * 1e3:.1f}",
            f"{p95(ts) * 1e3:.1f}",
            f"{median(ms) / 1e6:.1f}",
            f"{p95(ms) / 1e6:.1f}",
            f"{median(ts) / inc_t:.1f}x",
            f"{median(ms) / inc_m:.1f}x",
        ]
        if not args.no_counts:
            c = counts[key]
            row += [
                f"{median([x['ops'] for x in c]):.0f} ({max(x['ops'] for x in c)})",
                f"{median([x['syncs'] for x in c]):.0f} ({max(x['syncs'] for x in c)})",
            ]
            if cuda:
                row += [f"{median([x['cuda_kernels'] for x in c]):.0f}", f"{median([x['gpu_busy_ms'] for x in c]):.2f}"]
        table.append(row)
    print(
        f"model: {model.path}  window: {args.window} tokens  edits: {n} real revision pairs  "
        f"changed tokens per edit (median): {median(changed)}"
    )
    print(
        f"device: {dev}  dtype: {args.precision}  threads: {torch.get_num_threads()}"
        + (f"  verified: {mismatches} code mismatches" if args.verify else "")
    )
    header = ["method", "median ms", "p95 ms", "median MMACs", "p95 MMACs", "time / incremental", "MACs / incremental"]
    if not args.no_counts:
        header += ["ops per edit: median (max)", "host syncs: median (max)"]
        if cuda:
            header += ["CUDA kernels (median)", "GPU-busy ms (median)"]
    print(markdown_table(header, table))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "device": str(dev),
                    "dtype": args.precision,
                    "threads": torch.get_num_threads(),
                    "window": args.window,
                    "edits": records,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
