"""How quiet the server is on clean, edited prose, and what it still finds there: at the server's defaults.

    python -m benchmarks.quiet_prose [--quick] [--texts 8] [--chars 8000] [--per-kind 2] [--seed 0] [--threads 1]
        [--context window|paragraph] [--eval [--eval-texts 30]]

Every text goes through `vq-lsp check`'s own path (`vq_lsp.scoring.check.check_text` with the default
`Settings()`, the model loaded with the default `context` and `precision`), so each figure is what a writer
gets with no configuration. Clean prose of three kinds, none from `$VQ_LSP_DATA/eval/`, each from the
`test` part of `training/neutral.py`'s split by document (the bundled model's neutral training read the
`train` part; the tone rule was chosen on the `calibration` part, benchmarks/tone_candidates.py):

- technical: Rust book chapters (Markdown) and the repository's own docs;
- encyclopedic: Wikipedia articles (plain text);
- fiction: excerpts of Gutenberg `valid` books (plain text; tone also reported on the narrator's
  paragraphs: no quotation marks and no play's speaker tag such as "NIJO.").

`--context` scores with the other context instead, every other setting at its default, to compare the
two on the same texts. Texts are cut at a paragraph break near `--chars` characters. Per kind: hints
per 1,000 words by kind (tone, typo on a word missing from the dictionary, typo on a dictionary word
i.e. a real-word confusion, grammar) and the share of tone-eligible paragraphs (at least
`toneMinWords` words) that show a tone. Then errors are planted in the same texts, in prose words,
at least 60 characters apart: non-word typos (one-letter
swaps, drops, doublings, neighbour keys), real-word swaps (the confusion sets the detector knows:
their/there, form/from ...), and four classic grammar errors ("could have" -> "could of", "an" -> "a"
before a vowel, a doubled "the", "this is" -> "this are"); recall is the share of planted errors with a
hint of their kind over them (typo hints for the typos, grammar hints for the grammar errors).

`--fit-real-word` is how the technical-text real-word thresholds (`typos.TECHNICAL_REAL_WORD_GAIN`)
were chosen, on other texts than the report's: Rust book chapters of the `train` and `calibration`
parts and this repository's docs/*.md and training/README.md (clean; words inside double quotes left
out, the docs quote errors on purpose), then real-word swaps planted in the chapters (up to
FIT_SWAPS per text). For each pair (the word written, the partner the model prefers) the threshold
is the lowest gain from the default `realWordThreshold` up, in FIT_STEP steps, that maximises the
planted swaps found less FALSE_ALARM_COST for each clean false alarm; a pair whose best threshold is
the default needs no entry (results: quiet_prose_real_word_fit.{md,json}).

`--eval` adds, once at the end, the same figures for the latest revision of Python Enhancement Proposals
(`$VQ_LSP_DATA/eval/python_peps.jsonl.gz`, reStructuredText): report them, never tune on them.
`--quick` is a few texts of each kind (a few minutes on one core). Results:
benchmarks/results/quiet_prose.{md,json} (`--out` for another folder).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import gzip
import json
import platform
import random
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from benchmarks.common import (
    REPO,
    command_line,
    data_dir,
    is_narration,
    markdown_table,
    recorded_path,
    write_results,
)
from benchmarks.typo_detection import ONE_EDIT, corrupt
from training.data import read_jsonl_gz
from training.neutral import part_of
from vq_lsp.hints import conventions, markup, typos
from vq_lsp.hints.caches import HintCaches
from vq_lsp.scoring.check import Finding, check_text
from vq_lsp.settings import Settings

NAME = "quiet_prose"
REPO_DOCS = ("docs/server.md", "docs/engine.md", "docs/cli.md", "docs/configuration.md", "training/README.md")
ERRORS = ("non-word", "real-word", "could of", "a before a vowel", "the the", "this are")
GRAMMAR_ERRORS = ERRORS[2:]
PREAMBLE = re.compile(r"PEP: *\d+\s*\n")  # a PEP's header fields: metadata, not prose
SPACING = 60  # characters between two planted errors, at least
# --fit-real-word: real-word swaps planted per chapter, the threshold grid, and what a clean false alarm costs
FIT_SWAPS = 10
FIT_STEP = 0.25
FIT_MAX = 9.0
FALSE_ALARM_COST = 10  # planted swaps missed that one false alarm on clean prose is worth
FLAT_TECHNICAL_GAIN = 5.0  # the one gain every technical real-word hint needed before, for comparison
FIT_DOCS = ("docs", "training/README.md")  # the repository's docs read for clean false alarms (README.md and
# benchmarks/README.md quote the reviews' errors at length and are left out)


@dataclass(frozen=True)
class Text:
    """One clean text: its name (its suffix gives the markup, as for `vq-lsp check`) and content."""

    name: str
    text: str


@dataclass(frozen=True)
class Planted:
    start: int
    end: int
    kind: str  # one of ERRORS


@dataclass
class KindFigures:
    """One kind of prose: clean-text hints and planted-error recall."""

    kind: str
    texts: int = 0
    words: int = 0
    paragraphs: int = 0  # tone-eligible paragraphs
    narration_paragraphs: int = 0
    hints: dict[str, int] = field(default_factory=lambda: {"tone": 0, "typo": 0, "real-word": 0, "grammar": 0})
    narration_tones: int = 0
    planted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERRORS, 0))
    found: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERRORS, 0))
    seconds: float = 0.0


# ----------------------------------------------------------------------------------- texts
def cut(text: str, chars: int) -> str:
    """The text up to a paragraph break near `chars` characters."""
    if len(text) <= chars:
        return text
    at = text.rfind("\n\n", chars // 2, chars)
    return text[: at if at > 0 else chars].rstrip() + "\n"


def technical(data: Path, n: int, chars: int, seed: int, own_docs: int = len(REPO_DOCS)) -> list[Text]:
    """Rust book chapters of the test part, then the repository's own docs (Markdown)."""
    rows = [r for r in read_jsonl_gz(data / "revisions" / "rust_book_chapters.jsonl.gz")]
    rows = [r for r in rows if part_of("rust_book/" + r["doc"]) == "test"]
    random.Random(f"{seed}-rust").shuffle(rows)
    book = [Text(f"rust-book/{r['doc']}.md", cut(r["revisions"][-1]["text"], chars)) for r in rows[:n]]
    return book + [Text(p, cut((REPO / p).read_text(encoding="utf-8"), chars)) for p in REPO_DOCS[:own_docs]]


