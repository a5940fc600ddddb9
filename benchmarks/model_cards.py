"""Models' held-out figures side by side, as `vq-train evaluate` recorded them in their cards.

    python -m benchmarks.model_cards BEFORE AFTER [AFTER ...] [--label NAME ...] [--name model_cards]
        [--out benchmarks/results]

BEFORE and each AFTER are model folders; an older bundled model can be taken out of the repository's
history with `mkdir -p runs/previous && git archive REV inference/default_model | tar -x -C
runs/previous`. The cards' `evaluation` sections must come from `vq-train evaluate` with the
same flags (their `commands` say which). This script measures nothing itself; it lines them
up: accuracy and tone hints shown and right per held-out set and writing style, paragraphs after
unrelated text, code flips per layer after a one-token edit, the engine's MAC saving and the
held-out language-model loss.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.common import markdown_table, recorded_path, write_results

REPO = Path(__file__).resolve().parents[1]
TONE_FIGURES = ("accuracy", "shown_share", "shown_precision")


def load_card(folder: str) -> dict:
    card = json.loads((Path(folder) / "card.json").read_text())
    if "evaluation" not in card:
        raise SystemExit(f"{folder}: its card has no evaluation section (run vq-train evaluate, then export)")
    return card


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


Figures = dict[tuple[str, str], str]  # (set, figure) -> the card's value, formatted


def card_figures(card: dict) -> Figures:
    """One card's held-out figures, keyed by (set, figure)."""
    e = card["evaluation"]
    out: Figures = {
        ("IMDB test", "accuracy"): _pct(e["imdb_test"]["vq"]["accuracy"]),
        ("IMDB test", "dense twin accuracy"): _pct(e["imdb_test"].get("dense_teacher", {}).get("accuracy")),
    }
    for name, tone in e.get("tone_hints", {}).items():
        for fig in TONE_FIGURES if isinstance(tone, dict) else ():
            if tone.get(fig) is not None:
                out[(f"tone, {name}", fig)] = _pct(tone[fig])
    for name, ctx in e.get("paragraph_context", {}).items():
        if isinstance(ctx, dict):
            out[(f"paragraph {name.replace('_', ' ')}", "accuracy")] = _pct(ctx["accuracy"])
    for layer, x in enumerate(e["single_token_edits"]["flip_rate_per_layer"]):
        out[("one-token edit", f"codes flipped, layer {layer}")] = f"{100 * x:.2f}%"
    out[("one-token edit", "engine MAC saving, median")] = f"{e['engine']['single_token_mac_speedup_median']:.1f}x"
    out.update(protocol_figures(e.get("paper_protocol", {})))
    out[("held-out text", "LM loss (nats per token)")] = f"{e['held_out_lm']['lm_loss_vq_on']:.3f}"
    return out


def protocol_figures(protocol: dict) -> Figures:
    """The paper protocol against a paragraph cache (`vq-train evaluate --protocol-pairs`), where a card has
    it: wall clock and MACs of re-running the touched paragraphs over the engine's, medians."""
    out: Figures = {}
    for scenario in ("one-token edit", "entire revision"):
        for key, what in (("seconds", "wall clock"), ("macs", "MACs")):
            value = protocol.get(scenario, {}).get(f"paragraph_cache_over_engine_{key}_median")
            if value is not None:
                out[(f"paper protocol, {scenario}", f"paragraph cache / engine, {what}")] = f"{value:.2f}x"
    return out


def rows(cards: list[dict]) -> list[list[str]]:
    """(set, figure, one value per card) rows, in the order the cards first name them ("-": not recorded)."""
    figures = [card_figures(c) for c in cards]
    keys = list(dict.fromkeys(k for f in figures for k in f))
    return [[*key, *(f.get(key, "-") for f in figures)] for key in keys]


def tone_rule(cards: list[dict], names: list[str]) -> str:
    """The tone rule each card's evaluation applied (the same words once when they agree)."""
    rules = [card["evaluation"].get("tone_hints", {}).get("rule", "not recorded") for card in cards]
    if len(set(rules)) == 1:
        return rules[0] + "."
    return "; ".join(f"{n}: {r}" for n, r in zip(names, rules)) + "."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="model folder")
    parser.add_argument("after", nargs="+", help="model folder(s)")
    parser.add_argument("--before-label", default="before", help="column name of BEFORE")
    parser.add_argument("--label", action="append", help="column name of each AFTER (default: after, after 2, ...)")
    parser.add_argument("--name", default="model_cards", help="results file stem")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help="folder for NAME.{md,json}")
    args = parser.parse_args(argv)
    labels = args.label or ["after"] + [f"after {i}" for i in range(2, len(args.after) + 1)]
    if len(labels) != len(args.after):
        parser.error("give one --label per AFTER model")
    cards = [load_card(f) for f in [args.before, *args.after]]
    names = [args.before_label, *labels]
    table = rows(cards)
    folders = " ".join(recorded_path(f) for f in [args.before, *args.after])
    lines = [
        "# Models' held-out figures, side by side",
        "",
        f"`python -m benchmarks.model_cards {folders}`: the figures `vq-train evaluate` recorded in each card "
        "(the cards' `commands` list the runs; held-out data only). "
        f"Tone: {tone_rule(cards, names)} Code flips: share of later positions whose code changes after one "
        "replaced token.",
        "",
        markdown_table(["set", "figure", *names], table),
    ]
    results = {
        "before": recorded_path(args.before),
        "after": [recorded_path(f) for f in args.after],
        "labels": labels,
        "rows": table,
    }
    write_results(args.out, args.name, results, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
