"""Code flips against accuracy: where each measured model sits on the trade-off of locality and tone.

    python -m benchmarks.flips_accuracy SOURCE [SOURCE ...] [--label NAME ...]
        [--study benchmarks/results/locality_study.json] [--name flips_accuracy] [--out benchmarks/results]

A SOURCE is a model folder whose card has an `evaluation` section, or an `eval.json` that
`vq-train evaluate` wrote; --study adds every column of a `benchmarks.model_cards` results file (the
locality study's models, whose run folders need not exist any more). Each model is a point: the
share of later positions whose code changes after one replaced token, in its worst layer (the
figure the engine's recomputation grows with, and the one the locality target bounds), against its
IMDB test accuracy (2,000 held-out reviews), and against the paper protocol's wall-clock ratio of
the paragraph cache over the engine on one-token edits where the evaluation measured it. This
script measures nothing itself: it reads what `vq-train evaluate` recorded, so every point comes
from the same evaluation flags only if the runs used them (their cards' `commands` say which).

Writes NAME.md, NAME.json and, when matplotlib is installed, NAME.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks import optional
from benchmarks.common import command_line, markdown_table, recorded_path, write_results

REPO = Path(__file__).resolve().parents[1]
FLIP_TARGET = 0.008  # the locality target: at most 0.8% of codes per layer
PROTOCOL_TARGET = 2.0  # the paragraph cache over the engine on one-token edits


@dataclass(frozen=True)
class Point:
    """One model's place on the trade-off."""

    label: str
    flips: list[float]  # per layer, after one replaced token (shares)
    accuracy: float  # IMDB test accuracy (share)
    one_token: float | None = None  # paragraph cache / engine, wall clock, one-token edits
    entire: float | None = None  # the same, entire revisions
    source: str = ""

    @property
    def worst(self) -> float:
        return max(self.flips)


def from_evaluation(label: str, e: dict, source: str) -> Point:
    """A point from an evaluation record (eval.json, or a card's `evaluation`)."""
    protocol = e.get("paper_protocol", {})

    def ratio(scenario: str) -> float | None:
        return protocol.get(scenario, {}).get("paragraph_cache_over_engine_seconds_median")

    return Point(
        label,
        list(e["single_token_edits"]["flip_rate_per_layer"]),
        e["imdb_test"]["vq"]["accuracy"],
        ratio("one-token edit"),
        ratio("entire revision"),
        source,
    )


def from_source(label: str, path: str) -> Point:
    """A point from a model folder (its card) or an eval.json."""
    p = Path(path)
    if p.is_dir():
        card = p / "card.json"
        evaluation = json.loads(card.read_text()).get("evaluation") if card.is_file() else None
        if evaluation is None:
            raise SystemExit(f"{path}: no card with an evaluation section (run vq-train evaluate, then export)")
        return from_evaluation(label, evaluation, recorded_path(p))
    if p.is_file():
        return from_evaluation(label, json.loads(p.read_text()), recorded_path(p))
    raise SystemExit(f"{path}: neither a model folder nor an eval.json")


def _share(cell: str) -> float | None:
    """'1.68%' -> 0.0168, '1.90x' -> 1.9, '-' -> None (model_cards' formatting)."""
    if cell in ("-", ""):
        return None
    return float(cell[:-1]) / (100 if cell.endswith("%") else 1)


def from_study(path: str) -> list[Point]:
    """Every column of a model_cards results file as a point."""
    study = json.loads(Path(path).read_text())
    names = [f"before ({Path(path).stem})", *study["labels"]]
    folders = [study["before"], *study["after"]]
    rows = {(r[0], r[1]): r[2:] for r in study["rows"]}
    layers = sorted(k for k in rows if k[0] == "one-token edit" and k[1].startswith("codes flipped, layer"))
    wall = "paragraph cache / engine, wall clock"
    points = []
    for i, (name, folder) in enumerate(zip(names, folders)):
        flips = [_share(rows[k][i]) for k in layers]
        accuracy = _share(rows[("IMDB test", "accuracy")][i])
        if accuracy is None or None in flips:
            continue
        points.append(
            Point(
                name,
                flips,
                accuracy,
                _share(rows.get(("paper protocol, one-token edit", wall), ["-"] * len(names))[i]),
                _share(rows.get(("paper protocol, entire revision", wall), ["-"] * len(names))[i]),
                f"{recorded_path(path)}: {folder}",
            )
        )
    return points


