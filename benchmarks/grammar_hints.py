"""Grammar hints measured: how many Harper hints clean, edited prose gets, by lint kind and rule,
and how many planted classic errors get one, for the grammar rules vq-lsp shows by default beside
Harper's own defaults, side by side in one run.

Texts (none from eval/): technical Markdown (this repository's README.md, docs/*.md but the
generated docs/grammar-rules.md, and training/README.md; the Art of Command Line README and Rust book chapters from
$VQ_LSP_DATA/revisions/, as benchmarks/typo_detection.py cuts them), fiction (Gutenberg valid
split) and film reviews (IMDB train). Every text is read with the server's markup handling
(hints/markup.py: Markdown for the technical texts), and lints count only in prose, as the
server shows them; a review's own slips are hints too, so reviews are no clean-prose yardstick.

Planted errors, each put alone into a copy of a text (so that no two share a sentence) at
places chosen at random in prose: "could of" ("could have" -> "could of", "could be" -> "could
of been", for could/would/should/might/must), "a" before a vowel ("an apple" -> "a apple"),
"the the" ("the" written twice) and "this are" ("this is" / "these are" -> "this are"). An
error is found when a shown lint overlaps it.

Configurations:
- before: what the server showed before the default rule set, Harper's default rules (spelling
  aside), with the markup taken out of the sentence blanked to spaces;
- Harper's default rules, markup fed as placeholder words (hints/grammar.py `masked`);
- vq-lsp's defaults (hints/grammar.py DEFAULT_KINDS, DEFAULT_RULES; the `grammar.rules` setting).

    python -m benchmarks.grammar_hints [--texts 12] [--chars 8000] [--plants 3]

Writes benchmarks/results/grammar_hints.{json,md}. Harper only, no model: it runs in seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO, command_line, data_dir
from benchmarks.typo_detection import excerpts, review_excerpts, technical_excerpts
from vq_lsp.hints import grammar, markup
from vq_lsp.hints.caches import HintCaches

CLASSES = ("could of", "a before a vowel", "the the", "this are")
_MODAL = r"\b(could|would|should|might|must)"
_NOT_NEWLINE = re.compile(r"[^\n]")
NEAR_CHARS = 12  # a lint about a planted error may reach this much beyond it (a word either side)


@dataclass(frozen=True)
class Config:
    name: str
    rules: grammar.Rules
    blanked: bool  # markup taken out of the sentence blanked to spaces (before), else fed as placeholder words


CONFIGS = (
    Config(
        "before: Harper's defaults, markup blanked",
        grammar.Rules.of({**{k: True for k in grammar.KINDS}, grammar.DEMONSTRATIVE_RULE: False}),
        True,
    ),
    Config(
        "Harper's defaults, markup as placeholders",
        grammar.Rules.of({**{k: True for k in grammar.KINDS}, grammar.DEMONSTRATIVE_RULE: False}),
        False,
    ),
    Config("vq-lsp defaults", grammar.Rules(), False),
)


def blanked(text: str, prose: tuple[tuple[int, int], ...]) -> str:
    """What fed Harper before: everything outside the prose blanked to spaces."""
    out, at = [], 0
    for a, b in prose:
        out.append(_NOT_NEWLINE.sub(" ", text[at:a]))
        out.append(text[a:b])
        at = b
    out.append(_NOT_NEWLINE.sub(" ", text[at:]))
    return "".join(out)


def repo_docs() -> list[tuple[int, str, str]]:
    docs = sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "grammar-rules.md")  # a generated list
    paths = [REPO / "README.md", *docs, REPO / "training" / "README.md"]
    return [(k, str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for k, p in enumerate(paths)]


def texts_of(data: Path, args) -> dict[str, list[tuple[str, str]]]:
    """kind -> (name, text)."""
    return {
        "technical (this repository's docs)": [(n, t) for _, n, t in repo_docs()],
        "technical (command-line README, Rust book)": [
            (n, t) for _, n, t in technical_excerpts(data, args.texts, args.chars)
        ],
        "fiction (Gutenberg valid)": [
            (n, t) for _, n, t in excerpts(data / "gutenberg" / "gutenberg_subset.jsonl.gz", args.texts, 1, args.chars)
        ],
        "reviews (IMDB train)": [
            (n, t) for _, n, t in review_excerpts(data / "imdb" / "imdb_train.jsonl.gz", args.texts, args.chars)
        ],
    }


def markup_of(kind: str) -> str:
    return markup.MARKDOWN if kind.startswith("technical") else markup.PLAIN


def sites(text: str, lay: markup.Layout, cls: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) of every place in prose where an error of class `cls` can go."""
    out = []
    if cls == "could of":
        for m in re.finditer(_MODAL + r" (have|be)\b", text):
            out.append((m.start(2), m.end(2), "of" if m.group(2) == "have" else "of been"))
    elif cls == "a before a vowel":
        for m in re.finditer(r"\b([Aa])n( [aeiou]\w+)", text):
            out.append((m.start(), m.end(1) + 1, m.group(1)))
    elif cls == "the the":
        for m in re.finditer(r"\b(the) (?=[a-z])", text):
            out.append((m.start(), m.end(1), "the the"))
    elif cls == "this are":
        for m in re.finditer(r"\b(this is|these are)\b", text):
            out.append((m.start(), m.end(), "this are"))
    return [(a, b, r) for a, b, r in out if lay.allows(a, b)]


