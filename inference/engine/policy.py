"""How an update sizes its row sets, and the layout and slack of a window's state.

Three sizings, one strategy object each (SIZINGS); LayerConstants.to picks exact on every device:
  exact     (ExactSizing) the host reads each layer's next row set (one read per layer) and
            nothing is padded; on a CPU that read costs microseconds while padded rows cost their
            full arithmetic, and on a GPU an edit is bound by the host's kernel launches, which
            exact sizing has fewest of (measured by benchmarks.gpu_session).
  bucketed  (BucketedSizing) shapes padded to buckets (`bucket`), one host read per pass: the
            shapes repeat, as replaying a captured CUDA graph needs. A pass reserves room for
            each layer's rows (`Room`); one that overflows goes on with a further pass
            (passes.resume).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

LSE_CHUNK_ROWS = 256  # rows per chunk of LM logits when a whole window's surprise is computed
SLACK = 1.0625  # a window allocates room for this many times its rows, and grows by this factor (+ 16 rows)
TIE_ROWS = 8  # near-tie rows a layer reserves a full recomputation for, when the dtype's tie guard is loose
LOOSE_TIE_GUARD = 1e-8  # a tie_rel above this is loose enough to reserve TIE_ROWS per layer (float32)
FAR = float("inf")  # key position of a slot that is not alive: no query sees it
# Room a pass reserves for the next layer's rows: c -> ceil(c * growth + add), bucketed. On a CPU
# padded rows cost their full arithmetic, so the guess is tight and an overflow resumes; on a GPU
# padding is nearly free and host round trips are not, so the guess is generous.
GROWTH = {"cpu": (1.2, 1), "cuda": (4, 2)}
# What a window keeps per row. "lean" (many open documents): no layer output; a row's is
# recomputed from its embedding and codes when needed (the predecessors of edited tokens, riding
# the first pass; rows whose code flips without their input changing: l layer finishes each at
# layer l). "full" (load_model's and `vq-lsp score`'s default: speed): every layer's output too,
# d numbers per layer per row (a quarter more state), no recomputation. "auto" (the server's
# default): windows are built full, and a document's outputs are dropped
# (IncrementalDocument.drop_outputs) when the memory budget needs the room, before any
# document's state is.
LAYOUTS = ("lean", "full", "auto")


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


@dataclass(frozen=True)
class Room:
    """What one layer of a pass reserves: near-tie rows it recomputes in place, and rows for the
    next layer. Exact sizes reserve nothing (the host reads each set); padded sizes reserve a
    guess, and a layer that finds more leaves the rest to a further pass."""

    ties: int
    next: int


NO_ROOM = Room(0, 0)


class Sizing:
    """How an update sizes its row sets: the lengths of its index lists and the room of its passes.

    `reads_each_layer`: the host reads every layer's next rows (and near-ties), so sets hold only
    real rows and a pass always completes; otherwise the pass compacts its sets on the device into
    the room reserved for them and the host reads everything once, at the end of the pass."""

    name: ClassVar[str]
    reads_each_layer: ClassVar[bool]
    captures: ClassVar[bool] = False  # first passes captured and replayed (graphs.PassGraphs)

    def set_length(self, n: int) -> int:
        """Entries of an index list holding n rows (padding included)."""
        raise NotImplementedError

    def affected_length(self, n: int) -> int:
        """Entries of A, the affected rows, for n of them (padding included)."""
        raise NotImplementedError

    def pad_index(self, length: int) -> int:
        """The local index padded entries of row sets hold, for an A of `length` entries."""
        raise NotImplementedError

    def first_pass(
        self, layers: int, vq: bool, tie_rel: float, device_type: str, rows: int, last_affected: int
    ) -> list[Room]:
        """The room of each layer of an update's first pass, starting with `rows` dirty rows."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ExactSizing(Sizing):
    """CPU: no padding; the host reads each layer's next rows (microseconds on a CPU), so a pass
    never overflows and reserves nothing."""

    name = "exact"
    reads_each_layer = True

    def set_length(self, n: int) -> int:
        return n

    def affected_length(self, n: int) -> int:
        return n

    def pad_index(self, length: int) -> int:
        return length  # one past A: never a real row (the host drops padding before it is read)

    def first_pass(
        self, layers: int, vq: bool, tie_rel: float, device_type: str, rows: int, last_affected: int
    ) -> list[Room]:
        return [NO_ROOM] * layers


class BucketedSizing(Sizing):
    """GPU: shapes padded to buckets (`bucket`) and known before a pass, one host read per pass; A
    ends with one trailing trash entry, the index padded entries hold."""

    name = "bucketed"
    reads_each_layer = False

    def set_length(self, n: int) -> int:
        return bucket(n)

    def affected_length(self, n: int) -> int:
        return bucket(n) + 1

    def pad_index(self, length: int) -> int:
        return length - 1

    def first_pass(
        self, layers: int, vq: bool, tie_rel: float, device_type: str, rows: int, last_affected: int
    ) -> list[Room]:
        """Padded room per layer for a pass starting with `rows` rows; `last_affected` is the index of
        the last (padding) entry of the affected rows. Rows whose code flips join the next layer's
        dirty set, and how many do is unknown until the pass has run: the pass reserves a guess that
        grows with depth, and an update that overflows it goes on with a further pass."""
        full = last_affected + 1
        if not vq:  # every affected row is dirty after the first layer
            return [Room(0, full)] * layers
        ties = min(tie_rows(tie_rel), full)
        factor, add = growth(device_type)
        out, c = [], rows
        for _ in range(layers):
            c = math.ceil(c * factor + add)
            out.append(Room(ties, min(full, bucket(c))))
        return out


class GraphedSizing(BucketedSizing):
    """Bucketed shapes, and the first pass of each update replayed from a capture of its shape."""

    name = "graphed"
    captures = True


EXACT, BUCKETED, GRAPHED = ExactSizing(), BucketedSizing(), GraphedSizing()
SIZINGS: dict[str, Sizing] = {s.name: s for s in (EXACT, BUCKETED, GRAPHED)}