def table(points: list[Point]) -> str:
    def ratio(x):
        return "-" if x is None else f"{x:.2f}x"

    rows = [
        [
            p.label,
            " / ".join(f"{100 * f:.2f}" for f in p.flips),
            f"{100 * p.worst:.2f}%",
            f"{100 * p.accuracy:.1f}%",
            ratio(p.one_token),
            ratio(p.entire),
        ]
        for p in sorted(points, key=lambda p: p.worst)
    ]
    header = ["model", "codes flipped per layer, %", "worst layer", "IMDB test accuracy", "one-token", "entire"]
    return markdown_table(header, rows)


def short(label: str) -> str:
    """A point's name on the plot: its label up to a colon (the study's "A: locality 8, tail" is "A")."""
    return label.split(":")[0]


def _annotations(points: list[Point], y) -> list[tuple[float, float, str]]:
    """One annotation per group of points that sit on top of each other (within 2% of the x range
    and 3% of the y range: tails on one trunk), at the group's highest point, naming them all."""
    xs, ys = [100 * p.worst for p in points], [y(p) for p in points]
    dx, dy = 0.02 * (max(xs) - min(xs) or 1), 0.03 * (max(ys) - min(ys) or 1)
    groups: list[list[Point]] = []
    for p in sorted(points, key=lambda p: (p.worst, y(p))):
        near = next(
            (g for g in groups if abs(100 * (g[-1].worst - p.worst)) <= dx and abs(y(g[-1]) - y(p)) <= dy), None
        )
        if near is None:
            groups.append([p])
        else:
            near.append(p)
    return [(100 * g[-1].worst, max(y(p) for p in g), ", ".join(short(p.label) for p in g)) for g in groups]


def _close(a: Point, b: Point, y, dx: float, dy: float) -> bool:
    return abs(100 * (a.worst - b.worst)) <= dx and abs(y(a) - y(b)) <= dy


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    panels = (
        (axes[0], lambda p: p.accuracy * 100, "IMDB test accuracy, %", None),
        (axes[1], lambda p: p.one_token, "paragraph cache / engine, one-token edits (wall clock)", PROTOCOL_TARGET),
    )
    for ax, y, ylabel, target in panels:
        shown = [p for p in points if y(p) is not None]
        ax.scatter([100 * p.worst for p in shown], [y(p) for p in shown])
        for x, top, names in _annotations(shown, y):
            ax.annotate(names, (x, top), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axvline(100 * FLIP_TARGET, linestyle="--", color="grey", linewidth=0.8)
        if target is not None:
            ax.axhline(target, linestyle="--", color="grey", linewidth=0.8)
        ax.set_xlabel("codes flipped after a one-token edit, worst layer, %")
        ax.set_ylabel(ylabel)
    fig.suptitle("Locality against accuracy (dashed: the targets)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="*", help="model folders (card with an evaluation) or eval.json files")
    parser.add_argument("--label", action="append", help="a name per SOURCE (default: the folder or file's parent)")
    parser.add_argument("--study", action="append", default=[], help="a benchmarks.model_cards results JSON")
    parser.add_argument("--name", default="flips_accuracy", help="results file stem")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help="folder for NAME.{md,json,png}")
    args = parser.parse_args(argv)
    labels = args.label or [Path(s).parent.name if Path(s).is_file() else Path(s).name for s in args.sources]
    if len(labels) != len(args.sources):
        parser.error("give one --label per SOURCE")
    if not args.sources and not args.study:
        parser.error("nothing to plot: give a SOURCE or --study")
    can_plot = optional.can_plot("flips_accuracy.py")
    points = [p for study in args.study for p in from_study(study)]
    points += [from_source(label, s) for label, s in zip(labels, args.sources)]
    command = command_line("flips_accuracy", argv)
    text = "\n".join(
        [
            "# Code flips against accuracy",
            "",
            f"`{command}`",
            "",
            "What `vq-train evaluate` recorded for each model: codes flipped per layer after one replaced token "
            "(its 8 held-out edits), IMDB test accuracy (2,000 held-out reviews) and the paper protocol's "
            "paragraph cache over the engine, wall clock, on 8 revision pairs (one-token edits, entire revisions). "
            f"Targets: at most {100 * FLIP_TARGET:.1f}% in every layer, at least {PROTOCOL_TARGET:.0f}x on one-token "
            "edits.",
            "",
            table(points),
            "",
        ]
    )
    write_results(args.out, args.name, {"command": command, "points": [asdict(p) for p in points]}, text)
    if can_plot:
        plot(points, Path(args.out) / f"{args.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
