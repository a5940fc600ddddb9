"""Per-edit cost of real revisions at a full window: incremental vs dense vs prefix-KV reuse.

    python benchmarks/edit_latency.py MODEL_DIR [--edits 60] [--window 2048]

Consecutive revisions of real documents (../shared/data/revisions/) are cut to one window
(the first window_tokens - 1 tokens), diffed into Splice lists, and applied in one run to:
  (a) the incremental engine: one IncrementalDocument per document, fed revision after revision;
  (b) a dense pass of the same model over the new revision (what the engine's verify runs);
  (c) prefix-KV-cache reuse: a softmax OPT of the same shape (transformers, past_key_values)
      that keeps the cache of every token before the first edited one and recomputes the rest.
Wall time is measured side by side for every edit; MACs are counted with the same formulas
(inference.costs). All three run in the same dtype, on the same device and threads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import inference  # noqa: E402
from benchmarks.common import (data_dir, dense_pass, load_for_window, markdown_table, median, p95,  # noqa: E402
                               prefix_macs, prefix_reuse_seconds, revision_histories, softmax_twin, timed)

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
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA or ../shared/data)")
    ap.add_argument("--edits", type=int, default=60)
    ap.add_argument("--window", type=int, default=2048, help="window length in tokens (BOS included)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--verify", action="store_true", help="check every edit against a dense pass (untimed)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    model = load_for_window(args.model_dir, args.window, args.device, dtype)
    cfg, dev = model.config, model.device
    twin = softmax_twin(cfg, dev, dtype)

    docs: dict[str, inference.IncrementalDocument] = {}
    rows = {"incremental": [], "dense": [], "prefix": []}
    changed, mismatches = [], 0
    for name, old, new in edit_pairs(model, data_dir(args.data), args.window, args.edits):
        doc = docs.get(name)
        if doc is None or doc.token_ids != old:
            doc = docs[name] = inference.IncrementalDocument(model, old)
        splices = inference.diff(old, new)
        res = doc.apply(splices)
        rows["incremental"].append((res.cost.seconds, res.cost.incremental_macs))
        changed.append(sum(max(s.end - s.start, len(s.new_ids)) for s in splices))

        _, secs = timed(lambda: dense_pass(model, new), dev)
        rows["dense"].append((secs, inference.dense_macs(cfg, len(new) + 1)))
        keep = 1 + min(sp.start for sp in splices)  # rows before the first edited token (BOS included)
        secs = prefix_reuse_seconds(twin, cfg, new, keep, dev)
        rows["prefix"].append((secs, prefix_macs(cfg, len(new) + 1, keep)))
        if args.verify:  # not timed: the exactness contract, checked on the benchmark's own edits
            check = doc.verify()
            mismatches += check.mismatched_codes

    n = len(changed)
    if n == 0:
        raise SystemExit("no revision pairs of a full window found in the data")
    inc_t, inc_m = median([t for t, _ in rows["incremental"]]), median([m for _, m in rows["incremental"]])
    table = []
    for label, key in (("incremental (VQ-OPT engine)", "incremental"), ("dense pass (VQ-OPT)", "dense"),
                       ("prefix-KV reuse (softmax OPT)", "prefix")):
        ts, ms = [t for t, _ in rows[key]], [m for _, m in rows[key]]
        table.append([label, f"{median(ts) * 1e3:.1f}", f"{p95(ts) * 1e3:.1f}", f"{median(ms) / 1e6:.1f}",
                      f"{p95(ms) / 1e6:.1f}", f"{median(ts) / inc_t:.1f}x", f"{median(ms) / inc_m:.1f}x"])
    print(f"model: {model.path}  window: {args.window} tokens  edits: {n} real revision pairs  "
          f"changed tokens per edit (median): {median(changed)}")
    print(f"device: {dev}  dtype: {args.dtype}  threads: {torch.get_num_threads()}"
          + (f"  verified: {mismatches} code mismatches" if args.verify else ""))
    print(markdown_table(["method", "median ms", "p95 ms", "median MMACs", "p95 MMACs",
                          "time / incremental", "MACs / incremental"], table))


if __name__ == "__main__":
    main()
