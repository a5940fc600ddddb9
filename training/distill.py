"""Distil a dense teacher into VQ-OPT (the paper's conversion, plus locality training).

Conversion of an OPT teacher: keep every teacher weight (``inference.load_hf_opt``), switch
attention to GELU with a fixed scale and no normalisation, add h x 64-code VQ after attention.
A pretrained teacher of another architecture (``smollm2``, a .gguf file, or a folder of a
non-OPT transformers model: ``teacher_pretrained.py``) has no weights the student can take: the
student is built fresh in the shape of the ``--d --layers --heads --ffn`` flags with the
teacher's tokenizer and embeddings (``student.py``), and may run its first ``--vq-start`` steps
without VQ so that the codebooks start from trained attention sums. Codebooks start from
k-means one layer at a time (earlier layers already quantised), then follow EMA updates with
dead-code re-seeding; gradients pass VQ through a Gumbel-softmax pseudo-gradient.

Loss, as in DistilBERT: soft-target KL on the teacher's next-token logits (temperature T,
scaled by T^2; a pretrained teacher's top ``--top-k`` only), cosine alignment of every layer's
residual stream with the teacher's (OPT teachers only: the layers of another architecture do not
correspond), and the plain LM loss; plus the locality term of ``locality.py`` (weight 0 = the
ablation). The student's positions are ordered random subsets of the pool; an OPT teacher sees
the same, a rotary teacher its own contiguous positions (the order is the same). With
``--order-only`` both position tables are constant and frozen from the first step: positions
then decide only causality, so any layout an edit history leaves gives the same codes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from . import common
from .data import sample_chunks
from .locality import layer_shares, locality_loss, make_edits
from .order_only import freeze_order_only
from .soft_targets import OPTTargets, PretrainedTargets, soft_target_kl
from .teacher import load_or_collect_tokens
from .token_file import read_token_file
from .tokenizer import BOS_ID, load_tokenizer
from .vq import TrainQuantizer, kmeans_init


def pool_batch(
    tokens: torch.Tensor, batch: int, seq: int, step: int, seed: int, pool: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, positions) (B, seq): BOS + corpus chunk at sampled pool positions; pure in step."""
    from inference.positions import sample_positions

    body = sample_chunks(tokens, batch, seq - 1, step, seed)  # (B, seq-1)
    ids = torch.cat([torch.full((batch, 1), BOS_ID), body], dim=1)  # (B, seq)
    g = torch.Generator().manual_seed(seed * 7_919 + step)
    pos = torch.stack([sample_positions(seq, pool, g) for _ in range(batch)])  # (B, seq)
    return ids, pos


def load_teacher_pair(teacher: Path, vq_heads: int, scale: float, window: int):
    """(student VQ-OPT with GELU attention, frozen dense softmax teacher), both from one OPT folder."""
    from inference import load_hf_opt

    student = load_hf_opt(
        teacher, vq_heads=vq_heads, attention="gelu", attention_scale=scale, window_tokens=window, vq=True
    ).train()
    dense = load_hf_opt(teacher, attention="softmax", vq=False).eval().requires_grad_(False)
    return student, dense


@dataclass
class DistillSetup:
    """A student, what it learns from, its tokenizer, and what the card records about how it started."""

    student: torch.nn.Module
    targets: OPTTargets | PretrainedTargets
    tokenizer: object
    origin: dict


def setup_from_opt(args, device) -> DistillSetup:
    teacher = Path(args.teacher)
    tok = load_tokenizer(Path(args.tokenizer) if args.tokenizer else teacher)
    student, dense = load_teacher_pair(teacher, args.vq_heads, args.scale, args.window)
    origin = {"student": "converted from the teacher"}
    return DistillSetup(student.to(device), OPTTargets(dense.to(device)), tok, origin)


def setup_from_pretrained(args, device, out: Path) -> DistillSetup:
    """A fresh student in the flags' shape, with the teacher's tokenizer (saved to OUT) and embeddings."""
    from .student import StudentShape, build_student
    from .teacher_pretrained import DOCUMENT_ID, load_teacher

    teacher = load_teacher(args.teacher)
    teacher.tokenizer.save(str(out / "tokenizer.json"))
    tok = load_tokenizer(out / "tokenizer.json")  # refuses a vocabulary whose ids 0-3 are not special tokens
    shape = StudentShape(
        d=args.d,
        layers=args.layers,
        heads=args.heads,
        ffn=args.ffn,
        vq_heads=args.vq_heads,
        window=args.window,
        scale=args.scale,
    )
    student, how = build_student(shape, teacher.input_embeddings(), DOCUMENT_ID)
    origin = {
        "student": f"fresh, d={shape.d}, {shape.layers} layers, {shape.heads} heads, ffn {shape.ffn}",
        "embeddings": how,
        "teacher_architecture": teacher.model.config.model_type,
        "top_k": args.top_k,
        "vq_start": args.vq_start,
    }
    return DistillSetup(student.to(device), PretrainedTargets(teacher.model.to(device), args.top_k), tok, origin)


