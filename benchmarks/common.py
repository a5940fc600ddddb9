"""Helpers shared by the benchmark scripts: data location, revision pairs, timing, tables."""

from __future__ import annotations

import argparse
import functools
import gzip
import inspect
import json
import os
import re
import shlex
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


QUOTES = ('"', "“", "”", "‘")
# A play's speech: the speaker's name in capitals, then a full stop ("NIJO. That without I'm all fair").
SPEAKER_TAG = re.compile(r"\s*[A-Z][A-Z'\-]+(?:\s[A-Z][A-Z'\-]+)*\.\s")


def is_narration(paragraph: str) -> bool:
    """Whether a paragraph of fiction is the narrator's: no quotation marks and no speaker's name
    at its head. Why: a character's speech, quoted in a novel or tagged with the speaker in a play,
    may well carry an opinion, so the benchmarks count tone on narration separately."""
    return not any(q in paragraph for q in QUOTES) and SPEAKER_TAG.match(paragraph) is None


def data_dir(explicit: str | None = None) -> Path:
    """--data, else $VQ_LSP_DATA, else the data folder beside the repository (its developers' layout)."""
    return Path(explicit or os.environ.get("VQ_LSP_DATA") or REPO.parent / "shared" / "data")


def model_folder(name: str) -> Path:
    """A model folder named on a benchmark's command line; `bundled` is the model in the package."""
    from inference import DEFAULT_MODEL_DIR

    return Path(DEFAULT_MODEL_DIR if name == "bundled" else name)


def add_models(parser, first: str = "model folders") -> None:
    """The positional model list and --label of the benchmarks that compare models side by side."""
    parser.add_argument("models", nargs="+", help=f"{first}, or 'bundled' for the model in the package")
    parser.add_argument("--label", nargs="+", help="a short name per model (default: folder names)")


def labelled_models(args) -> dict[str, Path]:
    """add_models' arguments as {label: model folder}, each checked to be a model folder."""
    labels = args.label or [Path(m).name for m in args.models]
    if len(labels) != len(args.models) or len(set(labels)) != len(labels):
        raise SystemExit("--label: one distinct name per model")
    folders = [model_folder(m) for m in args.models]
    for folder in folders:
        if not (folder / "config.json").is_file():
            raise SystemExit(f"{folder}: not a model folder")
    return dict(zip(labels, folders))


def side_by_side_parser(doc: str, name: str) -> argparse.ArgumentParser:
    """The arguments of every benchmark that compares models side by side (`add_models`), with
    --seed, --threads, --data, --name (the results files NAME.md, NAME.json) and --out; the
    benchmark adds its own and hands the parser to `run_side_by_side`."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    add_models(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--name", default=name, help="results file name (NAME.md, NAME.json)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    return p


def side_by_side_report(title: str, command: str, about: str, table: str, models: dict[str, str]) -> str:
    """A side-by-side benchmark's Markdown report: its title, the command, what was measured, the
    table, and each label's model folder."""
    folders = ", ".join(f"{label}: `{folder}`" for label, folder in models.items())
    return "\n".join([f"# {title}", "", f"`{command}`", "", about, "", table, "", f"Models: {folders}", ""])


def run_side_by_side(args, argv: list[str], run, report) -> int:
    """The end of a side-by-side benchmark's main: `run(args)` (argv kept on args for the report's
    command line), then NAME.json and NAME.md written and the report printed."""
    args.argv = argv
    results = run(args)
    write_results(args.out, args.name, results, report(results))
    return 0


def recorded_path(path: str | Path) -> str:
    """A path as a results file records it, never a machine's own: relative to the repository,
    under $VQ_LSP_DATA or beside it (the models folder), else only that it lies elsewhere."""
    path = Path(path).resolve()
    data = data_dir().resolve()
    for root, name in ((REPO.resolve(), None), (data, "$VQ_LSP_DATA"), (data.parent, "$VQ_LSP_DATA/..")):
        try:
            rel = path.relative_to(root)
        except ValueError:
            continue
        return str(rel) if name is None else f"{name}/{rel}"
    return "<outside the repository>"


