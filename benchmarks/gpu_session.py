"""The engine on a GPU, in one run: every GPU figure of the engine comes from this script.

    python -m benchmarks.gpu_session --out DIR [--device cuda] [--precision float32] [--quick]
        [--sections one_token counts exactness revisions server graph_memory]

Each baseline runs in the same process, on the same device and dtype, beside the engine, and
every figure names the device and the dtype:
  one_token   single-token edits in a 2,000-token held-out PEP: replace, insert and delete at
              seeded random places (in turn), then a run of appends at the end. Per sizing
              (exact: the default, one host read per layer; bucketed: one read per pass;
              graphed: bucketed, its first passes replayed from captures, after two untimed
              rounds of the same edits with other tokens, as captures are per document),
              wall clock per edit with the device synchronised, p50 and p95, against a dense pass
              over the same tokens and against prefix-KV reuse (a softmax OPT of the same shape,
              transformers, keeping the keys and values before the edited token) after each edit.
  counts      per one-token edit, on an untimed twin document: dispatched torch ops, launches,
              host syncs (benchmarks.common.DispatchCounter), and on CUDA the kernels the profiler
              saw and their busy time.
  exactness   150 random splices (up to 6 tokens out and 6 in, at random places), one at a time,
              at the device's own sizing; codes compared with a dense pass after every 50.
  revisions   60 consecutive held-out PEP revision pairs of 1,536-2,048 tokens, the paper's protocol
              (benchmarks.paper_table): the whole new revision applied to the old one's state, and
              one single-token edit at a real edit's place; against a dense pass, prefix-KV reuse
              and re-running the changed paragraphs.
  server      keystroke-to-publish in a 10,000-word Markdown document through the real
              `vq-lsp serve` (benchmarks.typing_word_hints), the server on the device at its
              default sizing, on CUDA at graphed sizing too, then on the CPU: one torch thread
              each, the same document and keystrokes.
  graph_memory  graphed sizing's captures in that document at the server's context (each paragraph
              its own window): the device memory they reserve, per capture and at most, after the
              same one-token replacement three times at 3 places in 64 windows
              (benchmarks.graph_memory).

The engine runs the window context here (one 2,048-token window, the paper's setting), the
server its own defaults. Data: $VQ_LSP_DATA/eval/python_peps.jsonl.gz (measured on, never tuned
on) and, for the server's document, $VQ_LSP_DATA/revisions/. Results: DIR/gpu_session.json,
rewritten after every section so that a run stopped early keeps what it measured, and
DIR/gpu_session.md. --quick: tiny sizes, so that a test runs the whole script on the CPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import inference
from benchmarks import graph_memory
from benchmarks.common import (
    data_dir,
    dense_pass,
    load_for_window,
    markdown_table,
    median,
    p95,
    prefix_reuse_seconds,
    recorded_command,
    softmax_twin,
    timed,
)
from benchmarks.edit_latency import device_counts
from benchmarks.single_token import pep_tokens

SECTIONS = ("one_token", "counts", "exactness", "revisions", "server", "profile", "graph_memory")
KINDS = ("replace", "insert", "delete")
SIZED = ("bucketed", "exact", "graphed")  # the sizings one-token edits and counts are measured at
WINDOW = 2048  # one window holds the whole document, so that prefix-KV reuse has the same rows


@dataclass(frozen=True)
class Sizes:
    """How much each section measures."""

    tokens: int  # length of the one-token edits' document
    edits: int  # one-token edits per kind (replace, insert, delete), and appends
    counted: int  # edits of each kind (replace, insert, delete, append) counted and profiled, per sizing
    splices: int  # random splices of the exactness run
    check_every: int  # splices between two comparisons with a dense pass
    pairs: int  # held-out PEP revision pairs
    words: int  # the server's document
    keystrokes: int  # typed into it
    graph_windows: int  # paragraph windows of the server's document edited in graph_memory


FULL = Sizes(
    tokens=2000,
    edits=60,
    counted=20,
    splices=150,
    check_every=50,
    pairs=60,
    words=10000,
    keystrokes=120,
    graph_windows=64,
)
QUICK = Sizes(
    tokens=300, edits=3, counted=2, splices=12, check_every=6, pairs=2, words=400, keystrokes=6, graph_windows=4
)


# ----------------------------------------------------------------- edits
def one_token_edits(n_tokens: int, per_kind: int, vocab: int, seed: int) -> list[tuple[str, inference.Splice]]:
    """(kind, splice) in document coordinates as applied: replace, insert, delete in turn at random
    places, then `per_kind` appends at the end (a writer typing on)."""
    rng, n, out = random.Random(seed), n_tokens, []
    for i in range(per_kind * len(KINDS)):
        kind, p = KINDS[i % 3], rng.randrange(n)
        new = [] if kind == "delete" else [rng.randrange(4, vocab)]
        out.append((kind, inference.Splice(p, p + (kind != "insert"), new)))
        n += {"replace": 0, "insert": 1, "delete": -1}[kind]
    for _ in range(per_kind):
        out.append(("append", inference.Splice(n, n, [rng.randrange(4, vocab)])))
        n += 1
    return out


def warm_rounds(edits: list[tuple[str, inference.Splice]], vocab: int) -> list[tuple[str, inference.Splice]]:
    """Graphed sizing's warm-up: the same edits at the same places twice, with other token ids (so
    that the timed edits are not no-ops). A shape is run eagerly when first seen and captured when
    seen again, so after these rounds the timed edits replay, as in a document being written."""
    return [
        (kind, inference.Splice(sp.start, sp.end, [4 + (t - 4 + shift) % (vocab - 4) for t in sp.new_ids]))
        for shift in (1, 2)
        for kind, sp in edits
    ]


def _appends(at: int, typed_ids: list[list[int]]) -> list[tuple[str, inference.Splice]]:
    """A writer typing on at `at`: one append per entry of typed_ids."""
    return [("append", inference.Splice(at + i, at + i, new_ids)) for i, new_ids in enumerate(typed_ids)]


def random_splices(n_tokens: int, count: int, vocab: int, seed: int) -> list[inference.Splice]:
    """Splices of up to 6 tokens out and 6 in at random places, none empty."""
    rng, n, out = random.Random(seed), n_tokens, []
    while len(out) < count:
        start = rng.randrange(n + 1)
        end = min(n, start + rng.randrange(7))
        new = [rng.randrange(4, vocab) for _ in range(rng.randrange(7))]
        if end == start and not new or end - start == n and not new:
            continue
        out.append(inference.Splice(start, end, new))
        n += len(new) - (end - start)
    return out


# ----------------------------------------------------------------- sections
def timed_edits(
    model, twin, ids: list[int], edits, warm=()
) -> tuple[dict[str, list[float]], dict[str, list[float]], bool, dict[str, int]]:
    """Apply (kind, splice) edits one at a time to a document of `ids`, after the `warm` edits
    (untimed): per kind, the engine's ms per edit (device synchronised) and prefix-KV reuse's ms on
    the text after it; whether the codes still equal a dense pass at the end; and (graphed sizing)
    how the document's first passes ran: eager, captured, replayed."""
    dev, cfg = model.device, model.config
    doc = inference.IncrementalDocument(model, ids)
    for _, sp in warm:
        doc.apply([sp])
    before = _graph_counts(doc)
    engine: dict[str, list[float]] = {}
    prefix: dict[str, list[float]] = {}
    for kind, sp in edits:
        _, secs = timed(lambda: doc.apply([sp]), dev)
        engine.setdefault(kind, []).append(secs * 1e3)
        keep = 1 + min(sp.start, doc.n_tokens - 1)
        prefix.setdefault(kind, []).append(prefix_reuse_seconds(twin, cfg, doc.token_ids, keep, dev) * 1e3)
    after = _graph_counts(doc)
    runs = {k: after[k] - before[k] for k in ("eager", "captures", "replays")}
    return engine, prefix, doc.verify().codes_equal, runs | {"failed_windows": after["failed_windows"]}