def encyclopedic(data: Path, n: int, chars: int, seed: int) -> list[Text]:
    rows = [r for r in read_jsonl_gz(data / "revisions" / "wiki_versions.jsonl.gz")]
    rows = [r for r in rows if part_of("wikipedia/" + r["title"]) == "test"]
    random.Random(f"{seed}-wiki").shuffle(rows)
    return [Text(f"wikipedia/{r['title'][:40]}.txt", cut(r["versions"][-1], chars)) for r in rows[:n]]


def fiction(data: Path, n: int, chars: int, seed: int) -> list[Text]:
    books = [
        r
        for r in read_jsonl_gz(data / "gutenberg" / "gutenberg_subset.jsonl.gz")
        if r.get("split") == "valid" and part_of(f"gutenberg/{r['author']}/{r['title']}", 0.5, 0.5) == "test"
    ]
    rng = random.Random(f"{seed}-books")
    rng.shuffle(books)
    out = []
    for b in books[:n]:
        text = b["text"]
        at = text.find("\n\n", rng.randrange(len(text) // 4, len(text) // 2))
        out.append(Text(f"gutenberg/{b['title'][:40]}.txt", cut(text[at:].strip() + "\n", chars)))
    return out


def peps(data: Path, n: int, chars: int, seed: int) -> list[Text]:
    """Latest revisions of eval/ PEPs, header fields left out (read once, for the report)."""
    with gzip.open(data / "eval" / "python_peps.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    random.Random(f"{seed}-peps").shuffle(rows)
    out = []
    for r in rows[:n]:
        text = r["revisions"][-1]["text"]
        head = PREAMBLE.match(text)
        if head:
            end = text.find("\n\n", head.start())
            text = text[end:].lstrip() if end > 0 else text
        out.append(Text(f"peps/{r['doc']}.rst", cut(text, chars)))
    return out


# ----------------------------------------------------------------------------------- planting
def plant(text: str, name: str, rng: random.Random, per_kind: int) -> tuple[str, list[Planted]]:
    """The text with up to `per_kind` errors of each kind put into prose words, each at least
    SPACING characters from the others (a hint for one must not be read as a hint for another). The
    grammar errors need a phrase to change and are placed first; then real-word swaps, then typos."""
    lay = markup.layout(text, markup.markup_of(markup.language_of(name)))
    edits: list[tuple[int, int, str, str]] = []  # (start, end, replacement, kind)

    def free(a: int, b: int) -> bool:
        return all(b + SPACING <= s or e + SPACING <= a for s, e, _, _ in edits)

    patterns = {  # kind: (pattern whose group 1 is replaced, replacement)
        "could of": (re.compile(r"\b(?:could|would|should|must|might) (have)\b"), "of"),
        "a before a vowel": (re.compile(r"\b(an) [aeiou][a-z]+\b"), "a"),
        "the the": (re.compile(r"\b(the) [a-z]+\b"), "the the"),
        "this are": (re.compile(r"\b(?:[Tt]his|[Tt]hat) (is)\b"), "are"),
    }
    for kind, (pattern, new) in patterns.items():
        spots = [m for m in pattern.finditer(text) if lay.allows(m.start(), m.end())]
        rng.shuffle(spots)
        for m in spots:
            if sum(k == kind for *_, k in edits) >= per_kind:
                break
            if free(*m.span(1)):
                edits.append((*m.span(1), new, kind))
    words = [(a, b, text[a:b]) for a, b in lay.words(text)]
    rng.shuffle(words)
    for kind in ("real-word", "non-word"):
        n = 0
        for a, b, w in words:
            if n >= per_kind:
                break
            if not (w.islower() and typos.is_word(w) and free(a, b)):
                continue
            if kind == "real-word" and w in typos.CONFUSABLE:
                edits.append((a, b, rng.choice(typos.CONFUSABLE[w]), kind))
                n += 1
            elif kind == "non-word" and len(w) >= 4 and w not in typos.CONFUSABLE:
                bad = corrupt(w, rng.choice(ONE_EDIT), rng)
                if bad and bad != w and not typos.is_word(bad):
                    edits.append((a, b, bad, kind))
                    n += 1
    out, planted, last, shift = [], [], 0, 0
    for a, b, new, kind in sorted(edits):
        out.append(text[last:a])
        out.append(new)
        start = a + shift
        end = start + len(new)
        planted.append(Planted(start, end, kind))
        shift += len(new) - (b - a)
        last = b
    out.append(text[last:])
    return "".join(out), planted


# ----------------------------------------------------------------------------------- scoring
def offsets(text: str, f: Finding) -> tuple[int, int]:
    """Char offsets of a finding's 1-based line and column range."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return starts[f.line - 1] + f.column - 1, starts[f.end_line - 1] + f.end_column - 1


def kind_of(text: str, f: Finding) -> str:
    """tone, typo (a word missing from the dictionary), real-word (a dictionary word flagged) or grammar."""
    if f.kind == "sentiment":
        return "tone"
    if f.kind == "typo":
        a, b = offsets(text, f)
        return "real-word" if typos.is_word(text[a:b].lower()) else "typo"
    return f.kind


def tone_paragraphs(text: str, name: str, min_words: int) -> list[tuple[int, int, bool]]:
    """(start, end, narration) of the paragraphs that may show a tone."""
    lay = markup.layout(text, markup.markup_of(markup.language_of(name)))
    return [(a, b, is_narration(text[a:b])) for a, b, n in lay.tone if n >= min_words]


def measure(model, texts: list[Text], kind: str, settings: Settings, per_kind: int, seed: int) -> KindFigures:
    conv = conventions.Conventions(root=str(REPO))
    caches = HintCaches()
    fig = KindFigures(kind)
    t0 = time.perf_counter()
    for t in texts:
        try:
            clean = check_text(model, t.text, t.name, settings, conv, caches)
        except ValueError:
            continue  # longer than maxDocumentTokens: the server gives it no hints either
        fig.texts += 1
        lay = markup.layout(t.text, markup.markup_of(markup.language_of(t.name)))
        fig.words += sum(1 for _ in lay.words(t.text))
        eligible = tone_paragraphs(t.text, t.name, settings.diagnostics.tone_min_words)
        fig.paragraphs += len(eligible)
        fig.narration_paragraphs += sum(n for _, _, n in eligible)
        starts = [a for a, _, _ in eligible]
        for f in clean:
            k = kind_of(t.text, f)
            if k in fig.hints:
                fig.hints[k] += 1
            if k == "tone":
                a, _ = offsets(t.text, f)
                i = bisect.bisect_right(starts, a) - 1
                fig.narration_tones += i >= 0 and eligible[i][2]
        bad, planted = plant(t.text, t.name, random.Random(f"{seed}-{t.name}"), per_kind)
        try:
            got = check_text(model, bad, t.name, settings, conv, caches)
        except ValueError:
            continue
        spans = [(kind_of(bad, f), *offsets(bad, f)) for f in got]
        for p in planted:
            fig.planted[p.kind] += 1
            wanted = ("typo", "real-word") if p.kind in ("non-word", "real-word") else ("grammar",)
            lo, hi = (p.start - 4, p.end) if p.kind == "the the" else (p.start, p.end)
            fig.found[p.kind] += any(k in wanted and a < hi and lo < b for k, a, b in spans)
    fig.seconds = round(time.perf_counter() - t0, 1)
    return fig


def run(args) -> dict:
    import inference

    torch.set_num_threads(args.threads)
    data = data_dir(args.data)
    settings = Settings() if args.context is None else dataclasses.replace(Settings(), context=args.context)
    model = inference.load_model(args.model, device="cpu", dtype=settings.precision, context=settings.context)
    n = args.texts or (2 if args.quick else 8)
    chars = args.chars or (3000 if args.quick else 8000)
    sets = {
        "technical": technical(data, 1 if args.quick else n, chars, args.seed, 1 if args.quick else len(REPO_DOCS)),
        "encyclopedic": encyclopedic(data, n, chars, args.seed),
        "fiction": fiction(data, n, chars, args.seed),
    }
    if args.eval:
        sets["PEPs (eval, reported once)"] = peps(data, args.eval_texts, chars, args.seed)
    figures = []
    for kind, texts in sets.items():
        figures.append(measure(model, texts, kind, settings, args.per_kind, args.seed))
        print(f"{kind}: {figures[-1].texts} texts, {figures[-1].seconds} s", file=sys.stderr)
    d = settings.diagnostics
    return {
        "command": command_line("quiet_prose", args.argv),
        "model": recorded_path(args.model or inference.DEFAULT_MODEL_DIR),
        "hardware": f"{'one CPU core' if args.threads == 1 else f'{args.threads} CPU cores'} "
        f"({platform.machine()}, shared with other jobs), {settings.precision}",
        "defaults": {
            "context": settings.context,
            "sentiment_threshold": d.sentiment_threshold,
            "tone_min_words": d.tone_min_words,
            "tone_gate": getattr(d, "tone_gate", 0.0),  # none before the gate existed
        },
        "kinds": [asdict(f) for f in figures],
    }


# ----------------------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class PairGain:
    """One real-word finding: the word written, the partner the model prefers, the gain, and
    whether the word was planted (else it is a false alarm on clean prose when shown)."""

    word: str
    partner: str
    gain: float
    planted: bool


def fitting_texts(data: Path, chars: int) -> tuple[list[Text], list[Text]]:
    """(chapters, docs): Rust book chapters outside the report's `test` part, the repository's docs."""
    rows = [r for r in read_jsonl_gz(data / "revisions" / "rust_book_chapters.jsonl.gz")]
    rows = [r for r in rows if part_of("rust_book/" + r["doc"]) != "test"]
    chapters = [Text(f"rust-book/{r['doc']}", cut(r["revisions"][-1]["text"], chars)) for r in rows]
    paths = sorted((REPO / "docs").glob("*.md")) + [REPO / p for p in FIT_DOCS[1:]]
    docs = [Text(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in paths]
    return chapters, docs


def raw_findings(model, text: str, name: str, settings: Settings) -> list[typos.WordFinding] | None:
    """Every real-word finding of a text, before any excuse (None: too long for the server)."""
    import inference
    from vq_lsp.hints import material, reuse

    ids, offs = model.tokenizer.encode_with_offsets(text)
    if not ids or len(ids) > settings.max_document_tokens:
        return None
    doc = inference.IncrementalDocument(model, ids)
    starts = torch.tensor([a for a, _ in offs]).numpy()
    caches = HintCaches()
    lay = material.layout_for(text, markup.language_of(name), settings.diagnostics, caches)
    surprise = material.token_surprise(doc)
    detector, continuation = material.detector(doc, caches), material.continuation(doc, caches)
    got = reuse.document_material(text, starts, surprise, lay, doc, detector, continuation, kept=caches.material(model))
    return [f for f in got.findings if f.kind == "real-word" and f.fixes]


def quoted(text: str, a: int) -> bool:
    """Whether offset `a` is inside double quotes on its line."""
    line = text[text.rfind("\n", 0, a) + 1 : a]
    return line.count('"') % 2 == 1 or line.count("“") > line.count("”")


def plant_swaps(text: str, name: str, rng: random.Random, n: int) -> tuple[str, list[Planted]]:
    """Up to `n` real-word swaps in prose words, SPACING apart (as `plant`, swaps only)."""
    lay = markup.layout(text, markup.markup_of(markup.language_of(name)))
    words = [(a, b, text[a:b]) for a, b in lay.words(text)]
    rng.shuffle(words)
    edits: list[tuple[int, int, str]] = []
    for a, b, w in words:
        if len(edits) >= n:
            break
        if w.islower() and w in typos.CONFUSABLE and all(b + SPACING <= s or e + SPACING <= a for s, e, _ in edits):
            edits.append((a, b, rng.choice(typos.CONFUSABLE[w])))
    out, planted, last, shift = [], [], 0, 0
    for a, b, new in sorted(edits):
        out += [text[last:a], new]
        planted.append(Planted(a + shift, a + shift + len(new), "real-word"))
        shift += len(new) - (b - a)
        last = b
    out.append(text[last:])
    return "".join(out), planted


def pair_gains(model, chapters: list[Text], docs: list[Text], settings: Settings, seed: int):
    """(PairGain of every clean and planted real-word finding, clean words read)."""
    gains, words = [], 0
    for t in chapters + docs:
        clean = raw_findings(model, t.text, t.name, settings)
        if clean is None:
            continue
        lay = markup.layout(t.text, markup.markup_of(markup.language_of(t.name)))
        words += sum(1 for _ in lay.words(t.text))
        gains += [PairGain(f.word, f.fixes[0][0].lower(), f.gain, False) for f in clean if not quoted(t.text, f.start)]
        if t in docs:
            continue
        bad, planted = plant_swaps(t.text, t.name, random.Random(f"{seed}-{t.name}"), FIT_SWAPS)
        found = {(f.start, f.end): f for f in raw_findings(model, bad, t.name, settings) or []}
        for p in planted:
            f = found.get((p.start, p.end))
            if f is not None:
                gains.append(PairGain(f.word, f.fixes[0][0].lower(), f.gain, True))
    return gains, words


def fit_pairs(gains: list[PairGain], base: float) -> dict[tuple[str, str], dict]:
    """Per pair: the threshold from `base` up that maximises planted found - FALSE_ALARM_COST x
    clean false alarms (the lowest such), with its counts and the default's."""
    out = {}
    for pair in sorted({(g.word, g.partner) for g in gains}):
        mine = [g for g in gains if (g.word, g.partner) == pair]

        def counts(t: float) -> tuple[int, int]:
            return sum(g.planted and g.gain >= t for g in mine), sum(not g.planted and g.gain >= t for g in mine)

        grid = [base + FIT_STEP * k for k in range(int((FIT_MAX - base) / FIT_STEP) + 1)]
        best = max(grid, key=lambda t: (counts(t)[0] - FALSE_ALARM_COST * counts(t)[1], -t))
        out[pair] = {
            "threshold": round(best, 2),
            "planted": sum(g.planted for g in mine),
            "found": counts(best)[0],
            "false_alarms": counts(best)[1],
            "found_at_default": counts(base)[0],
            "false_alarms_at_default": counts(base)[1],
        }
    return out


def fit(args) -> dict:
    import inference

    torch.set_num_threads(args.threads)
    settings = Settings()
    model = inference.load_model(None, device="cpu", dtype=settings.precision, context=settings.context)
    chapters, docs = fitting_texts(data_dir(args.data), args.chars or 8000)
    gains, words = pair_gains(model, chapters[: args.texts] if args.texts else chapters, docs, settings, args.seed)
    base = settings.diagnostics.real_word_threshold
    pairs = fit_pairs(gains, base)
    flat = max(base, FLAT_TECHNICAL_GAIN)
    return {
        "command": command_line("quiet_prose", args.argv),
        "hardware": f"{'one CPU core' if args.threads == 1 else f'{args.threads} CPU cores'} ({platform.machine()})",
        "default": base,
        "clean_words": words,
        "false_alarm_cost": FALSE_ALARM_COST,
        "pairs": [{"word": w, "partner": p, **v} for (w, p), v in pairs.items()],
        "raised": {f"{w} {p}": v["threshold"] for (w, p), v in pairs.items() if v["threshold"] > base},
        "flat": {
            "threshold": flat,
            "found": sum(g.planted and g.gain >= flat for g in gains),
            "false_alarms": sum(not g.planted and g.gain >= flat for g in gains),
        },
    }


def fit_report(r: dict) -> str:
    rows = [
        [
            f"{p['word']} -> {p['partner']}",
            f"{p['threshold']:.2f}",
            str(p["planted"]),
            f"{p['found_at_default']} / {p['false_alarms_at_default']}",
            f"{p['found']} / {p['false_alarms']}",
        ]
        for p in r["pairs"]
        if p["planted"] or p["false_alarms_at_default"]
    ]
    total = [sum(p[k] for p in r["pairs"]) for k in ("found_at_default", "false_alarms_at_default", "found")]
    fa = sum(p["false_alarms"] for p in r["pairs"])
    return "\n".join(
        [
            "# Real-word thresholds for technical text, fitted per pair",
            "",
            f"Command: `{r['command']}`. Hardware: {r['hardware']}.",
            "",
            f"Clean technical prose read: {r['clean_words']:,} words; a false alarm counts as "
            f"{r['false_alarm_cost']} planted swaps missed. Default {r['default']} nats: {total[0]} planted swaps "
            f"found, {total[1]} false alarms; fitted: {total[2]} found, {fa} false alarms; one flat "
            f"{r['flat']['threshold']} nats for every pair: {r['flat']['found']} found, "
            f"{r['flat']['false_alarms']} false alarms (of {sum(p['planted'] for p in r['pairs'])} planted).",
            "",
            markdown_table(["pair", "threshold", "planted", "found / false alarms at default", "fitted"], rows),
            "",
            "Raised: " + (", ".join(f"{k} {v}" for k, v in r["raised"].items()) or "none"),
            "",
        ]
    )


# ----------------------------------------------------------------------------------- report
def per_thousand(count: int, words: int) -> float:
    return 1000.0 * count / words if words else 0.0


def share(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}% ({a}/{b})" if b else "-"


def report(results: dict) -> str:
    d = results["defaults"]
    hint_rows = []
    for k in results["kinds"]:
        w = k["words"]
        hint_rows.append(
            [
                k["kind"],
                str(k["texts"]),
                f"{w:,}",
                share(k["hints"]["tone"], k["paragraphs"]),
                share(k["narration_tones"], k["narration_paragraphs"]) if k["kind"] == "fiction" else "-",
                f"{per_thousand(k['hints']['tone'], w):.1f}",
                f"{per_thousand(k['hints']['typo'], w):.1f}",
                f"{per_thousand(k['hints']['real-word'], w):.1f}",
                f"{per_thousand(k['hints']['grammar'], w):.1f}",
                f"{per_thousand(sum(k['hints'].values()), w):.1f}",
            ]
        )
    recall_rows = [[k["kind"], *[share(k["found"][e], k["planted"][e]) for e in ERRORS]] for k in results["kinds"]]
    return "\n".join(
        [
            "# Hints on clean prose, and planted errors found",
            "",
            (
                "Settings: the server's defaults"
                if d["context"] == Settings().context
                else f"Settings: the server's defaults but `context: {d['context']}`"
            )
            + f" (`context: {d['context']}`, `sentimentThreshold` {d['sentiment_threshold']}, "
            f"`toneMinWords` {d['tone_min_words']}, `toneGate` {d['tone_gate']}); every text through `vq-lsp check`'s "
            "path with no configuration. Tone shown: share of paragraphs of at least `toneMinWords` words with a "
            "tone hint (every one is wrong on this prose). Other columns: hints per 1,000 prose words.",
            "",
            f"Command: `{results['command']}`.",
            "",
            f"Model: `{results.get('model', 'the bundled model')}`. Hardware: {results['hardware']}.",
            "",
            markdown_table(
                [
                    "prose",
                    "texts",
                    "words",
                    "tone shown",
                    "tone shown, narration",
                    "tone /1k",
                    "typo /1k",
                    "real-word /1k",
                    "grammar /1k",
                    "all /1k",
                ],
                hint_rows,
            ),
            "",
            "Planted errors with a hint of their kind over them (recall):",
            "",
            markdown_table(["prose", *ERRORS], recall_rows),
            "",
        ]
    )


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="two texts of each kind of about 3,000 characters (a few minutes on one core)",
    )
    p.add_argument("--texts", type=int, help="texts of each kind (default 8, --quick 2)")
    p.add_argument("--chars", type=int, help="each text cut near this many characters (default 8,000, --quick 3,000)")
    p.add_argument("--per-kind", type=int, default=2, help="planted errors of each kind per text, at most")
    p.add_argument("--eval", action="store_true", help="also report eval/ PEPs, once, at the end")
    p.add_argument("--eval-texts", type=int, default=30, help="PEPs with --eval")
    p.add_argument(
        "--context",
        choices=("window", "paragraph"),
        help="score with this context instead of the server's default (results: quiet_prose_CONTEXT.{md,json})",
    )
    p.add_argument(
        "--fit-real-word",
        action="store_true",
        help="fit the per-pair real-word thresholds of technical text instead (non-test chapters, the docs)",
    )
    p.add_argument("--model", help="model folder (default: the bundled model), as the server's modelPath")
    p.add_argument("--name", help=f"results file stem (default {NAME}, or {NAME}_CONTEXT with --context)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help=f"folder for {NAME}.{{md,json}}")
    args = p.parse_args(argv)
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.fit_real_word:
        results = fit(args)
        write_results(args.out, f"{NAME}_real_word_fit", results, fit_report(results))
        return 0
    results = run(args)
    name = args.name or (NAME if args.context is None else f"{NAME}_{args.context}")
    write_results(args.out, name, results, report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