def recorded_command(argv: list[str]) -> list[str]:
    """A command line as a results file records it: absolute paths as `recorded_path` gives them."""
    return [recorded_path(a) if a.startswith("/") else a for a in argv]


def command_line(benchmark: str, argv: list[str]) -> str:
    """`python -m benchmarks.BENCHMARK ARGS` as a results file records it (paths as `recorded_command`)."""
    return shlex.join(["python", "-m", f"benchmarks.{benchmark}", *recorded_command(argv)])


def revision_histories(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(document name, texts oldest first) from a revisions JSONL file."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield row["doc"], [r["text"] for r in row["revisions"]]


def timed(fn: Callable[[], object], device: torch.device) -> tuple[object, float]:
    """Run fn and return (result, seconds), synchronising CUDA so the time is real."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def median(xs):
    return statistics.median(xs)


def percentile(xs, q: float):
    """The q-quantile of xs by nearest rank (an observed value): the one percentile every benchmark uses."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def p95(xs):
    return percentile(xs, 0.95)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


# ----------------------------------------------------------------- the three ways to recompute
def write_results(folder: str | Path, name: str, results, text: str) -> None:
    """A benchmark's outputs: NAME.json (every record) and NAME.md (the report), then the report on stdout."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{name}.md").write_text(text)
    print(text)


def run_benchmark(name: str, parser, argv: list[str], run, report) -> int:
    """The common end of a benchmark's main: --model, --data and --out added to `parser`, the
    arguments parsed (argv kept on them for the report), `run(args)`, then NAME.json + NAME.md."""
    parser.add_argument("--model", help="model folder (default: the bundled model)")
    parser.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help=f"folder for {name}.{{md,json}}")
    args = parser.parse_args(argv)
    args.argv = argv
    results = run(args)
    write_results(args.out, name, results, report(results))
    return 0


def load_for_window(model_dir, window: int, device, dtype, layout: str = "full", context: str = "window"):
    """Load a model and let it serve `window` tokens (same weights; the benchmark's window); `context`:
    what a token sees (inference.CONTEXTS)."""
    import inference

    model = inference.load_model(model_dir, device=device, dtype=dtype, layout=layout, context=context)
    if model.config.window_tokens != window:
        model.net.config = model.config.replace(window_tokens=window)
    return model


def dense_pass(model, token_ids: list[int]):
    """What the engine's verify() runs: a dense forward over BOS + tokens, both heads.

    Returns (LM log-sum-exp per row, class log-probabilities per row)."""
    from inference.positions import spread_positions

    cfg, dev = model.config, model.device
    ids = torch.tensor([[cfg.bos_token_id, *token_ids]], device=dev)
    pos = spread_positions(ids.shape[1], cfg.position_pool).to(dev).unsqueeze(0)
    with torch.no_grad():
        out = model.net(ids, pos)
        return torch.logsumexp(model.net.lm_logits(out.hidden), -1), torch.log_softmax(out.cls_logits, -1)


def softmax_twin(cfg, device, dtype):
    """A plain softmax OPT (transformers) of the same shape: its speed, not its weights, is compared."""
    from transformers import OPTConfig, OPTForCausalLM

    hf = OPTConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        ffn_dim=cfg.ffn_dim,
        max_position_embeddings=cfg.window_tokens,
        word_embed_proj_dim=cfg.hidden_size,
    )
    return OPTForCausalLM(hf).to(device=device, dtype=dtype).eval()


@functools.cache
def _cache_keyword(model_class: type) -> str:
    """The keyword `model_class.forward` takes its KV cache under: `cache` (newer transformers releases,
    where `past_key_values` is deprecated) or `past_key_values`. Looked up once per class, outside
    any timed call (inspecting the signature costs tens of microseconds)."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def cached_call(twin, ids: torch.Tensor, cache):
    """twin(ids) reading and extending `cache`, under the keyword the installed transformers names it."""
    return twin(input_ids=ids, use_cache=True, **{_cache_keyword(type(twin)): cache})


def prefix_reuse_seconds(twin, cfg, token_ids: list[int], keep: int, device) -> float:
    """Time to recompute rows keep.. of BOS + tokens with the first `keep` rows' KV cached."""
    from transformers import DynamicCache

    ids = torch.tensor([[cfg.bos_token_id, *token_ids]], device=device)
    keep = max(1, min(keep, ids.shape[1] - 1))
    with torch.no_grad():
        cache = DynamicCache()
        cached_call(twin, ids[:, :keep], cache)
        _, secs = timed(lambda: cached_call(twin, ids[:, keep:], cache), device)
    return secs


def prefix_macs(cfg, n: int, keep: int) -> int:
    """MACs of recomputing rows keep..n-1 (of n, BOS included) with the first `keep` cached."""
    from inference.costs import causal_pairs, head_row_macs, row_macs

    keep = max(1, min(keep, n - 1))
    m = n - keep
    pairs = causal_pairs(n) - causal_pairs(keep)
    return cfg.num_hidden_layers * (m * row_macs(cfg) + 2 * pairs * cfg.hidden_size) + m * head_row_macs(cfg)


# ----------------------------------------------------------------- dispatch counting
VIEW_OPS = (
    "view",
    "_unsafe_view",
    "select",
    "slice",
    "unsqueeze",
    "squeeze",
    "permute",
    "transpose",
    "t",
    "expand",
    "alias",
    "as_strided",
    "detach",
    "_reshape_alias",
    "split",
    "unbind",
    "unflatten",
    "narrow",
)
SYNC_OPS = (
    "_local_scalar_dense",
    "nonzero",
    "unique",
    "masked_select",
    "_unique2",
    "equal",
    "is_nonzero",
    "repeat_interleave",
)


class DispatchCounter:
    """Count what one piece of code issues: dispatched torch ops, and host syncs.

        with DispatchCounter() as c:
            doc.apply(splices)
        c.ops, c.launches, c.syncs

    ops: every op the dispatcher sees (a TorchDispatchMode sees them all); launches: those
    that are not views (about one kernel launch each on CUDA); syncs: ops that make the host wait
    for the device (.item(), nonzero, unique, ...; `count_nonzero` is not one), plus the reads that
    bypass the dispatcher (Tensor.tolist, Tensor.numpy), counted by wrapping them while active."""

    def __init__(self) -> None:
        self.ops = self.launches = self.syncs = 0
        self.by_op: dict[str, int] = {}

    def __enter__(self) -> DispatchCounter:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.__name__
                base = name.split(".")[0]
                counter.ops += 1
                counter.by_op[name] = counter.by_op.get(name, 0) + 1
                if base not in VIEW_OPS:
                    counter.launches += 1
                if base in SYNC_OPS or base.startswith("_local_scalar") or (base == "nonzero"):
                    counter.syncs += 1
                return func(*args, **(kwargs or {}))

        self._saved = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy")}
        for name, fn in self._saved.items():
            setattr(torch.Tensor, name, self._wrap(fn))
        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def _wrap(self, fn):
        counter = self

        def wrapped(t, *args, **kwargs):
            counter.syncs += 1
            return fn(t, *args, **kwargs)

        return wrapped

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        for name, fn in self._saved.items():
            setattr(torch.Tensor, name, fn)


def cuda_profile(fn: Callable[[], object]) -> tuple[int, float]:
    """(kernel launches, GPU-busy seconds) of fn on CUDA, from torch.profiler (CUDA only)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(getattr(e, "device_time", getattr(e, "cuda_time", 0.0)) for e in kernels) * 1e-6
    return len(kernels), busy
