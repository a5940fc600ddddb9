"""How an update sizes its row sets, and the layout and slack of a window's state.

Two sizings, picked per device by LayerConstants.to:
  exact     the host reads each layer's next row set (one read per layer) and nothing is padded;
            on a CPU that read costs microseconds while padded rows cost their full arithmetic.
  bucketed  shapes padded to buckets (`bucket`), one host read per pass; on a GPU a read stalls
            the pipeline and padding is nearly free. A pass reserves room for each layer's rows
            (`capacities`); one that overflows goes on with a further pass (passes.resume).
"""

from __future__ import annotations

import math

LSE_CHUNK_ROWS = 256  # rows per chunk of LM logits when a whole window's surprise is computed
SLACK = 1.0625  # a window allocates room for this many times its rows, and grows by this factor (+ 16 rows)
TIE_ROWS = 8  # near-tie rows a layer reserves a full recomputation for, when the dtype's tie guard is loose
LOOSE_TIE_GUARD = 1e-8  # a tie_rel above this is loose enough to reserve TIE_ROWS per layer (float32)
FAR = float("inf")  # key position of a slot that is not alive: no query sees it
# Room a pass reserves for the next layer's rows: c -> ceil(c * growth + add), bucketed. On a CPU
# padded rows cost their full arithmetic, so the guess is tight and an overflow resumes; on a GPU
# padding is nearly free and host round trips are not, so the guess is generous.
GROWTH = {"cpu": (1.2, 1), "cuda": (4, 2)}
SIZINGS = ("exact", "bucketed")
# What a window keeps per row. "lean" (the server's default: many open documents): no layer
# output; a row's is recomputed from its embedding and codes when needed (the predecessors of
# edited tokens, riding the first pass; rows whose code flips without their input changing: l
# layer finishes each at layer l). "full" (load_model's and `vq-lsp score`'s default: speed):
# every layer's output too, d numbers per layer per row (a quarter more state), no recomputation.
LAYOUTS = ("lean", "full")


def bucket(n: int) -> int:
    """Padded size for n rows: 0, or the next of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^(k-1)).

    Shapes repeat across edits (a CUDA graph per bucket is possible) and padding wastes at most a
    third of the work."""
    if n <= 0:
        return 0
    p = 1 << (n - 1).bit_length()
    return p * 3 // 4 if p >= 4 and n <= p * 3 // 4 else p


def growth(device_type: str) -> tuple[float, int]:
    """(factor, addend) by which a pass's reserved rows grow from one layer to the next."""
    return GROWTH.get(device_type, GROWTH["cuda"])


def tie_rows(tie_rel: float) -> int:
    """Near-tie rows a layer reserves room for: none with a tight guard (float64)."""
    return 0 if tie_rel <= LOOSE_TIE_GUARD else TIE_ROWS


def capacities(
    layers: int, vq: bool, tie_rel: float, device_type: str, first: int, rows: int, last_affected: int
) -> list[tuple[int, int]]:
    """Padded (dirty rows, near-tie rows) per layer first..L for a pass starting with `rows` rows.

    Entry l holds layer l's dirty-row and near-tie capacities, entry L the last layer's output
    rows; `last_affected` is the index of the last (padding) entry of the affected rows. Rows
    whose code flips join the next layer's dirty set, and how many do is unknown until the pass
    has run: the pass reserves a guess that grows with depth, and an update that overflows it
    goes on with a further pass."""
    full = last_affected + 1
    if not vq:  # every affected row is dirty after the first layer
        return [(0, 0)] * first + [(bucket(rows), 0)] + [(full, 0)] * (layers - first)
    ties = tie_rows(tie_rel)
    factor, add = growth(device_type)
    out, c = [(0, 0)] * first, rows
    for _ in range(first, layers + 1):
        out.append((min(full, bucket(c)), min(ties, full)))
        c = math.ceil(c * factor + add)
    return out
