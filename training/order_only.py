"""Make a model read only the order of its tokens: both position tables become one constant row.

Why: the engine keeps every row at a gapped pool position, and the positions an edit history
leaves behind (a word typed in the middle squeezed into a gap, a neighbourhood re-spread) are not
the ones a fresh open of the same text gives. A model whose scores depend on those positions
gives the same text different hints depending on how it was reached. With every row of the
coarse and the fine position table equal, a token's embedding no longer depends on its position,
and the only thing positions still decide is causality (a key is visible to a query when its
position is not after the query's), which is the order. Codes, hidden states and scores of a
text are then the same at every layout, bit for bit, so typing, pasting, `vq-lsp check` and a
reopened file agree exactly.

Why the mean row: it is the constant that moves the layer-0 input least on average over the
positions training sampled (uniform over the pool), so the quantisers' codebooks and the layers
above still fit. Measured on held-out text (see the model card), the model loses nothing by it:
these models are trained on random subsets of a 204,800-position pool, so absolute position
carries almost no information the causal order does not.
"""

from __future__ import annotations

from pathlib import Path

import torch


@torch.no_grad()
def make_order_only(net) -> dict:
    """Set every row of both position tables to the table's mean row; returns what changed."""
    dec = net.decoder
    report = {}
    for name, table in (("coarse", dec.embed_positions.weight), ("fine", dec.embed_positions_fine.weight)):
        mean = table.mean(0, keepdim=True)
        report[f"{name}_rows"] = table.shape[0]
        report[f"{name}_mean_distance_to_mean"] = round(float((table - mean).norm(dim=1).mean()), 4)
        table.copy_(mean.expand_as(table))
    return report


def freeze_order_only(net) -> None:
    """Make NET read only the order (if it does not already) and freeze both position tables, so that
    training keeps it so: the codes and locality it learns are then the ones the model keeps."""
    if not net.reads_order_only():
        make_order_only(net)
    for table in (net.decoder.embed_positions, net.decoder.embed_positions_fine):
        table.weight.requires_grad_(False)


def run_order_only(args) -> Path:
    """`vq-train order-only`: a model folder in, the same model reading only the order out."""
    from inference import Tokenizer, load_model_folder, save_model_folder

    net, card = load_model_folder(args.model)
    report = make_order_only(net)
    card = {
        **card,
        "order_only": {
            "source": str(args.model),
            "how": "every row of the coarse and the fine position table set to the table's mean row",
            **report,
        },
    }
    out = Path(args.out)
    save_model_folder(net, Tokenizer.from_file(Path(args.model) / "tokenizer.json"), out, card)
    return out
