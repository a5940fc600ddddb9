"""Code flips per layer after one replaced token, for several models side by side, over many edits.

    python -m benchmarks.code_flips MODEL [MODEL ...] [--label NAME ...] [--edits 256] [--seq 1024]
        [--seed 0] [--threads 1] [--name code_flips] [--out benchmarks/results]

Why: how far an edit reaches is the model's part of the engine's speed, and a model card's flip
rates (`vq-train evaluate --edit-docs 8`) come from eight edits, too few to hold a model to a
limit. This measures the same figure (`training.evaluate.flip_report`: one random token replaced
in each held-out sequence; per layer, the share of later positions whose code changed) over
--edits sequences of --seq tokens of the held-out LM text `vq-train evaluate` reads (Gutenberg's
valid split and IMDB test text, unlabelled; nothing from eval/), every model on the same
sequences and the same edits, in chunks of CHUNK sequences (each chunk's edits seeded by its
first sequence; the rates weighted by each chunk's later positions). Beside each model: the
rates its card records. Then where the flips land: each layer's rate in bands of distance from
the edit (1-8, 9-64, 65-256 and 257+ tokens after it) and of depth in the window (1-64, 65-256,
257-512 and 513+ tokens before the row). MODEL: a model folder, or `bundled` for
the model in the package.
"""

from __future__ import annotations

import platform
import sys

import torch

from benchmarks import common

CHUNK = 32  # sequences per forward pass: a fixed size, so the edits depend only on --edits, --seq and --seed


AXES = ("distance", "depth")  # flip_report's bands: tokens after the edit, tokens before the row


def layer_rates(net, ids: torch.Tensor, seed: int) -> dict:
    """flip_report over `ids` in chunks: per layer, flipped later positions over all later positions,
    overall and per band of distance from the edit and of depth in the window."""
    from training.evaluate import flip_report

    flipped, later = None, 0
    banded = {axis: (None, None) for axis in AXES}  # axis -> (flips per layer and band, later per band)
    for start in range(0, ids.shape[0], CHUNK):
        part = flip_report(net, ids[start : start + CHUNK], seed + start)
        n = part["later_positions"]
        counts = [rate * n for rate in part["flip_rate_per_layer"]]
        flipped = counts if flipped is None else [a + b for a, b in zip(flipped, counts)]
        later += n
        for axis, (flips, positions) in banded.items():
            banded[axis] = (_add(flips, part[f"flips_by_{axis}"]), _add(positions, [part[f"later_by_{axis}"]]))
    out = {"flip_rate_per_layer": [f / max(1, later) for f in flipped], "later_positions": later}
    for axis, (flips, positions) in banded.items():
        out[f"{axis}_bands"] = part[f"{axis}_bands"]
        out[f"flip_rate_by_{axis}"] = [[f / max(1, n) for f, n in zip(row, positions[0])] for row in flips]
        out[f"later_by_{axis}"] = positions[0]
    return out


def _add(total: list[list[int]] | None, part: list[list[int]]) -> list[list[int]]:
    return part if total is None else [[a + b for a, b in zip(x, y)] for x, y in zip(total, part)]


def run(args) -> dict:
    from inference import load_model_folder
    from training.evaluate import VALID_TOKENS, edit_sequences
    from training.teacher import load_or_collect_tokens
    from training.tokenizer import load_tokenizer

    torch.set_num_threads(args.threads)
    models = common.labelled_models(args)
    first = next(iter(models.values()))
    valid = load_or_collect_tokens(
        load_tokenizer(first / "tokenizer.json"), common.data_dir(args.data), "valid", VALID_TOKENS, None, args.seed
    )
    ids = edit_sequences(valid, args.edits, args.seq, args.seed)
    out = {}
    for label, folder in models.items():
        net, card = load_model_folder(folder)  # (in eval mode)
        recorded = (card.get("evaluation") or {}).get("single_token_edits") or {}
        out[label] = {
            "model": common.recorded_path(folder),
            **layer_rates(net, ids, args.seed),
            "card_flip_rate_per_layer": recorded.get("flip_rate_per_layer"),
            "card_sequences": recorded.get("sequences"),
        }
    return {
        "models": out,
        "edits": int(ids.shape[0]),
        "tokens": int(ids.shape[1]),
        "command": common.command_line("code_flips", args.argv),
        "hardware": f"one {platform.machine()} CPU",
    }


def report(results: dict) -> str:
    def rates(values) -> str:
        return " / ".join(f"{100 * x:.2f}%" for x in values) if values else "-"

    rows = [
        [label, rates(r["flip_rate_per_layer"]), f"{r['later_positions']:,}", rates(r["card_flip_rate_per_layer"])]
        + [str(r["card_sequences"] or "-")]
        for label, r in results["models"].items()
    ]
    header = ["model", "codes flipped per layer", "later positions", "the card's figure", "the card's edits"]
    return common.side_by_side_report(
        "Code flips per layer after one replaced token, models side by side",
        results["command"],
        f"{results['edits']} held-out sequences of {results['tokens']} tokens, one random token replaced in each, "
        f"the same for every model; {results['hardware']}.",
        "\n\n".join([common.markdown_table(header, rows), *(band_table(results, axis) for axis in AXES)]),
        {label: r["model"] for label, r in results["models"].items()},
    )


def band_table(results: dict, axis: str) -> str:
    """Where flips land: per model and layer, the flip rate of later positions in each band of
    distance from the edit (rows near the edit flip most often, but most later rows are far from
    it) or of depth in the window (an unnormalised attention sum grows with its depth while an
    edit's change to it does not, so early rows flip most). The bands' sizes are in the caption."""
    first = next(iter(results["models"].values()))
    edges = [0, *first[f"{axis}_bands"]]
    what = {"distance": ("tokens after", "from the edit"), "depth": ("tokens deep", "into the window")}[axis]
    bands = [f"{a + 1}-{b}" for a, b in zip(edges, edges[1:])] + [f"{edges[-1] + 1}+"]
    header = ["model", "layer"] + [f"{band} {what[0]}" for band in bands]
    rows = [
        [label, str(layer)] + [f"{100 * x:.2f}%" for x in rates]
        for label, r in results["models"].items()
        for layer, rates in enumerate(r[f"flip_rate_by_{axis}"])
    ]
    counts = ", ".join(f"{band}: {n:,}" for band, n in zip(bands, first[f"later_by_{axis}"]))
    return (
        f"Codes flipped by {axis} {what[1]} (share of the later positions in each band; positions "
        f"per band: {counts})\n\n" + common.markdown_table(header, rows)
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = common.side_by_side_parser(__doc__, "code_flips")
    p.add_argument("--edits", type=int, default=256, help="held-out sequences, one replaced token each")
    p.add_argument("--seq", type=int, default=1024, help="tokens per sequence, BOS included")
    args = p.parse_args(argv)
    if args.edits < 1 or args.seq < 3:
        p.error("--edits must be positive and --seq at least 3")
    return common.run_side_by_side(args, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
