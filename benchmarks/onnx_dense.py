"""ONNX Runtime against torch for the engine's dense path: full builds of 500 and 2,000 tokens.

    python -m benchmarks.onnx_dense [--tokens 500 2000] [--threads 1 2] [--docs 3] [--repeats 3]
                                    [--model DIR] [--data DIR] [--out benchmarks/results]

On the same token ids, side by side in one run, alternating torch and ORT per repeat:
- forward: the dense passes alone, on the windows a build cuts the document into (windows are
  filled to 90%, so 2,000 tokens open as two windows of about 1,000): `VQOPT.forward(collect=True)`
  vs `OnnxDenseForward`, and the VQ codes of every row and layer compared (mismatches counted),
  the largest output difference;
- build: a whole `IncrementalDocument` open (dense pass, code projections, LM log-sum-exp), its
  dense pass taken from torch or from ORT (the hook `inference/onnx_dense.py` provides, put in
  `inference.engine.dense.dense_pass` for the run), then the ORT-built state checked by
  `verify()` against torch's dense pass.
Texts are Rust book chapters (real prose) cut to exactly N tokens. Wall-clock ratios are
torch / ORT (above 1: ORT faster), medians over documents of the median over repeats; the
backend that runs first alternates between repeats. Float64 is
tried too: ONNX Runtime refusing a float64 op is reported as measured, not assumed.
Needs the [onnx] extra: pip install -e ".[onnx]".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

import inference
from benchmarks.common import data_dir, markdown_table, revision_histories, run_benchmark
from inference import argtypes
from inference.engine import dense

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def documents(data: Path, tokenizer, count: int, tokens: int) -> list[list[int]]:
    """`count` Rust book chapters (last revision) with at least `tokens` tokens, cut to exactly that many."""
    out = []
    for _, texts in revision_histories(data / "revisions" / "rust_book_chapters.jsonl.gz"):
        ids = tokenizer.encode(texts[-1])
        if len(ids) >= tokens:
            out.append(ids[:tokens])
        if len(out) == count:
            return out
    raise SystemExit(f"onnx_dense.py: error: only {len(out)} chapters have {tokens}+ tokens")


@contextlib.contextmanager
def dense_from(forward):
    """Full builds (and verify) of a window take their dense pass from `forward` meanwhile."""
    if not hasattr(dense, "dense_pass"):
        raise SystemExit("onnx_dense.py: error: engine.dense.dense_pass, the hook this benchmark swaps, is gone")
    original = dense.dense_pass
    dense.dense_pass = lambda state, ids, pos: forward(ids, pos)
    try:
        yield
    finally:
        dense.dense_pass = original


def code_mismatches(a, b) -> int:
    """(row, layer) pairs whose VQ codes differ between two forward outputs."""
    return sum(int((x.codes != y.codes).any(-1).sum()) for x, y in zip(a.traces, b.traces) if x.codes is not None)


def max_abs_diff(a, b) -> float:
    pairs = [(getattr(x, f), getattr(y, f)) for x, y in zip(a.traces, b.traces) for f in "xqkvs"]
    pairs += [(a.layer_outputs[-1], b.layer_outputs[-1]), (a.hidden, b.hidden), (a.cls_logits, b.cls_logits)]
    return max(float((x - y).abs().max()) for x, y in pairs)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def measure_doc(model, ort_forward, ids: list[int], repeats: int) -> dict:
    torch_forward = lambda i, p: model.net(i.unsqueeze(0), p.unsqueeze(0), collect=True)  # noqa: E731
    windows = []  # the (ids, positions) of every dense pass a build runs: one per window
    with torch.no_grad():
        with dense_from(lambda i, p: (windows.append((i, p)), torch_forward(i, p))[1]):
            inference.IncrementalDocument(model, ids)  # also the warm-up
        pairs = [(ort_forward(i, p), torch_forward(i, p)) for i, p in windows]

        def forward_all(forward) -> None:
            for i, p in windows:
                forward(i, p)

        t = {"forward_torch": [], "forward_ort": [], "build_torch": [], "build_ort": []}
        docs = {}

        def build(backend: str) -> None:
            if backend == "torch":
                docs["torch"], s = timed(lambda: inference.IncrementalDocument(model, ids))
            else:
                with dense_from(ort_forward):
                    docs["ort"], s = timed(lambda: inference.IncrementalDocument(model, ids))
            t[f"build_{backend}"].append(s)

        for r in range(repeats):
            order = ("torch", "ort") if r % 2 == 0 else ("ort", "torch")  # neither always runs first
            for backend in order:
                forward = torch_forward if backend == "torch" else ort_forward
                t[f"forward_{backend}"].append(timed(lambda: forward_all(forward))[1])
            for backend in order:
                build(backend)
        torch_doc, ort_doc = docs["torch"], docs["ort"]
    check = ort_doc.verify()  # torch's dense pass against the ORT-built state
    baseline = torch_doc.verify()  # and against the torch-built one: float32 noise of the state itself
    state_codes_differ = sum(
        int((a.codes[:, : a.cap] != b.codes[:, : b.cap]).any(-1).sum())
        for a, b in zip(ort_doc.windows, torch_doc.windows)
    )
    return {
        **{k: statistics.median(v) for k, v in t.items()},
        "windows": len(windows),
        "forward_code_mismatches": sum(code_mismatches(a, b) for a, b in pairs),
        "forward_max_abs_diff": max(max_abs_diff(a, b) for a, b in pairs),
        "build_state_code_mismatches": state_codes_differ,
        "verify_codes_equal": check.codes_equal,
        "verify_mismatched_codes": check.mismatched_codes,
        "verify_max_abs_diff": check.max_abs_diff,
        "verify_torch_built_max_abs_diff": baseline.max_abs_diff,
    }


def run(args) -> dict:
    from inference.onnx_dense import OnnxDenseForward, OnnxRuntimeMissing, make_session, require_onnxruntime

    try:
        ort = require_onnxruntime()
    except OnnxRuntimeMissing as e:
        raise SystemExit(f"onnx_dense.py: error: {e}") from None
    data = data_dir(args.data)
    results = {
        "command": "python -m benchmarks.onnx_dense " + " ".join(args.argv),
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "onnxruntime": ort.__version__,
        "loadavg_start": os.getloadavg(),
        "rows": [],
        "unsupported": {},
    }
    for dname in args.dtypes:
        model = inference.load_model(args.model, device="cpu", dtype=DTYPES[dname])
        docs = {n: documents(data, model.tokenizer, args.docs, n) for n in args.tokens}
        try:  # ONNX Runtime's own answer for this dtype, before OnnxDenseForward's guard
            make_session(model.net, threads=1)
        except Exception as e:  # onnxruntime's error types: a missing kernel is this dtype's result
            results["unsupported"][dname] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
            print(f"{dname}: ONNX Runtime cannot run it: {results['unsupported'][dname]}", flush=True)
            continue
        for threads in args.threads:
            torch.set_num_threads(threads)
            ort_forward, export_s = timed(lambda: OnnxDenseForward(model.net, threads=threads))
            for n in args.tokens:
                per_doc = [measure_doc(model, ort_forward, ids, args.repeats) for ids in docs[n]]
                row = {
                    "dtype": dname,
                    "threads": threads,
                    "tokens": n,
                    "docs": len(per_doc),
                    "windows": sorted({d["windows"] for d in per_doc}),
                    "export_and_session_s": export_s,
                    "per_doc": per_doc,
                }
                for key in ("forward", "build"):
                    row[f"{key}_torch_s"] = statistics.median(d[f"{key}_torch"] for d in per_doc)
                    row[f"{key}_ort_s"] = statistics.median(d[f"{key}_ort"] for d in per_doc)
                    row[f"{key}_ratio"] = statistics.median(d[f"{key}_torch"] / d[f"{key}_ort"] for d in per_doc)
                row["forward_code_mismatches"] = sum(d["forward_code_mismatches"] for d in per_doc)
                row["build_state_code_mismatches"] = sum(d["build_state_code_mismatches"] for d in per_doc)
                row["verify_mismatched_codes"] = sum(d["verify_mismatched_codes"] for d in per_doc)
                row["max_abs_diff"] = max(d["forward_max_abs_diff"] for d in per_doc)
                row["verify_max_abs_diff"] = max(d["verify_max_abs_diff"] for d in per_doc)
                row["verify_torch_built_max_abs_diff"] = max(d["verify_torch_built_max_abs_diff"] for d in per_doc)
                results["rows"].append(row)
                print(
                    f"{dname} threads={threads} tokens={n}: build torch {row['build_torch_s']:.3f} s, ORT "
                    f"{row['build_ort_s']:.3f} s ({row['build_ratio']:.2f}x); forward {row['forward_ratio']:.2f}x; "
                    f"code mismatches {row['forward_code_mismatches']}",
                    flush=True,
                )
    results["loadavg_end"] = os.getloadavg()
    return results


def report(results: dict) -> str:
    header = [
        "dtype",
        "threads",
        "tokens",
        "docs",
        "windows per doc",
        "build torch",
        "build ORT",
        "build torch/ORT",
        "forward torch",
        "forward ORT",
        "forward torch/ORT",
        "code mismatches (forward; built state; verify)",
        "max abs diff (forward; verify of the ORT-built state; of the torch-built state)",
    ]
    rows = [
        [
            r["dtype"],
            str(r["threads"]),
            f"{r['tokens']:,}",
            str(r["docs"]),
            "/".join(map(str, r["windows"])),
            f"{r['build_torch_s'] * 1e3:.0f} ms",
            f"{r['build_ort_s'] * 1e3:.0f} ms",
            f"{r['build_ratio']:.2f}x",
            f"{r['forward_torch_s'] * 1e3:.0f} ms",
            f"{r['forward_ort_s'] * 1e3:.0f} ms",
            f"{r['forward_ratio']:.2f}x",
            f"{r['forward_code_mismatches']}; {r['build_state_code_mismatches']}; {r['verify_mismatched_codes']}",
            f"{r['max_abs_diff']:.1e}; {r['verify_max_abs_diff']:.1e}; {r['verify_torch_built_max_abs_diff']:.1e}",
        ]
        for r in results["rows"]
    ]
    lines = [
        f"`{results['command']}`",
        "",
        f"torch {results['torch']}, onnxruntime {results['onnxruntime']} (CPUExecutionProvider), "
        f"{results['cpus']} CPUs, load average {results['loadavg_start'][0]:.2f} at the start and "
        f"{results['loadavg_end'][0]:.2f} at the end",
        "",
        markdown_table(header, rows),
    ]
    for dname, why in results["unsupported"].items():
        lines += ["", f"{dname}: not run, ONNX Runtime refused the graph: `{why}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=argtypes.int_range(1, 2047), nargs="+", default=[500, 2000])
    p.add_argument("--threads", type=argtypes.threads, nargs="+", default=[1, 2])
    p.add_argument("--dtypes", choices=list(DTYPES), nargs="+", default=["float32", "float64"])
    p.add_argument("--docs", type=argtypes.positive_int, default=3, help="documents per size")
    p.add_argument("--repeats", type=argtypes.positive_int, default=3, help="timed runs per document and backend")
    return run_benchmark("onnx_dense", p, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
