"""A fresh VQ-OPT student for a teacher of another architecture: its shape comes from flags.

Why: an OPT teacher is converted weight for weight (``inference.load_hf_opt``), but a Llama such as
SmolLM2 (RMSNorm, rotary positions, grouped key/value heads, SwiGLU) has no weights the engine's
OPT layers can take. The student therefore starts from random weights in the shape asked for
(width, layers, attention heads, FFN width, VQ heads, window) with the teacher's vocabulary, and
only its token embeddings (also its tied LM head) start from the teacher's: copied when the
widths match, otherwise projected onto the teacher embeddings' top principal directions (a
narrower student keeps the most variance a linear map of that width can), or zero-padded when
the student is wider; then scaled to the student's initial weight scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .tokenizer import BOS_ID, EOS_ID, PAD_ID

INIT_STD = 0.02  # VQOPT's initialisation of every linear and embedding weight
POOL_PER_WINDOW = 100  # the position pool is 100 x the window, as for converted OPT checkpoints


def add_flags(p) -> None:
    """``vq-train distill``'s options for a teacher of another architecture (refused with an OPT teacher,
    whose shape the student keeps)."""
    from inference import argtypes as T

    p.add_argument("--d", type=T.positive_int, default=None, help="student width (pretrained teacher; default 256)")
    p.add_argument("--layers", type=T.positive_int, default=None, help="student layers (default 4)")
    p.add_argument("--heads", type=T.positive_int, default=None, help="student attention heads (default 4)")
    p.add_argument("--ffn", type=T.positive_int, default=None, help="student FFN width (default 4 x --d)")
    p.add_argument("--top-k", type=T.positive_int, default=64, help="teacher logits kept per position (pretrained)")
    p.add_argument(
        "--vq-start",
        type=T.non_negative_int,
        default=0,
        help="pretrained teacher: distil this many steps without VQ, then k-means the codebooks",
    )


SHAPE_DEFAULTS = {"d": 256, "layers": 4, "heads": 4}
SHAPE_FLAGS = ("d", "layers", "heads", "ffn", "vq_start")


def check_flags(args, pretrained: bool) -> str | None:
    """Fill in the shape defaults for a pretrained teacher; the error message for flags that do not apply."""
    if not pretrained:
        given = [f for f in SHAPE_FLAGS if getattr(args, f) not in (None, 0)]
        if given:
            return (
                f"argument --{given[0].replace('_', '-')}: an OPT teacher is converted in its own shape; "
                f"student shape flags apply to a teacher of another architecture"
            )
        return None
    if args.tokenizer is not None:
        return "argument --tokenizer: a student of a pretrained teacher uses the teacher's tokenizer"
    for name, value in SHAPE_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.ffn = args.ffn or 4 * args.d
    if args.d % args.heads:
        return f"argument --heads: {args.heads} heads do not divide --d {args.d}"
    if args.d % args.vq_heads:
        return f"argument --vq-heads: {args.vq_heads} VQ heads do not divide --d {args.d}"
    if args.seq > args.window:
        return f"argument --seq: {args.seq} tokens do not fit the --window {args.window}"
    return None


@dataclass(frozen=True)
class StudentShape:
    """The flags that shape a student: ``vq-train distill --d --layers --heads --ffn --vq-heads --window``."""

    d: int
    layers: int
    heads: int
    ffn: int
    vq_heads: int
    window: int
    scale: float


def student_config(shape: StudentShape, vocab_size: int):
    from inference import VQOPTConfig

    return VQOPTConfig(
        vocab_size=vocab_size,
        hidden_size=shape.d,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        ffn_dim=shape.ffn,
        max_position_embeddings=shape.window,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        vq_heads=shape.vq_heads,
        position_pool=POOL_PER_WINDOW * shape.window,
        position_repeat=POOL_PER_WINDOW,
        window_tokens=shape.window,
        attention="gelu",
        attention_scale=shape.scale,
        vq=True,
    )


@torch.no_grad()
def project_embeddings(teacher: torch.Tensor, d: int) -> tuple[torch.Tensor, str]:
    """Teacher embeddings (V, D) -> (V, d) and how: copied, principal-direction projection, or zero-padded."""
    v, width = teacher.shape
    teacher = teacher.float()
    if d == width:
        return teacher.clone(), "copied"
    if d > width:
        return torch.cat([teacher, teacher.new_zeros(v, d - width)], dim=1), f"zero-padded from {width}"
    centred = teacher - teacher.mean(0, keepdim=True)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)  # vh (D, D), rows: principal directions
    kept = float(s[:d].pow(2).sum() / s.pow(2).sum())
    how = f"projected from {width} on the top {d} principal directions ({100 * kept:.0f}% variance)"
    return teacher @ vh[:d].T, how


def build_student(shape: StudentShape, teacher_embeddings: torch.Tensor, teacher_document_id: int):
    """(VQOPT in training mode, how its embeddings started). The student's BOS row takes the teacher's
    document token row, since the student's BOS plays that token's part for the teacher."""
    from inference import VQOPT

    torch.manual_seed(0)
    net = VQOPT(student_config(shape, teacher_embeddings.shape[0]))
    table, how = project_embeddings(teacher_embeddings, shape.d)
    table[BOS_ID] = table[teacher_document_id]
    # the student's initial scale (std 0.02, as every other weight): the tied LM head then starts near
    # uniform instead of confidently wrong, and the residual stream keeps the balance OPT's init gives it
    table *= INIT_STD / table.std().clamp(min=1e-12)
    net.decoder.embed_tokens.weight.data.copy_(table)
    return net.train(), how
