"""Two models' held-out figures side by side, as `vq-train evaluate` recorded them in their cards.

    python -m benchmarks.model_cards BEFORE AFTER [--name model_cards] [--out benchmarks/results]

BEFORE and AFTER are model folders; an older bundled model can be taken out of the repository's
history with `mkdir -p runs/previous && git archive REV inference/default_model | tar -x -C
runs/previous`. Both cards' `evaluation` sections must come from `vq-train evaluate` with the
same flags (their `commands` say which). This script measures nothing itself; it lines the two
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


def rows(before: dict, after: dict) -> list[list[str]]:
    """(section, figure, before, after) rows from the two evaluation sections."""
    a, b = before["evaluation"], after["evaluation"]
    out = [
        ["IMDB test", "accuracy", _pct(a["imdb_test"]["vq"]["accuracy"]), _pct(b["imdb_test"]["vq"]["accuracy"])],
        [
            "IMDB test",
            "dense twin accuracy",
            _pct(a["imdb_test"].get("dense_teacher", {}).get("accuracy")),
            _pct(b["imdb_test"].get("dense_teacher", {}).get("accuracy")),
        ],
    ]
    for name in b.get("tone_hints", {}):
        ta, tb = a.get("tone_hints", {}).get(name), b["tone_hints"][name]
        if not isinstance(tb, dict):
            continue
        for fig in TONE_FIGURES:
            if tb.get(fig) is not None:
                out.append([f"tone, {name}", fig, _pct((ta or {}).get(fig)), _pct(tb[fig])])
    for name, tb in b.get("paragraph_context", {}).items():
        ta = a.get("paragraph_context", {}).get(name, {})
        if isinstance(tb, dict):
            out.append(
                [f"paragraph {name.replace('_', ' ')}", "accuracy", _pct(ta.get("accuracy")), _pct(tb["accuracy"])]
            )
    fa, fb = a["single_token_edits"]["flip_rate_per_layer"], b["single_token_edits"]["flip_rate_per_layer"]
    for layer, (x, y) in enumerate(zip(fa, fb)):
        out.append(["one-token edit", f"codes flipped, layer {layer}", f"{100 * x:.2f}%", f"{100 * y:.2f}%"])
    out.append(
        [
            "one-token edit",
            "engine MAC saving, median",
            f"{a['engine']['single_token_mac_speedup_median']:.1f}x",
            f"{b['engine']['single_token_mac_speedup_median']:.1f}x",
        ]
    )
    out += protocol_rows(a.get("paper_protocol", {}), b.get("paper_protocol", {}))
    out.append(
        [
            "held-out text",
            "LM loss (nats per token)",
            f"{a['held_out_lm']['lm_loss_vq_on']:.3f}",
            f"{b['held_out_lm']['lm_loss_vq_on']:.3f}",
        ]
    )
    return out


def tone_rule(before: dict, after: dict) -> str:
    """The tone rule each card's evaluation applied (the same words once when they agree)."""
    rules = [card["evaluation"].get("tone_hints", {}).get("rule", "not recorded") for card in (before, after)]
    return rules[0] + "." if rules[0] == rules[1] else f"before: {rules[0]}; after: {rules[1]}."


def protocol_rows(a: dict, b: dict) -> list[list[str]]:
    """The paper protocol against a paragraph cache (`vq-train evaluate --protocol-pairs`), where a card has
    it: wall clock and MACs of re-running the touched paragraphs over the engine's, medians."""
    out = []
    for scenario in ("one-token edit", "entire revision"):
        if scenario not in a and scenario not in b:
            continue
        for key, what in (("seconds", "wall clock"), ("macs", "MACs")):
            fig = f"paragraph_cache_over_engine_{key}_median"
            x, y = (a.get(scenario, {}).get(fig), b.get(scenario, {}).get(fig))
            cells = [f"{v:.2f}x" if v is not None else "-" for v in (x, y)]
            out.append([f"paper protocol, {scenario}", f"paragraph cache / engine, {what}", *cells])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="model folder")
    parser.add_argument("after", help="model folder")
    parser.add_argument("--name", default="model_cards", help="results file stem")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help="folder for NAME.{md,json}")
    args = parser.parse_args(argv)
    before, after = load_card(args.before), load_card(args.after)
    table = rows(before, after)
    lines = [
        "# Two models' held-out figures, side by side",
        "",
        f"`python -m benchmarks.model_cards {recorded_path(args.before)} {recorded_path(args.after)}`: the figures "
        "`vq-train evaluate` recorded in each card (the cards' `commands` list the runs; held-out data only). "
        f"Tone: {tone_rule(before, after)} Code flips: share of later positions whose code changes after one "
        "replaced token.",
        "",
        markdown_table(["set", "figure", "before", "after"], table),
    ]
    results = {"before": recorded_path(args.before), "after": recorded_path(args.after), "rows": table}
    write_results(args.out, args.name, results, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
