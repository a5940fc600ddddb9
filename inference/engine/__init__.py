"""The incremental engine: one window's state, and the update that keeps it exact under edits.

State (state.py): per layer l, q, k, v (head-major: a row recomputed over every key reads each
head's keys and values as one block), the code projections of the attention sum s (s . c for
every code: a "sums" row), an upper bound of |s| per VQ head (the tie guard's scale) and the
codes; per row, what the heads read off its last layer's output: the class log-probabilities and
the surprise of the next token. The layer outputs are kept only with the "full" layout
(policy.LAYOUTS): a row's is its embedding, then each layer's output projection and FFN of the
row's code (no attention: the codes carry it), which the "lean" layout recomputes for the few rows
that need it (they would be a fifth of the state). s itself is not kept (a VQ layer's output reads
only its codes): it would be two thirds of a sums row, and the passes over every affected row
would move three times the bytes. A changed key's v projected on the codes of its VQ head is
computed during the update, for the few changed keys only: it lets a changed key move every later
query's code distances at H x K cost instead of K x d, and storing it for every key would cost a
quarter of the state.

An update (one revision) goes layer by layer (docs/engine.md, "One update"; the terms are in
docs/architecture.md, "Engine glossary"):
  D      dirty rows: their layer input changed (edited, inserted or relabelled at layer 0)
  keys   changed keys: D (new k, v) and D-before-the-edit plus deleted rows (old k, v)
  clean  queries at or after the first changed key get their code projections moved by the delta
         of gelu(q.k) v over the changed keys (and u by a bound of it); dirty queries get their
         whole row recomputed
  VQ     re-checked for every row whose projections moved; a near-tie is recomputed in full first
  next   D plus the rows whose code flipped: their Wo z and FFN are recomputed
The engine knows nothing about text: token ids and positions only.

Modules, one job each:
  constants  LayerConstants: the per-model tables (fused weights, codebook maps, embedding table)
  lm_head    LMHead: the LM head's weights in the device's fastest form (one of the constants)
  policy     the three sizings (ExactSizing, BucketedSizing, GraphedSizing), layouts, slack, the room a
             padded pass reserves
  record     WindowRecord: the closed, versioned (STATE_FORMAT) list of what a window is made of
  state      WindowState, a container: slots, layout, alloc/grow, per-layer views, reading
  dense      the dense pass over a window: build (open, rebuild) and verify
  plan       the typed plan of one update, built on the host
  layer      the update of one layer (update_layer, its steps), over the pure kernels of rows.py
  full_rows  rows recomputed in full over every key, and which keys they read
  passes     an update (apply, settle): its passes, overflow resumption and near-tie fixes
  graphs     PassGraphs: a window's first passes captured per shape and replayed (graphed sizing)
  heads      the LM head and the classification head of a window's rows
The cost accounting of a pass lives beside the counting rules, in inference/pass_costs.py.
"""

from .constants import LayerConstants
from .dense import WindowCheck
from .policy import LAYOUTS, SIZINGS, SLACK
from .record import RECORD_FIELDS, STATE_FORMAT, WindowRecord
from .state import WindowState

__all__ = [
    "LAYOUTS",
    "RECORD_FIELDS",
    "LayerConstants",
    "SIZINGS",
    "SLACK",
    "STATE_FORMAT",
    "WindowCheck",
    "WindowRecord",
    "WindowState",
]
