"""LMHead: the LM head's weights in the form the device runs fastest (a per-model table).

Kept apart from heads.py, which reads a window's rows through it: the model's constants own one,
and know nothing of windows.
"""

from __future__ import annotations

import torch


class LMHead:
    """VQOPT.lm_logits (tied to the token embeddings) in the form the device runs fastest."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight  # (vocab_size, d)
        self.weight_t = weight.t()  # its transposed view (a contiguous copy on the CPU in float32: `place`)

    def place(self, cpu: bool) -> None:
        """The transposed weight logits multiply by: a view of the tied embedding, or on the CPU in
        float32 a contiguous copy (vocab_size x d numbers more, 10% faster)."""
        self.weight_t = self.weight.t()
        if cpu and self.weight.dtype != torch.float64:
            self.weight_t = self.weight_t.contiguous()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """VQOPT.lm_logits of the few rows (r, d) an update or a typo lookup asks for, in the form
        the CPU's BLAS (MKL) runs fastest, by benchmarks/lm_head_rows.py: float32, a product with a
        transposed copy of the embedding (10% faster than F.linear); float64, F.linear with the rows
        padded to a multiple of 4 (33% faster: MKL's float64 product of a row count that is not a
        multiple of 4 runs 2 to 3x slower). The pad rows' logits are dropped. On a GPU: F.linear.
        (F.linear without bias is mm with the weight's transposed view, which `place` keeps: one op.)"""
        r, pad = hidden.shape[0], self.pad(hidden.shape[0], hidden)
        if not pad:
            return torch.mm(hidden, self.weight_t)
        return torch.mm(torch.cat([hidden, hidden.new_zeros(pad, hidden.shape[1])]), self.weight_t).narrow(0, 0, r)

    @staticmethod
    def pad(rows: int, like: torch.Tensor) -> int:
        """Rows to add to `rows` for `logits`' fastest form on like's device and dtype (float64 on the
        CPU: up to a multiple of 4), so that a caller can pad with rows it can use or discard."""
        return -rows % 4 if 1 < rows < 64 and like.dtype == torch.float64 and like.device.type == "cpu" else 0