@dataclass(frozen=True)
class Throughput:
    """Training speed of one run of the step loop (a resumed run counts only its own steps)."""

    steps: int
    seconds: float
    tokens_per_step: int  # batch x seq; edited copies for the locality term come on top

    @classmethod
    def measure(cls, steps: int, tokens_per_step: int, seconds: float) -> Throughput:
        return cls(steps, round(seconds, 2), tokens_per_step)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "steps": self.steps,
            "seconds": self.seconds,
            "steps_per_second": round(self.steps_per_second, 3),
            "tokens_per_second": round(self.steps_per_second * self.tokens_per_step),
        }

    def __str__(self) -> str:
        d = self.as_dict()
        return (
            f"{d['steps']} steps in {d['seconds']:.1f} s: {d['steps_per_second']:.2f} steps/s, "
            f"{d['tokens_per_second']:,} tokens/s ({self.tokens_per_step} tokens a step, batch x seq)"
        )


def start_from_model(student, folder) -> None:
    """Continue distilling a VQ model (its weights and codebooks) instead of the teacher's
    conversion: a stronger locality term on a trunk that already reads well. A model that reads
    only the order keeps its position tables constant (frozen), so it still does afterwards."""
    from inference import load_model_folder

    net, _ = load_model_folder(folder)
    if net.config != student.config:
        raise SystemExit(f"--init {folder}: its config differs from the student's (--vq-heads, --scale, --window)")
    student.load_state_dict(net.state_dict())
    if net.reads_order_only():
        freeze_order_only(student)


