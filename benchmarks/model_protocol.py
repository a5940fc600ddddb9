"""The model card's paper protocol for several models side by side, runs alternated.

    python -m benchmarks.model_protocol MODEL [MODEL ...] [--label NAME ...] [--pairs 40] [--rounds 2]
        [--lengths 1536 2048] [--threads 1] [--name model_protocol] [--out benchmarks/results]

Why: how much the engine gains over re-running the changed paragraphs depends on the model (how
often its codes flip after an edit), and a card's eight pairs, measured on a busy machine, are
too few to compare two models by. This runs `training.protocol.protocol_report` (consecutive
revision pairs of the Rust book and the command-line README, 1,536-2,048 tokens; the entire
revision and one single-token edit per pair; float32; against a dense pass over each touched
paragraph alone) for every model in turn, `--rounds` times, alternating the models so that a
slow stretch of the machine falls on all of them. Nothing from eval/ is read. MODEL: a model
folder, or `bundled` for the model in the package.

Reported per model and scenario: the median over pairs of paragraph cache / engine, wall clock
(each round, then the median of the rounds) and MACs, and the engine's median seconds.
"""

from __future__ import annotations

import platform
import statistics
import sys

import torch

from benchmarks.common import (
    data_dir,
    labelled_models,
    markdown_table,
    recorded_path,
    run_side_by_side,
    side_by_side_parser,
    side_by_side_report,
)
from training.protocol import LENGTHS, protocol_report

SCENARIOS = ("one-token edit", "entire revision")


def run(args) -> dict:
    from inference import load_model_folder

    torch.set_num_threads(args.threads)
    models = labelled_models(args)
    rounds: dict[str, list[dict]] = {label: [] for label in models}
    for _ in range(args.rounds):
        for label, folder in models.items():
            net, _ = load_model_folder(folder)
            rounds[label].append(
                protocol_report(
                    net, folder / "tokenizer.json", data_dir(args.data), args.pairs, args.seed, tuple(args.lengths)
                )
            )
    return {
        "models": {label: recorded_path(f) for label, f in models.items()},
        "rounds": rounds,
        "command": "python -m benchmarks.model_protocol " + " ".join(args.argv),
        "hardware": f"one {platform.machine()} CPU",
        "data": next(iter(rounds.values()))[0]["data"],
    }


def report(results: dict) -> str:
    rows = []
    for label, runs in results["rounds"].items():
        for scenario in SCENARIOS:
            seconds = [r[scenario]["paragraph_cache_over_engine_seconds_median"] for r in runs]
            rows.append(
                [
                    label,
                    scenario,
                    ", ".join(f"{x:.2f}x" for x in seconds) + f" (median {statistics.median(seconds):.2f}x)",
                    f"{runs[0][scenario]['paragraph_cache_over_engine_macs_median']:.1f}x",
                    ", ".join(f"{1e3 * r[scenario]['engine_seconds_median']:.1f}" for r in runs),
                ]
            )
    header = ["model", "scenario", "paragraph cache / engine, wall clock, per round", "MACs", "engine ms per round"]
    return side_by_side_report(
        "The card's paper protocol, models side by side",
        results["command"],
        f"{results['data']}; {results['hardware']}; models alternated within each round. Cells: medians "
        "over pairs of the paragraph cache's cost over the engine's.",
        markdown_table(header, rows),
        results["models"],
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = side_by_side_parser(__doc__, "model_protocol")
    p.add_argument("--pairs", type=int, default=40, help="revision pairs per model and round")
    p.add_argument("--rounds", type=int, default=2, help="times every model is measured, alternated")
    p.add_argument("--lengths", type=int, nargs=2, default=list(LENGTHS), help="tokens with BOS, both versions")
    return run_side_by_side(p.parse_args(argv), argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