def near(lint: grammar.GrammarLint, a: int, b: int) -> bool:
    """Whether a lint is about the planted error at [a, b): it overlaps it and is not much longer
    (a lint on the whole sentence, "this sentence is 42 words long", is about something else)."""
    return lint.start < b and a < lint.end and lint.end - lint.start <= b - a + NEAR_CHARS


def lints(text: str, kind: str, config: Config, checker: grammar.GrammarChecker) -> list[grammar.GrammarLint]:
    lay = markup.layout(text, markup_of(kind))
    return checker.lints(text, lay, rules=config.rules)


def measure(texts: dict, config: Config, plants: int, seed: int) -> dict:
    original = grammar.masked
    grammar.masked = blanked if config.blanked else original
    checker = HintCaches().grammar  # nothing linted under another configuration is reused
    try:
        out = {}
        for kind, items in texts.items():
            words, by_kind, by_rule = 0, Counter(), Counter()
            found = {c: [0, 0] for c in CLASSES}
            rng = random.Random(seed)
            for _, text in items:
                lay = markup.layout(text, markup_of(kind))
                words += sum(1 for _ in lay.words(text))
                for lint in lints(text, kind, config, checker):
                    by_kind[lint.kind] += 1
                    by_rule[f"{lint.kind}: {lint.rule}"] += 1
                for cls in CLASSES:
                    places = sites(text, lay, cls)
                    for a, b, bad in rng.sample(places, min(plants, len(places))):
                        planted = text[:a] + bad + text[b:]
                        end = a + len(bad)
                        hit = any(near(lint, a, end) for lint in lints(planted, kind, config, checker))
                        found[cls][0] += hit
                        found[cls][1] += 1
            total = sum(by_kind.values())
            planted_total = sum(t for _, t in found.values())
            planted_found = sum(f for f, _ in found.values())
            out[kind] = {
                "texts": len(items),
                "words": words,
                "hints": total,
                "hints_per_1000_words": round(1000 * total / words, 2) if words else None,
                "by_kind_per_1000_words": {k: round(1000 * v / words, 2) for k, v in by_kind.most_common()},
                "by_rule": dict(by_rule.most_common(25)),
                "planted": {c: {"found": f, "planted": t} for c, (f, t) in found.items()},
                "planted_recall": round(planted_found / planted_total, 3) if planted_total else None,
            }
        return out
    finally:
        grammar.masked = original


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--texts", type=int, default=12, help="texts of each kind from $VQ_LSP_DATA")
    ap.add_argument("--chars", type=int, default=8000, help="characters per text")
    ap.add_argument("--plants", type=int, default=3, help="planted errors of each class per text (at most)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "grammar_hints"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    texts = texts_of(data_dir(args.data), args)
    results = {
        "command": command_line("grammar_hints", sys.argv[1:] if argv is None else argv),
        "hardware": "one CPU core (Harper is single-threaded)",
        "configs": {c.name: measure(texts, c, args.plants, args.seed) for c in CONFIGS},
    }
    results["seconds"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(table(results))
    print(table(results))
    return 0


def table(r: dict) -> str:
    configs = r["configs"]
    kinds = list(next(iter(configs.values())))
    lines = [f"`{r['command']}`, {r['hardware']}.", ""]
    lines += [
        "Grammar hints per 1,000 words of prose, and the share of planted classic errors a hint covers "
        "(" + ", ".join(CLASSES) + "):",
        "",
        "| texts | words | " + " | ".join(f"{c}: hints / 1,000 words | {c}: planted found" for c in configs) + " |",
        "|---|---|" + "---|---|" * len(configs),
    ]
    for kind in kinds:
        first = next(iter(configs.values()))[kind]
        cells = []
        for c in configs.values():
            res = c[kind]
            found = sum(v["found"] for v in res["planted"].values())
            planted = sum(v["planted"] for v in res["planted"].values())
            cells += [f"{res['hints_per_1000_words']}", f"{found}/{planted} ({100 * found / max(planted, 1):.0f}%)"]
        lines.append(f"| {kind} | {first['words']:,} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, c in configs.items():
        lines += [f"**{name}**: planted errors found by class, and hints by kind per 1,000 words.", ""]
        for kind, res in c.items():
            per_class = ", ".join(f"{k} {v['found']}/{v['planted']}" for k, v in res["planted"].items())
            by_kind = ", ".join(f"{k} {v}" for k, v in res["by_kind_per_1000_words"].items()) or "none"
            lines.append(f"- {kind}: {per_class}; {by_kind}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
