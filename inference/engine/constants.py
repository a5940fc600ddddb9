"""LayerConstants: the per-model tables the engine reads, computed once when a model loads.

Codebook views, the fused q|k|v weights, the transposed finish weights, the stacked embedding
table and the LM head, in the forms the update's kernels take them. Nothing here changes
after loading except `sizing`, `dense` and `keep_outputs`, which say how this model's windows
are updated, built and laid out.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..config import VQOPTConfig
from ..kernels import parked_codes, position_rows
from ..model import VQOPT
from .lm_head import LMHead
from .policy import EXACT, Sizing


class LayerConstants:
    """Per-layer codebook views and fused weights the engine needs, computed once per model.

    Row layouts of the engine's state (per layer; G segments of width w, a segment lying in one
    attention head and one VQ head):
      qkv:   q (d) | k (d) | v (d)                 one fused matmul per dirty row
      sums:  p^0 (K) | p^1 (K) | ... | u (h)       with VQ: p^j = s^j . codes of VQ head j, and
                                                   u_j >= |s^j|, the tie guard's scale
             s (d)                                 without VQ: the layer's attention output
    An update projects its changed keys' v on the codes (v_g . codes of g, G x w x K per key), so
    that one batched product of attention weights with them moves the code projections of every
    query; a VQ head's p moves by the sum of its segments' part. u grows by a bound of |delta s^j|
    (the triangle inequality, from |weights| and the norm of each key's v within each attention
    head and VQ head) and is reset to |s^j| whenever a row is recomputed in full: an upper bound
    only widens the guard."""

    def __init__(self, net: VQOPT) -> None:
        cfg = net.config
        heads, h = cfg.num_attention_heads, cfg.vq_heads
        self.segments = heads * h // math.gcd(heads, h)
        d, K = cfg.hidden_size, cfg.vq_codes
        self.proj_width = h * K if cfg.vq else 0  # where u starts in a sums row
        width = self.sum_width = self.proj_width + h if cfg.vq else d  # C: the width of a sums row
        # the block-diagonal move (H m keys x C) costs H m C per affected row, the per-head one m d + d C
        self.block_keys = d * width / max(1, heads * width - d)
        self.vq_heads_idx = torch.arange(h)
        self.code_sq: list[torch.Tensor] = []  # (h, K) per layer
        self.code_sq_max: list[torch.Tensor] = []  # (h,) per layer: the tie guard's code term
        # (d, C) per layer: s -> its sums row (codebooks for p, zeros for u; the identity without VQ)
        self.sum_map: list[torch.Tensor] = []
        self.sum_map_scaled: list[torch.Tensor | None] = []  # times the attention scale, exact for a power of two
        self.qkv_weight: list[torch.Tensor] = []  # (d, 3d) per layer
        self.qkv_bias: list[torch.Tensor | None] = []  # (3d,) or None
        self.q_scaled = math.log2(cfg.head_dim) % 2 == 0  # hd^-0.5 is a power of two
        self.finish: list[tuple] = []  # out_proj, fc1, fc2: weights transposed (views, as F.linear uses them), biases
        self.scale_exact = math.log2(cfg.attention_scale).is_integer()  # c is a power of two
        self.dense = None  # the full pass builds and verify run, (ids, positions) -> ForwardOutput; None: torch's
        self.sizing: Sizing = EXACT  # see policy.SIZINGS; LoadedModel.use_sizing sets it (auto: device_sizing)
        self.keep_outputs = False  # see policy.LAYOUTS: "full" keeps every layer's output
        # the layer-0 input as one bag per row: coarse[p // r + 2] + fine[p % r], then + token, the
        # same two additions in the same order as VQOPT.embed (exact), from one stacked table
        dec = net.decoder
        self.position_repeat = cfg.position_repeat
        self.embed_offsets = (
            dec.embed_positions.weight.shape[0],
            dec.embed_positions.weight.shape[0] + dec.embed_positions_fine.weight.shape[0],
        )
        self.lm_head = LMHead(dec.embed_tokens.weight.detach())  # tied to the token embeddings
        self.embed_table = torch.cat(
            [dec.embed_positions.weight, dec.embed_positions_fine.weight, dec.embed_tokens.weight]
        ).detach()
        table = self.embed_table
        dims = torch.arange(d, device=table.device)
        self.head_mask = (
            (dims // cfg.head_dim == torch.arange(heads, device=table.device).unsqueeze(1)).to(table.dtype).unsqueeze(1)
        )  # (H, 1, d): head h's dims
        for layer in net.layers:
            self._add_layer(cfg, layer, width, table)

    def _add_layer(self, cfg: VQOPTConfig, layer: torch.nn.Module, width: int, table: torch.Tensor) -> None:
        """One layer's codebook views, sums map, fused q|k|v weights and finish weights."""
        d, h, K = cfg.hidden_size, cfg.vq_heads, cfg.vq_codes
        dh = d // h
        att = layer.self_attn
        cb = layer.vq.codebook.detach()  # (h, K, d/h)
        self.code_sq.append(cb.pow(2).sum(-1))
        # over the codes a sum can pick: a parked code, 1e8 per coordinate squared, would make every row a tie
        self.code_sq_max.append(self.code_sq[-1].masked_fill(parked_codes(cb), 0).max(-1).values)
        if cfg.vq:
            sum_map = torch.zeros(d, width, dtype=table.dtype, device=table.device)
            for j in range(h):
                sum_map[j * dh : (j + 1) * dh, j * K : (j + 1) * K] = cb[j].t()
        else:
            sum_map = torch.eye(d, dtype=table.dtype, device=table.device)
        self.sum_map.append(sum_map)
        self.sum_map_scaled.append(self.sum_map[-1] * cfg.attention_scale if self.scale_exact else None)
        projs = (att.q_proj, att.k_proj, att.v_proj)
        cols = [lin.weight.detach().t() for lin in projs]
        bias = [lin.bias.detach() for lin in projs] if att.v_proj.bias is not None else []
        qscale = cfg.head_dim**-0.5
        if self.q_scaled:  # a power of two: scaling the weights is exact, the same q as the dense pass
            cols[0] = cols[0] * qscale
            if bias:
                bias[0] = bias[0] * qscale
        fin = []
        for lin in (att.out_proj, layer.fc1, layer.fc2):
            fin += [lin.weight.detach().t(), None if lin.bias is None else lin.bias.detach()]
        self.finish.append(tuple(fin))
        self.qkv_weight.append(torch.cat(cols, 1).contiguous())
        self.qkv_bias.append(torch.cat(bias) if bias else None)

    @property
    def lm_weight(self) -> torch.Tensor:
        """The tied LM head's weight (vocab_size, d): the token embeddings."""
        return self.lm_head.weight

    def embed_rows(self, ids: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Rows of embed_table a token at a position sums, in the order VQOPT.embed adds them: (n, 3)."""
        fine_at, tok_at = self.embed_offsets
        coarse_row, fine_row = position_rows(pos, self.position_repeat)
        return np.stack([coarse_row, fine_at + fine_row, tok_at + ids], 1)

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        """The first layer's input from embed_rows rows (n, 3): VQOPT.embed, bit for bit: a gather and
        a sum over the three rows in order (F.embedding_bag adds the same way but dispatches 3 ops)."""
        return self.embed_table[rows].sum(1)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """VQOPT.lm_logits of a few rows (r, d): see LMHead.logits."""
        return self.lm_head.logits(hidden)

    def lm_pad(self, rows: int, like: torch.Tensor) -> int:
        """Rows to add for the LM head's fastest form: see LMHead.pad."""
        return self.lm_head.pad(rows, like)

    def to(self, device: torch.device) -> LayerConstants:
        """Pick the LM head's form for the device the model lives on (the sizing is the loaded model's:
        LoadedModel.use_sizing)."""
        self.lm_head.place(torch.device(device).type == "cpu")
        self.vq_heads_idx = self.vq_heads_idx.to(device)
        return self


def device_sizing(device: torch.device | str) -> Sizing:
    """The sizing a model on `device` runs unless one is named (the `auto` sizing). Exact sizing on
    every device: on an H100 it beat bucketed sizing too (one-token edits in a 2,000-token document,
    float32: p50 15.3 against 24.2 ms, `python -m benchmarks.gpu_session`), since an edit there is
    bound by the host's launches, not by host reads. Bucketed sizing is the shape-stable path that
    CUDA graphs need. Graphed sizing typed faster through the server on one H200 (p50 30.4 against
    35.6 ms), but the GPU memory its captures take is unmeasured, so it is chosen only by name."""
    return EXACT
