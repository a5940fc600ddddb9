"""VQ-OPT: an OPT decoder whose attention is GELU-weighted and vector-quantized.

This file holds the parameters (with Hugging Face OPT's names, so checkpoints load without
renaming) and the dense batched forward pass, used by training, by the builds of the engine's
window states and by `verify()`. It knows nothing about documents, edits or tokenization: token
ids and pool positions in, hidden states and per-token logits out. The incremental engine does
not call the per-row pieces (`attn_inputs`, `attention_sum`, `finish`): it runs the same formulas
on gathered rows with fused or pre-transposed weights (inference/engine/rows.py says where and
why) and adds `embed`'s three rows in the same order from one stacked table. It does call
`heads` (final LayerNorm, classification head) and the code distances of inference/kernels.py.

Per layer (pre-LayerNorm, ReLU FFN):
    a = LN1(x);  q, k, v = a Wq * hd^-0.5, a Wk, a Wv
    s = sum over keys with pos_i <= pos_n of w(q_n . k_i) v_i   (w: softmax, or c * gelu)
    z = VQ(s)   (or z = s with VQ off)
    x' = x + Wo z;  y = x' + FFN(LN2(x'))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import kernels
from .config import VQOPTConfig

Quantizer = Callable[[int, torch.Tensor], "tuple[torch.Tensor, torch.Tensor]"]


@dataclass
class LayerTrace:
    """Everything the incremental engine keeps for one layer (collected on request)."""

    x: torch.Tensor  # (B, T, d) layer input
    q: torch.Tensor  # (B, T, d) scaled queries
    k: torch.Tensor  # (B, T, d)
    v: torch.Tensor  # (B, T, d)
    s: torch.Tensor  # (B, T, d) attention sum before VQ
    codes: torch.Tensor | None  # (B, T, h)


@dataclass
class ForwardOutput:
    hidden: torch.Tensor  # (B, T, d) after the final LayerNorm
    cls_logits: torch.Tensor  # (B, T, num_labels) per-token class logits
    layer_outputs: list[torch.Tensor] = field(default_factory=list)  # residual after each layer
    pre_vq: list[torch.Tensor] = field(default_factory=list)  # s per layer
    codes: list[torch.Tensor | None] = field(default_factory=list)  # (B, T, h) per layer
    traces: list[LayerTrace] | None = None


class Attention(nn.Module):
    def __init__(self, cfg: VQOPTConfig) -> None:
        super().__init__()
        d, bias = cfg.hidden_size, cfg.enable_bias
        self.q_proj = nn.Linear(d, d, bias=bias)
        self.k_proj = nn.Linear(d, d, bias=bias)
        self.v_proj = nn.Linear(d, d, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)


class VectorQuantizer(nn.Module):
    """Multi-head codebook: h VQ heads, each with `vq_codes` vectors of width d / h."""

    def __init__(self, cfg: VQOPTConfig) -> None:
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(cfg.vq_heads, cfg.vq_codes, cfg.vq_dim) * 0.02)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: VQOPTConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.cfg = cfg
        self.self_attn = Attention(cfg)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.fc1 = nn.Linear(d, cfg.ffn_dim, bias=cfg.enable_bias)
        self.fc2 = nn.Linear(cfg.ffn_dim, d, bias=cfg.enable_bias)
        self.final_layer_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.vq = VectorQuantizer(cfg)

    def attn_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """LN1 then the q, k, v projections of any set of rows; q carries OPT's hd^-0.5."""
        a = self.self_attn_layer_norm(x)
        q = self.self_attn.q_proj(a) * self.cfg.head_dim**-0.5
        return q, self.self_attn.k_proj(a), self.self_attn.v_proj(a)

    def attention_sum(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """s for queries q over keys k, v; mask (..., Tq, Tk) says which keys each query sees."""
        heads = self.cfg.num_attention_heads
        qh, kh, vh = (kernels.split_heads(t, heads) for t in (q, k, v))  # (..., H, T, hd)
        scores = qh @ kh.transpose(-1, -2)  # (..., H, Tq, Tk)
        mask = mask.unsqueeze(-3)
        if self.cfg.attention == "gelu":
            w = kernels.gelu_weights(scores, mask, self.cfg.attention_scale)  # may overwrite scores
        else:
            w = kernels.softmax_weights(scores, mask)
        del scores  # the weights' (H, T, T) is the largest tensor of a pass: hold one at a time
        return kernels.merge_heads(w @ vh)  # (..., Tq, d)

    def finish(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Output projection, residual and FFN: the layer's output rows."""
        x = x + self.self_attn.out_proj(z)
        return x + self.fc2(F.relu(self.fc1(self.final_layer_norm(x))))


class Decoder(nn.Module):
    def __init__(self, cfg: VQOPTConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, d, padding_idx=cfg.pad_token_id)
        self.embed_positions = nn.Embedding(cfg.coarse_positions, d)  # coarse: p // r + 2
        self.embed_positions_fine = nn.Embedding(cfg.position_repeat, d)  # fine: p % r
        nn.init.zeros_(self.embed_positions_fine.weight)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.final_layer_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)


class VQOPT(nn.Module):
    """OPT decoder + VQ attention + tied LM head + per-token classification head."""

    def __init__(self, cfg: VQOPTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.decoder = Decoder(cfg)
        self.score_head = nn.Linear(cfg.hidden_size, cfg.num_labels)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)) and module is not self.decoder.embed_positions_fine:
                nn.init.normal_(module.weight, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    @property
    def layers(self) -> nn.ModuleList:
        return self.decoder.layers

    def embed(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token plus positional embedding of any set of rows: the layer-0 input."""
        dec = self.decoder
        pos = kernels.position_embedding(
            dec.embed_positions.weight, dec.embed_positions_fine.weight, positions, self.config.position_repeat
        )
        return dec.embed_tokens(ids) + pos

    def reads_order_only(self) -> bool:
        """True when neither position table can tell two positions apart (every row equal): then a
        text's codes and scores depend on its tokens' order alone, never on the gapped positions
        an edit history left (training/order_only.py makes such a model)."""
        dec = self.decoder
        return all(bool((t == t[:1]).all()) for t in (dec.embed_positions.weight, dec.embed_positions_fine.weight))

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits from final hidden states; the head is tied to the token embeddings."""
        return F.linear(hidden, self.decoder.embed_tokens.weight)  # (..., V)

    def heads(self, x_last: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Final LayerNorm and the classification head: (hidden, cls_logits)."""
        hidden = self.decoder.final_layer_norm(x_last)
        return hidden, self.score_head(hidden)

    def forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor | None = None,
        *,
        vq: bool | Sequence[bool] | None = None,
        quantizer: Quantizer | None = None,
        collect: bool = False,
    ) -> ForwardOutput:
        """Dense pass over a batch. ids, positions: (B, T) long; valid: (B, T) bool padding mask."""
        cfg = self.config
        if valid is None:
            valid = torch.ones_like(ids, dtype=torch.bool)
        use_vq = [cfg.vq if vq is None else vq] * cfg.num_hidden_layers if not isinstance(vq, Sequence) else list(vq)
        mask = kernels.causal_mask(positions, positions) & valid.unsqueeze(-2)  # (B, T, T)
        x = self.embed(ids, positions)  # (B, T, d)
        out = ForwardOutput(hidden=x, cls_logits=x, traces=[] if collect else None)
        for i, layer in enumerate(self.layers):
            q, k, v = layer.attn_inputs(x)
            s = layer.attention_sum(q, k, v, mask)  # (B, T, d)
            codes = None
            if use_vq[i]:
                z, codes = (quantizer or _hard_quantizer(layer))(i, s)
            else:
                z = s
            if collect:
                out.traces.append(LayerTrace(x=x, q=q, k=k, v=v, s=s, codes=codes))
            x = layer.finish(x, z)
            out.layer_outputs.append(x)
            out.pre_vq.append(s)
            out.codes.append(codes)
        out.hidden, out.cls_logits = self.heads(x)
        return out


def _hard_quantizer(layer: DecoderLayer) -> Quantizer:
    return lambda _i, s: kernels.quantize(s, layer.vq.codebook)
