"""What a student is distilled from: a teacher's next-token targets, full or top-k, and their KL term.

Why a module: distillation has two kinds of teacher. The project's OPT is converted into the
student and gives full logits plus every layer's residual stream (for the cosine alignment term).
A pretrained teacher of another architecture (``teacher_pretrained.py``) shares only the
vocabulary, so it gives logits alone, kept as its top k per position: with 49,152 tokens the full
distribution of a long batch is gigabytes, and nearly all of its mass sits in the top few dozen.
Both are called as ``targets(ids, positions)`` under no_grad and bf16 autocast on CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class TopK:
    """The teacher's k largest logits per position and their token ids, both (B, T, k)."""

    values: torch.Tensor
    indices: torch.Tensor


@dataclass
class TeacherTargets:
    logits: torch.Tensor | TopK  # (B, T, V) or top-k
    layers: list[torch.Tensor] | None  # residual after each layer, (B, T, d) each; None: not comparable


class OPTTargets:
    """The converted dense OPT teacher (softmax attention, no VQ): full logits and every layer's output."""

    def __init__(self, dense) -> None:
        self.dense = dense

    def __call__(self, ids: torch.Tensor, pos: torch.Tensor) -> TeacherTargets:
        out = self.dense(ids, pos)
        return TeacherTargets(self.dense.lm_logits(out.hidden).float(), [x.float() for x in out.layer_outputs])


class PretrainedTargets:
    """A transformers causal LM at its own contiguous positions (the student's sampled pool positions
    only fix the order, which is the same); top-k logits only."""

    def __init__(self, model: torch.nn.Module, top_k: int) -> None:
        self.model, self.top_k = model, top_k

    def __call__(self, ids: torch.Tensor, pos: torch.Tensor) -> TeacherTargets:
        from .teacher_pretrained import teacher_logits

        logits = teacher_logits(self.model, ids)  # (B, T, V)
        top = logits.topk(min(self.top_k, logits.shape[-1]), dim=-1)
        return TeacherTargets(TopK(top.values.float(), top.indices), None)


def soft_target_kl(student_logits: torch.Tensor, target: torch.Tensor | TopK, temp: float) -> torch.Tensor:
    """KL(teacher || student) at temperature ``temp``, scaled by temp^2 (DistilBERT), mean over positions.

    With top-k targets the teacher's distribution is its softmax over those k tokens, and the student's
    log-probabilities (normalised over the whole vocabulary) are read at the same tokens, so mass the
    student puts outside the teacher's top k is penalised too.
    """
    log_q = F.log_softmax(student_logits / temp, -1)  # (B, T, V)
    if isinstance(target, TopK):
        log_p = F.log_softmax(target.values / temp, -1)  # (B, T, k)
        per_pos = (log_p.exp() * (log_p - log_q.gather(-1, target.indices))).sum(-1)  # (B, T)
        return per_pos.mean() * temp**2
    log_p = F.log_softmax(target / temp, -1)
    return F.kl_div(log_q.flatten(0, 1), log_p.flatten(0, 1), log_target=True, reduction="batchmean") * temp**2
