"""Pieces every training stage shares: device/AMP choice, schedule, checkpoints, progress.

Why one place: every stage must be seeded, resumable from its last checkpoint and show loss and
tokens/s; doing that once keeps the stages short and makes "resume == uninterrupted" a
property of one function pair (``save_checkpoint``/``load_checkpoint``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from pathlib import Path

import torch
from tqdm import tqdm


def pick_device(name: str | None = None) -> torch.device:
    """The engine's choice (CUDA when present, else CPU), so a model trains where it will be served."""
    from inference import pick_device as engine_pick

    return engine_pick(name or None)


def autocast(device: torch.device):
    """bf16 mixed precision on CUDA; plain fp32 on CPU (CPU autocast is slower here)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def set_threads(n: int | None) -> None:
    """Training jobs run with one thread unless told otherwise, so that several can share a small CPU."""
    if n:
        torch.set_num_threads(n)
        os.environ.setdefault("RAYON_NUM_THREADS", str(n))


def start_run(args) -> Path:
    """What every training stage does first: its thread count and seeds from the command line, and
    its output folder (`args.out`, made if missing), returned."""
    set_threads(args.threads)
    seed_everything(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def warmup_cosine(step: int, total: int, warmup: int, floor: float = 0.1) -> float:
    """LR multiplier: linear warm-up to 1, then cosine decay to ``floor``."""
    if step < warmup:
        return (step + 1) / max(1, warmup)
    t = (step - warmup) / max(1, total - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def set_lr(opt: torch.optim.Optimizer, base_lr: float, mult: float) -> None:
    for group in opt.param_groups:
        group["lr"] = base_lr * mult * group.get("lr_mult", 1.0)


def save_checkpoint(path: Path, **state) -> None:
    """Atomic save: a crash mid-write never leaves a half checkpoint behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict:
    return torch.load(Path(path), map_location="cpu", weights_only=False)


class Progress:
    """tqdm bar plus a JSON-lines log (``log.jsonl``) with loss and tokens/s."""

    def __init__(self, out_dir: Path, total: int, start: int, desc: str, disable: bool = False):
        self.log_path = Path(out_dir) / "log.jsonl"
        self.bar = tqdm(total=total, initial=start, desc=desc, disable=disable, dynamic_ncols=True, mininterval=2.0)
        self.t0 = time.time()
        self.tokens = 0

    def step(self, tokens: int, **metrics) -> None:
        self.tokens += tokens
        rate = self.tokens / max(1e-9, time.time() - self.t0)
        shown = {k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in metrics.items()}
        self.bar.set_postfix(**shown, tok_s=f"{rate:.0f}", refresh=False)
        self.bar.update(1)
        self.rate = rate

    def log(self, **record) -> None:
        record.setdefault("time", time.time())
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self.bar.close()


def write_json(path: Path, obj) -> None:
    Path(path).write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def train_steps(
    args,
    opt: torch.optim.Optimizer,
    params,
    step: int,
    bar: Progress,
    batch_terms,
    *,
    save,
    log_record,
    after_step=None,
    bar_keys=("loss",),
    probe=None,
    net=None,
) -> int:
    """The step loop every stage shares; returns the step reached (``--steps``, or earlier with ``--stop-after``).

    Per step: warm-up + cosine LR, ``batch_terms(step) -> (terms, tokens)`` with ``terms["loss"]``,
    backward, gradients clipped to norm 1 over ``params``, optimizer step, ``after_step()`` (EMA
    codebooks), progress, ``log_record(step, shown)`` every ``--log-every`` steps and at the end,
    ``probe(net)`` every ``--eval-every`` steps where a stage has one, and ``save(step)`` every
    ``--ckpt-every`` steps and where the run stops. Everything a step draws must depend only on
    the step number, which is what makes a resumed run equal an uninterrupted one. With
    ``--max-seconds`` the run also stops (logged and saved) after the step that spends that much
    wall clock, for a machine rented for a fixed time; ``out_of_time`` tells a stage it happened.
    """
    stop = args.steps if args.stop_after is None else min(args.steps, step + args.stop_after)
    budget = getattr(args, "max_seconds", None)
    deadline = None if budget is None else time.monotonic() + budget
    params = list(params)
    while step < stop:
        set_lr(opt, args.lr, warmup_cosine(step, args.steps, args.warmup))
        terms, tokens = batch_terms(step)
        opt.zero_grad(set_to_none=True)
        terms["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if after_step is not None:
            after_step()
        step += 1
        late = deadline is not None and time.monotonic() >= deadline
        shown = {k: float(v.detach()) for k, v in terms.items()}
        bar.step(tokens, **{k: shown[k] for k in bar_keys if k in shown})
        if step % args.log_every == 0 or step == args.steps or late:
            bar.log(**log_record(step, shown))
        if probe is not None and getattr(args, "eval_every", 0) and step % args.eval_every == 0:
            bar.log(stage="finetune", step=step, probe=probe(net))  # held-out accuracy as training goes
            net.train()
        if step % args.ckpt_every == 0 or step == stop or late:
            save(step)
        if late:
            break
    return step


def out_of_time(args, step: int, started: float) -> bool:
    """Did ``train_steps`` (begun at ``time.monotonic() == started``) stop on ``--max-seconds``
    before reaching ``--steps``? Then a stage finishes with what it has."""
    budget = getattr(args, "max_seconds", None)
    return budget is not None and step < args.steps and time.monotonic() - started >= budget