def _graph_counts(doc) -> dict[str, int]:
    """graph_memory.graph_counts, and how many windows gave up capturing."""
    failed = sum(w.graphs.failure is not None for w in doc.windows if w.graphs is not None)
    return graph_memory.graph_counts(doc) | {"failed_windows": failed}


def measure_one_token(model, twin, ids: list[int], sizes: Sizes, seed: int) -> list[dict]:
    """Per sizing and kind: the engine's synchronised time per edit, the dense pass and prefix-KV reuse.
    Replacements, insertions and deletions land in the whole document; appends type up to its
    length from `sizes.edits` tokens below it (so that every text fits the prefix-KV twin's window)."""
    dev, cfg = model.device, model.config
    dense_pass(model, ids)  # warm-up: kernels chosen, memory pools filled
    dense_ms = median([timed(lambda: dense_pass(model, ids), dev)[1] * 1e3 for _ in range(5)])
    edits = one_token_edits(len(ids), sizes.edits, cfg.vocab_size, seed)
    in_place = [e for e in edits if e[0] != "append"]
    typed_ids = [sp.new_ids for kind, sp in edits if kind == "append"]
    n = len(typed_ids)
    appends = _appends(len(ids) - n, typed_ids)  # typed up to the document's length
    rows = []
    for sizing in SIZED:
        model.use_sizing(sizing)
        warm = inference.IncrementalDocument(model, ids)
        for _, sp in one_token_edits(len(ids), 1, cfg.vocab_size, seed + 1):
            warm.apply([sp])  # untimed: the first call of each kind of edit at this sizing
        prefix_reuse_seconds(twin, cfg, ids, len(ids) // 2, dev)
        if sizing == "graphed":  # captures are per document: it has met its edits' shapes before, untimed
            in_place_warm, typed_start, typed_warm = (
                warm_rounds(in_place, cfg.vocab_size),
                len(ids) - 2 * n,
                _appends(len(ids) - 2 * n, typed_ids),
            )
        else:
            in_place_warm, typed_start, typed_warm = (), len(ids) - n, ()
        engine, prefix, equal, graphs = timed_edits(model, twin, ids, in_place, in_place_warm)
        typed, typed_prefix, typed_equal, _ = timed_edits(model, twin, ids[:typed_start], appends, typed_warm)
        engine, prefix, exact = engine | typed, prefix | typed_prefix, equal and typed_equal
        for kind in (*KINDS, "append"):
            e, p = engine[kind], prefix[kind]
            rows.append(
                {
                    "sizing": sizing,
                    "kind": kind,
                    "edits": len(e),
                    "p50_ms": median(e),
                    "p95_ms": p95(e),
                    "dense_ms": dense_ms,
                    "prefix_p50_ms": median(p),
                    "prefix_over_engine": median([b / a for a, b in zip(e, p)]),
                    "codes_equal": exact,
                    "first_passes": graphs,  # in-place edits: eager, captured, replayed (graphed sizing)
                }
            )
    return rows


def measure_counts(model, ids: list[int], sizes: Sizes, seed: int) -> list[dict]:
    """Per sizing: what one single-token edit asks of the device (medians and maxima over 4 x `counted` edits)."""
    rows = []
    for sizing in SIZED:
        model.use_sizing(sizing)
        doc = inference.IncrementalDocument(model, ids)
        edits = one_token_edits(len(ids), sizes.counted, model.config.vocab_size, seed + 2)
        for _, sp in warm_rounds(edits, model.config.vocab_size) if sizing == "graphed" else ():  # as one_token does
            doc.apply([sp])
        per_edit = [device_counts(lambda: doc.apply([sp]), model.device) for _, sp in edits]
        row = {"sizing": sizing, "edits": len(per_edit)}
        for key in per_edit[0]:
            values = [c[key] for c in per_edit]
            row[key] = median(values)
            row[f"{key}_max"] = max(values)
        rows.append(row)
    return rows


def measure_exactness(model, ids: list[int], sizes: Sizes, seed: int, sizing: str) -> dict:
    """Random splices one at a time; the codes compared with a dense pass every `check_every`."""
    model.use_sizing(sizing)
    doc = inference.IncrementalDocument(model, ids)
    checks = []
    splices = random_splices(len(ids), sizes.splices, model.config.vocab_size, seed + 3)
    for i, sp in enumerate(splices, 1):
        doc.apply([sp])
        if i % sizes.check_every == 0 or i == len(splices):
            checks.append({"after": i, "tokens": doc.n_tokens, "codes_equal": doc.verify().codes_equal})
    return {
        "sizing": sizing,
        "splices": len(splices),
        "checks": checks,
        "all_equal": all(c["codes_equal"] for c in checks),
    }


def held_out_pairs(model, root: Path, count: int, seed: int, quick: bool) -> list[tuple[list[int], list[int]]]:
    """`count` consecutive PEP revision pairs of 1,536-2,048 tokens (BOS included) on both sides,
    drawn at random (seeded) from all of them; --quick takes the first ones found."""
    lo, hi, pairs = 1536, WINDOW - 16, []  # room for the atomic scenario's edit inside the window
    with gzip.open(root / "eval" / "python_peps.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            ids = [model.tokenizer.encode(r["text"]) for r in json.loads(line)["revisions"]]
            pairs += [
                (a, b) for a, b in zip(ids, ids[1:]) if a != b and lo <= len(a) + 1 <= hi and lo <= len(b) + 1 <= hi
            ]
            if quick and len(pairs) >= count:
                break
    return pairs[:count] if quick else random.Random(seed).sample(pairs, min(count, len(pairs)))


def measure_revisions(model, twin, root: Path, sizes: Sizes, seed: int, quick: bool, sizing: str) -> dict:
    """The paper's protocol on real revisions at the device's sizing: per pair, the whole revision
    and one single-token edit at a real edit's place, each against the three baselines."""
    from benchmarks.paper_table import Bench

    model.use_sizing(sizing)
    pairs = held_out_pairs(model, root, sizes.pairs, seed, quick)
    bench = Bench(model, twin)
    bench.entire(inference.IncrementalDocument(model, pairs[0][0]), pairs[0][1])  # warm-up, untimed
    scenarios: dict[str, list] = {"entire revision": [], "atomic": []}
    for index, (old, new) in enumerate(pairs):
        rng = random.Random(seed * 1_000_003 + index)
        old_doc = inference.IncrementalDocument(model, old)
        scenarios["entire revision"].append(bench.entire(old_doc, new)[0])
        scenarios["atomic"].append(bench.atomic(old_doc, new, rng))
    rows = []
    for name, samples in scenarios.items():
        row = {"scenario": name, "pairs": len(samples), "engine_p50_ms": median([s.inc_s for s in samples]) * 1e3}
        for base in ("dense", "prefix", "paragraph"):
            row[f"{base}_p50_ms"] = median([s.base_s[base] for s in samples]) * 1e3
            row[f"{base}_over_engine"] = median([s.base_s[base] / s.inc_s for s in samples])
            row[f"{base}_macs_over_engine"] = median([s.base_macs[base] / max(1, s.inc_macs) for s in samples])
        rows.append(row)
    return {"sizing": sizing, "rows": rows}


def measure_server(out: Path, device: str, sizes: Sizes, data: str | None) -> list[dict]:
    """Keystroke-to-publish through the real server: on the device at the server's sizing (auto),
    on CUDA at graphed sizing too (whether the server should choose it there), then on the CPU."""
    from benchmarks import typing_word_hints

    runs = [(device, "auto")] + [(device, "graphed")] * (torch.device(device).type == "cuda")
    rows = []
    for where, sizing in dict.fromkeys([*runs, ("cpu", "auto")]):
        stem = out / f"typing_{where.replace(':', '_')}_{sizing}"
        argv = ["--device", where, "--sizing", sizing, "--cpu", "-1", "--words", str(sizes.words)]
        argv += ["--keystrokes", str(sizes.keystrokes), "--warmup", "2" if sizes.keystrokes < 20 else "5"]
        argv += ["--out", str(stem), "--label", f"{where}, {sizing} sizing"] + (["--data", data] if data else [])
        typing_word_hints.main(argv)
        result = json.loads(stem.with_suffix(".json").read_text())
        keys = ("words", "tokens", "keystrokes", "open_seconds", "p50_ms", "p95_ms", "max_ms", "rss_mb_after_typing")
        rows.append({"device": where, "sizing": sizing} | {k: result[k] for k in keys})
    return rows


def measure_profile(model, ids: list[int], sizes: Sizes, seed: int, out: Path, sizing: str) -> dict:
    """Where an edit's time goes: torch.profiler (host and device) over 4 x `counted` one-token edits,
    the first 4 not profiled; the ops by host time in DIR/profile_ops.txt and a Chrome trace in
    DIR/profile_trace.json."""
    from torch.profiler import ProfilerActivity, profile

    model.use_sizing(sizing)
    doc = inference.IncrementalDocument(model, ids)
    edits = [sp for _, sp in one_token_edits(len(ids), sizes.counted, model.config.vocab_size, seed + 4)]
    for sp in edits[:4]:
        doc.apply([sp])  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if model.device.type == "cuda" else [])
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        for sp in edits[4:]:
            doc.apply([sp])
        if model.device.type == "cuda":
            torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    averages = prof.key_averages()
    (out / "profile_ops.txt").write_text(averages.table(sort_by="self_cpu_time_total", row_limit=60))
    prof.export_chrome_trace(str(out / "profile_trace.json"))
    host_ops_ms = sum(e.self_cpu_time_total for e in averages) / 1e3
    return {
        "sizing": sizing,
        "edits": len(edits) - 4,
        "wall_ms_per_edit": wall * 1e3 / (len(edits) - 4),
        "host_time_in_torch_ops_ms_per_edit": host_ops_ms / (len(edits) - 4),
    }


# ----------------------------------------------------------------- the run
def device_facts(model, precision: str, model_name: str | None) -> dict:
    dev = model.device
    return {
        "device": str(dev),
        "name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine(),
        "dtype": precision,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if dev.type == "cuda" else None,
        "threads": torch.get_num_threads(),
        "default_sizing": model.consts.sizing.name,
        "model": model_name or "the bundled model",
    }


class Session:
    """The sections' results, written to DIR/gpu_session.json after each one (a run cut short keeps
    what it measured), then the Markdown report."""

    def __init__(self, out: Path, argv: list[str]) -> None:
        self.out = out
        self.results: dict = {"command": recorded_command(["python", "-m", "benchmarks.gpu_session", *argv])}
        out.mkdir(parents=True, exist_ok=True)

    def section(self, name: str, fn) -> None:
        t0 = time.perf_counter()
        try:
            value = fn()
        except Exception:  # a section that fails is reported, and the others still run
            value = {"error": traceback.format_exc(limit=8)}
            print(value["error"], file=sys.stderr)
        self.results[name] = value
        self.results.setdefault("seconds", {})[name] = round(time.perf_counter() - t0, 1)
        self.save()
        print(f"{name}: {self.results['seconds'][name]} s", file=sys.stderr, flush=True)

    def save(self) -> None:
        (self.out / "gpu_session.json").write_text(json.dumps(self.results, indent=1, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder for gpu_session.json and gpu_session.md")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", choices=list(inference.loading.PRECISIONS), default="float32")
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument(
        "--sizing", choices=list(SIZED), help="exactness and revisions at this sizing (default: the device's)"
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes: the whole script in seconds on a CPU")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sizes = QUICK if args.quick else FULL
    root = data_dir(args.data)
    model = load_for_window(args.model, WINDOW, args.device, args.precision)
    default_sizing = model.consts.sizing.name
    chosen = args.sizing or default_sizing
    twin = softmax_twin(model.config, model.device, model.dtype)
    ids = pep_tokens(model, root, sizes.tokens)
    session = Session(args.out, argv)
    session.results["facts"] = device_facts(model, args.precision, args.model) | {"sizes": asdict(sizes)}
    work = {
        "one_token": lambda: measure_one_token(model, twin, ids, sizes, args.seed),
        "counts": lambda: measure_counts(model, ids, sizes, args.seed),
        "exactness": lambda: measure_exactness(model, ids, sizes, args.seed, chosen),
        "revisions": lambda: measure_revisions(model, twin, root, sizes, args.seed, args.quick, chosen),
        "server": lambda: measure_server(args.out, args.device, sizes, args.data),
        "profile": lambda: measure_profile(model, ids, sizes, args.seed, args.out, chosen),
        "graph_memory": lambda: graph_memory.run(
            args.model,
            args.device,
            args.precision,
            args.data,
            sizes.words,
            sizes.graph_windows,
            graph_memory.PLACES,
            args.seed,
        ),
    }
    for name in args.sections:
        session.section(name, work[name])
    model.use_sizing(default_sizing)
    text = report(session.results)
    (args.out / "gpu_session.md").write_text(text)
    print(text)
    return 0 if not any(isinstance(v, dict) and "error" in v for v in session.results.values()) else 1


# ----------------------------------------------------------------- the report
def _ms(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _failed(value) -> str | None:
    if isinstance(value, dict) and "error" in value:
        return "failed: " + value["error"].strip().splitlines()[-1]
    return None


def one_token_table(rows: list[dict]) -> str:
    header = ["sizing", "edit", "edits", "p50 ms", "p95 ms", "dense pass ms", "dense / p50", "prefix-KV p50 ms"]
    header += ["prefix-KV / engine", "codes equal"]
    return markdown_table(
        header,
        [
            [r["sizing"], r["kind"], str(r["edits"]), _ms(r["p50_ms"]), _ms(r["p95_ms"]), _ms(r["dense_ms"])]
            + [f"{r['dense_ms'] / r['p50_ms']:.1f}x", _ms(r["prefix_p50_ms"]), f"{r['prefix_over_engine']:.2f}x"]
            + ["yes" if r["codes_equal"] else "NO"]
            for r in rows
        ],
    ) + "".join(_first_passes_note(r) for r in rows if r["kind"] == KINDS[0])


def _first_passes_note(row: dict) -> str:
    """How graphed sizing's timed in-place edits ran their first passes (nothing for other sizings)."""
    g = row.get("first_passes", {})
    if not sum(g.values()):
        return ""
    failed = g["failed_windows"]
    return (
        f"\n\n{row['sizing']} sizing, after two untimed rounds of the same edits with other tokens (captures "
        f"are per document): the timed in-place edits' first passes ran {g['replays']} replayed, "
        f"{g['captures']} captured, {g['eager']} eager (a shape seen for the first time)"
        + (f"; a capture failed in {failed} window(s), which ran eagerly after it." if failed else ".")
    )


def counts_table(rows: list[dict]) -> str:
    cuda = "cuda_kernels" in rows[0]
    header = ["sizing", "edits", "ops", "launches", "host syncs (max)"] + (
        ["CUDA kernels", "GPU busy ms"] if cuda else []
    )
    body = []
    for r in rows:
        row = [
            r["sizing"],
            str(r["edits"]),
            f"{r['ops']:.0f}",
            f"{r['launches']:.0f}",
            f"{r['syncs']:.0f} ({r['syncs_max']})",
        ]
        body.append(row + ([f"{r['cuda_kernels']:.0f}", f"{r['gpu_busy_ms']:.2f}"] if cuda else []))
    return markdown_table(header, body)


def revisions_table(result: dict) -> str:
    header = ["scenario", "pairs", "engine p50 ms", "dense p50 ms", "prefix-KV p50 ms", "paragraphs p50 ms"]
    header += ["dense / engine", "prefix-KV / engine", "paragraphs / engine", "MACs: dense / engine"]
    return markdown_table(
        header,
        [
            [r["scenario"], str(r["pairs"]), _ms(r["engine_p50_ms"])]
            + [_ms(r[f"{b}_p50_ms"]) for b in ("dense", "prefix", "paragraph")]
            + [f"{r[f'{b}_over_engine']:.2f}x" for b in ("dense", "prefix", "paragraph")]
            + [f"{r['dense_macs_over_engine']:.1f}x"]
            for r in result["rows"]
        ],
    )


def server_table(rows: list[dict]) -> str:
    header = ["server on", "sizing", "words", "tokens", "keystrokes", "open s", "p50 ms", "p95 ms", "max ms"]
    header += ["memory MB"]
    keys = ("words", "tokens", "keystrokes", "open_seconds", "p50_ms", "p95_ms", "max_ms", "rss_mb_after_typing")
    return markdown_table(header, [[r["device"], r.get("sizing", "auto")] + [str(r[k]) for k in keys] for r in rows])


def exactness_line(result: dict) -> str:
    checks = ", ".join(f"after {c['after']}: {'equal' if c['codes_equal'] else 'DIFFERENT'}" for c in result["checks"])
    return f"{result['splices']} random splices at {result['sizing']} sizing; codes against a dense pass {checks}."


def profile_line(result: dict) -> str:
    return (
        f"{result['edits']} one-token edits at {result['sizing']} sizing, profiled: "
        f"{result['wall_ms_per_edit']:.2f} ms per edit, of which {result['host_time_in_torch_ops_ms_per_edit']:.2f} ms "
        "of host time inside torch ops (the rest: the engine's Python and the profiler)."
    )


TABLES = {
    "one_token": ("One-token edits in a 2,000-token held-out PEP (one window)", one_token_table),
    "counts": ("What one single-token edit asks of the device (per-edit medians)", counts_table),
    "exactness": ("Exactness", exactness_line),
    "revisions": (
        "Real revisions: held-out PEP pairs, the paper's protocol (per-pair medians of ratios)",
        revisions_table,
    ),
    "server": ("Keystroke-to-publish through `vq-lsp serve`, one torch thread", server_table),
    "profile": ("Where an edit's time goes (torch.profiler; ops in profile_ops.txt)", profile_line),
    "graph_memory": ("What graphed sizing's captures take in the server's document", graph_memory.line),
}


def report(results: dict) -> str:
    f = results["facts"]
    lines = [
        "# The engine on one device",
        "",
        f"`{' '.join(results['command'])}`",
        "",
        f"Device: {f['name']} ({f['device']}), dtype {f['dtype']}, torch {f['torch']}"
        + (f", CUDA {f['cuda']}" if f["cuda"] else "")
        + f", {f['threads']} CPU thread; model: {f['model']}; the device's sizing: {f['default_sizing']}. "
        "Every baseline ran in the same process on the same device and dtype.",
    ]
    for name, (title, table) in TABLES.items():
        if name in results:
            lines += ["", f"## {title}", "", _failed(results[name]) or table(results[name])]
    lines += ["", "Seconds per section: " + ", ".join(f"{k} {v}" for k, v in results.get("seconds", {}).items()), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