def distill_losses(student, teacher, quant, ids, pos, args, step: int, vq: bool = True) -> dict[str, torch.Tensor]:
    """Every loss term for one batch; the locality copies ride in the same forward pass.

    ``teacher(ids, pos)`` gives the targets; with ``vq`` False (the steps before ``--vq-start``) the
    student runs without quantisers, so there are no codes and no locality term."""
    b = ids.shape[0]
    with torch.no_grad(), common.autocast(ids.device):  # mixed precision for the dense teacher only
        target = teacher(ids, pos)
    valid = torch.ones_like(ids, dtype=torch.bool)  # (B, T)
    n_edit = min(b, args.edit_batch) if args.locality > 0 and vq else 0
    all_ids, all_pos = ids, pos
    if n_edit:
        g = torch.Generator().manual_seed(args.seed * 31 + step)
        edited, where = make_edits(ids[:n_edit], valid[:n_edit], student.config.vocab_size, g)
        all_ids = torch.cat([ids, edited])  # (B+E, T)
        all_pos = torch.cat([pos, pos[:n_edit]])  # (B+E, T)
    out = student(all_ids, all_pos, quantizer=quant, vq=vq)
    s_logits = student.lm_logits(out.hidden[:b])  # (B, T, V)
    kl = soft_target_kl(s_logits, target.logits, args.temperature)
    ce = F.cross_entropy(s_logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    terms = {"kl": kl, "ce": ce}
    loss = kl
    if target.layers is not None:
        terms["hidden"] = torch.stack(
            [1 - F.cosine_similarity(so[:b], to, dim=-1).mean() for so, to in zip(out.layer_outputs, target.layers)]
        ).mean()
        loss = loss + args.w_hidden * terms["hidden"]
    loss = loss + args.w_ce * ce
    if n_edit:
        terms["locality"] = locality_loss(
            student,
            [s[:n_edit] for s in out.pre_vq],
            [c[:n_edit] for c in out.codes],
            [s[b:] for s in out.pre_vq],
            where,
            valid[:n_edit],
            args.margin,
            args.locality_layers,
            args.margin_unit,
        )
        later = torch.arange(ids.shape[1], device=ids.device)[None] > where[:, None]  # (E, T)
        flips = [(c[:n_edit] != c[b:]).any(-1)[later].float().mean() for c in out.codes]  # per layer
        terms["flip"] = torch.stack(flips).mean().detach()
        loss = loss + args.locality * terms["locality"]
    terms["loss"] = loss
    return terms


def train_distill(args) -> Path:
    """Run (or resume) distillation; writes OUT/model in the model-folder format."""
    from inference import Tokenizer, save_model_folder

    from .teacher_pretrained import is_pretrained_source

    out = common.start_run(args)
    # The VQ student stays in fp32 even on CUDA: its code choices must match the fp32/fp64 engine.
    device = common.pick_device(args.device)
    pretrained = is_pretrained_source(args.teacher)
    setup = setup_from_pretrained(args, device, out) if pretrained else setup_from_opt(args, device)
    student, tok = setup.student, setup.tokenizer
    layer_shares(args.locality_layers, student.config.num_hidden_layers)  # a misfit is refused before any work
    vq_start = args.vq_start if pretrained else 0
    pool = student.config.position_pool
    if getattr(args, "tokens_file", None):
        tokens = read_token_file(args.tokens_file)
    else:
        tokens = load_or_collect_tokens(tok, args.data, "train", args.tokens, out / "tokens_train.pt", args.seed + 1)
    init = getattr(args, "init", None)
    if init:
        start_from_model(student, init)  # before the optimiser: it sees only what still trains
    if getattr(args, "order_only", False):
        freeze_order_only(student)
    quant = TrainQuantizer(
        student, decay=args.ema_decay, pseudo_grad=args.pseudo_grad, tau=args.tau, dead_threshold=args.dead_threshold
    )
    opt = torch.optim.AdamW(
        [p for p in student.parameters() if p.requires_grad], lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01
    )
    ckpt = out / "checkpoint.pt"
    step, t_used = 0, 0.0
    kmeans_report: list | None = None
    if args.resume and ckpt.is_file():
        state = common.load_checkpoint(ckpt)
        student.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        quant.load_state_dict(state["quant"])
        torch.set_rng_state(state["rng"])
        step, kmeans_report, t_used = state["step"], state["kmeans"], state["seconds"]
    elif args.resume:
        print(f"--resume: no checkpoint at {ckpt}, starting fresh")
    if init and kmeans_report is None:  # its codebooks are the start: no k-means
        kmeans_report = [{"from": str(init)}]
        quant.reset_ema()

    def init_codebooks() -> list:
        """k-means on batches the training loop never draws (negative step numbers)."""
        init_batches = [
            tuple(t.to(device) for t in pool_batch(tokens, args.batch, args.seq, -1 - i, args.seed, pool))
            for i in range(args.kmeans_batches)
        ]
        student.eval()
        report = kmeans_init(student, init_batches)
        student.train()
        quant.reset_ema()
        return report

    if kmeans_report is None and step >= vq_start:
        kmeans_report = init_codebooks()

    bar = common.Progress(out, args.steps, step, "distill", disable=args.quiet)
    t0 = time.time()

    def batch_terms(step: int):
        nonlocal kmeans_report
        if kmeans_report is None and step >= vq_start:  # the end of the dense warm-up
            kmeans_report = init_codebooks()
        ids, pos = (t.to(device) for t in pool_batch(tokens, args.batch, args.seq, step, args.seed, pool))
        terms = distill_losses(student, setup.targets, quant, ids, pos, args, step, vq=step >= vq_start)
        return terms, ids.numel()

    first_step, loop_start = step, time.monotonic()
    step = common.train_steps(
        args,
        opt,
        student.parameters(),
        step,
        bar,
        batch_terms,
        after_step=quant.update,
        bar_keys=("loss", "kl"),
        log_record=lambda step, shown: dict(
            stage="distill",
            step=step,
            tokens_seen=step * args.batch * args.seq,
            tok_s=bar.rate,
            reseeded=quant.reseeded,
            **shown,
        ),
        save=lambda step: common.save_checkpoint(
            ckpt,
            model=student.state_dict(),
            opt=opt.state_dict(),
            quant=quant.state_dict(),
            rng=torch.get_rng_state(),
            step=step,
            kmeans=kmeans_report,
            seconds=t_used + time.time() - t0,
        ),
    )
    bar.close()
    throughput = Throughput.measure(step - first_step, args.batch * args.seq, time.monotonic() - loop_start)
    print(f"distill: {throughput}", flush=True)
    timed_out = common.out_of_time(args, step, loop_start)
    if step < args.steps and not timed_out:  # stopped early (--stop-after): the checkpoint is the result
        return ckpt
    if kmeans_report is None:  # --vq-start at or past --steps: the codebooks still need a start
        kmeans_report = init_codebooks()

    card = {
        "distill": {
            "teacher": str(args.teacher),
            "steps": step,
            "tokens_seen": step * args.batch * args.seq,
            "seq": args.seq,
            "batch": args.batch,
            "vq_heads": args.vq_heads,
            "vq_codes": student.config.vq_codes,
            "attention_scale": args.scale,
            "temperature": args.temperature,
            "locality_weight": args.locality,
            "locality_layers": args.locality_layers,
            "reads_order_only": student.reads_order_only(),
            "margin": args.margin,
            "margin_unit": args.margin_unit,
            "pseudo_grad": args.pseudo_grad,
            "kmeans_init": kmeans_report,
            "codes_reseeded": quant.reseeded,
            "dead_threshold": args.dead_threshold,
            "wall_seconds": round(t_used + time.time() - t0, 1),
            "throughput_last_run": throughput.as_dict(),
            **(
                {"stopped_by_max_seconds": {"max_seconds": args.max_seconds, "scheduled_steps": args.steps}}
                if timed_out
                else {}
            ),
            "data": "gutenberg train + imdb train text"
            + (f" (ids from {Path(args.tokens_file).name}, {tokens.numel()} tokens)" if args.tokens_file else ""),
            **setup.origin,
            **({"student": f"continued from {init}"} if init else {}),
        }
    }
    folder = save_model_folder(student.cpu(), Tokenizer(tok), out / "model", card)
    return folder
