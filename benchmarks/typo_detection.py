"""Typo detection measured: inject realistic errors at known places in held-out prose, then
compare the server's detector (vq_lsp/hints/typos/: dictionary + the model's context) with a plain
spell checker (pyspellchecker: every word missing from its dictionary) and with the dictionary
plus close-word rule alone (no model), side by side on the same texts.

Prose of three kinds, none from eval/: fiction (excerpts of the Gutenberg books of the *valid*
split; the bundled model trained on the train split), technical Markdown (the latest revisions
of the Art of Command Line README and of Rust book chapters in $VQ_LSP_DATA/revisions/, read as
Markdown: errors go into prose only, code makes them technical documents) and film reviews
(IMDB train reviews, a few to a text). Texts alternate between a tuning split (thresholds are
chosen there: the non-word one by best F1 on fiction, the real-word one as the lowest whose
precision on all three kinds together reaches --real-word-precision, hints on the texts' own
errors left out) and a report split (every figure in the tables).
Error classes: letter swaps, drops, doubled letters, neighbour-key substitutions (each kept
only when the result is not a dictionary word: non-word errors), two such edits in one word
with no dictionary word one edit from the result, the same misspelling repeated at every use of
a word ("recieve" twice), real-word errors from the confusion sets the detector knows
(their/there, form/from ...), and real-word errors from any one-letter edit that happens to
spell another word (which no confusion set covers). False alarms are the hints on words no
error was put in, per 1,000 such words.

The source texts hold errors of their own ("Unfortuntately", "nothing more then a cheap action
movie"): a hint on one is a right hint. They are listed (SOURCE_MISSPELLINGS, SOURCE_WRONG_WORDS)
by reading the default texts (--texts 12 --chars 5000, both splits): every word missing from the
dictionary, and every real-word hint on a word no error was put in. A word is listed when its
writer meant a dictionary word (or two) a letter or two, a space or a hyphen away and the sentence
shows which; names, slang, dialect, coinages, foreign words and period spellings ("spunging") are
not. The column "source errors not counted" leaves the listed words out of both the false alarms
and the correct words; every other column counts them as false alarms, as results before the
list did.

    python -m benchmarks.typo_detection [--model DIR] [--texts 12] [--chars 5000] [--context paragraph]
        [--precision float32]

The model reads the texts as the server does (`context: paragraph`, float32) unless --context and
--precision say otherwise; results before these flags were read with `context: window` in float64.

The same file runs against another checkout for a before/after comparison
(`PYTHONPATH=OTHER python benchmarks/typo_detection.py --out STEM`): it only uses the detector's
`analyse` and `flagged`.

Also counts the typo and real-word hints on clean technical prose, this repository's own docs
(`repo_docs_hints`): each one a false alarm but the misspellings the docs quote as examples.

Writes benchmarks/results/typo_detection.{json,md} and a precision-recall plot (.png) when
matplotlib is installed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import inference
from benchmarks import optional
from benchmarks.common import REPO, command_line, data_dir
from inference.loading import CONTEXTS, PRECISIONS
from vq_lsp.hints import markup, typos
from vq_lsp.hints import material as hints
from vq_lsp.hints.caches import HintCaches
from vq_lsp.settings import DiagnosticSettings, Settings

NON_WORD = ("swap", "drop", "double", "neighbour", "two-edit", "repeated")
REAL_WORD = ("confusable", "real-edit")
CLASSES = NON_WORD + REAL_WORD
ONE_EDIT = ("swap", "drop", "double", "neighbour")
KINDS = ("fiction", "technical", "reviews")
KEYS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
SERVER = Settings()  # the model is read as the server reads it unless --context / --precision say otherwise

# Misspellings in the source texts themselves (see the module's docstring), as written: what was meant.
SOURCE_MISSPELLINGS = {
    "cacaphony": "cacophony",
    "Unfortuntately": "Unfortunately",
    "Fortunantely": "Fortunately",
    "tought": "thought",
    "Smokling": "Smoking",  # "Lock, Stock and Two Smokling Barrels"
    "Michelangleo": "Michelangelo",
    "musics": "music",  # "dialogs and musics"
    "coffeshop": "coffee shop",
    "outthere": "out there",
    "Infact": "In fact",
    "everpresent": "ever-present",
    "flesheating": "flesh-eating",
}
# Wrong words in the source texts: (the words around it as written, the word, what was meant).
SOURCE_WRONG_WORDS = (
    ("nothing more then a cheap", "then", "than"),
    ("unless your a die-hard", "your", "you're"),
    ("give even that affect", "affect", "effect"),
    ("under it's alternate", "it's", "its"),
    ("camera on it's side", "it's", "its"),
    ("has to go though all", "though", "through"),
    ("falls of and hits", "of", "off"),
)


def neighbours(ch: str) -> str:
    """Letters next to `ch` on a QWERTY keyboard (same row and the rows above and below)."""
    for r, row in enumerate(KEYS):
        c = row.find(ch)
        if c >= 0:
            near = {row[j] for j in (c - 1, c + 1) if 0 <= j < len(row)}
            for other in (r - 1, r + 1):
                if 0 <= other < len(KEYS):
                    near |= {KEYS[other][j] for j in (c - 1, c, c + 1) if 0 <= j < len(KEYS[other])}
            return "".join(sorted(near))
    return ""


def corrupt(word: str, kind: str, rng: random.Random) -> str | None:
    """One error of `kind` in a lower-case word, or None when this word cannot take it."""
    n = len(word)
    if kind == "swap":
        options = [i for i in range(n - 1) if word[i] != word[i + 1]]
        if not options:
            return None
        i = rng.choice(options)
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "drop":
        i = rng.randrange(n)
        return word[:i] + word[i + 1 :]
    if kind == "double":
        i = rng.randrange(n)
        return word[: i + 1] + word[i] + word[i + 1 :]
    if kind == "neighbour":
        i = rng.randrange(n)
        near = neighbours(word[i])
        return word[:i] + rng.choice(near) + word[i + 1 :] if near else None
    if kind == "two-edit":
        if n < 5:
            return None
        first = corrupt(word, rng.choice(ONE_EDIT), rng)
        bad = first and corrupt(first, rng.choice(ONE_EDIT), rng)
        if not bad or typos.is_word(bad) or word in typos.close_words(bad):
            return None  # a dictionary word one edit away, or the word itself: not a two-edit error
        return bad
    if kind == "confusable":
        partners = typos.CONFUSABLE.get(word)
        return rng.choice(partners) if partners else None
    if kind == "real-edit":
        options = [w for w in typos.close_words(word) if w not in typos.CONFUSABLE and w != word]
        return rng.choice(options) if options else None
    raise ValueError(kind)


@dataclass
class Injected:
    start: int
    end: int
    kind: str
    original: str
    typo: str


def inject(text: str, rng: random.Random, rate: float, words=None) -> tuple[str, list[Injected]]:
    """Corrupt about `rate` of the eligible words (lower-case, 3+ letters, in the dictionary;
    confusable words at twice the rate so that class has enough cases), and every use of one
    word used two or three times with the same misspelling. `words`: (start, end) of the words
    that may take an error (default: every word). Returns the new text and where each error now is."""
    spans = [(m.start(), m.end()) for m in markup.WORD.finditer(text)] if words is None else list(words)
    eligible = [
        (a, b)
        for a, b in spans
        if text[a:b].islower() and b - a >= 3 and "'" not in text[a:b] and typos.is_word(text[a:b])
    ]
    counts: dict[str, list[tuple[int, int]]] = {}
    for a, b in eligible:
        counts.setdefault(text[a:b], []).append((a, b))
    repeated = sorted(w for w, at in counts.items() if 2 <= len(at) <= 3 and len(w) >= 4 and w not in typos.CONFUSABLE)
    changes: dict[tuple[int, int], tuple[str, str]] = {}  # span -> (kind, bad)
    if repeated:
        word = rng.choice(repeated)
        bad = corrupt(word, rng.choice(ONE_EDIT), rng)
        if bad and bad != word and not typos.is_word(bad):
            changes.update({span: ("repeated", bad) for span in counts[word]})
    for a, b in eligible:
        word = text[a:b]
        if (a, b) in changes:
            continue
        confusable = word in typos.CONFUSABLE
        if rng.random() >= (2 * rate if confusable else rate):
            continue
        kinds = ["confusable"] if confusable and rng.random() < 0.7 else list(ONE_EDIT) + ["two-edit", "real-edit"]
        kind = rng.choice(kinds)
        bad = corrupt(word, kind, rng)
        if bad is None or bad == word:
            continue
        if kind in NON_WORD and typos.is_word(bad):
            continue  # spelled another word: not a non-word error
        changes[(a, b)] = (kind, bad)
    out, errors, last, shift = [], [], 0, 0
    for (a, b), (kind, bad) in sorted(changes.items()):
        out.append(text[last:a])
        start = a + shift
        out.append(bad)
        errors.append(Injected(start, start + len(bad), kind, text[a:b], bad))
        shift += len(bad) - (b - a)
        last = b
    out.append(text[last:])
    return "".join(out), errors


def source_errors(text: str, words) -> list[tuple[int, int]]:
    """(start, end) of the words of an unmodified text that are its own errors (SOURCE_MISSPELLINGS
    and SOURCE_WRONG_WORDS), among `words` ((start, end) of its words)."""
    spans = set(words)
    out = {(a, b) for a, b in spans if text[a:b] in SOURCE_MISSPELLINGS}
    for phrase, word, _ in SOURCE_WRONG_WORDS:
        at = text.find(phrase)
        while at >= 0:
            a = at + re.search(rf"\b{word}\b", phrase).start()
            if (a, a + len(word)) in spans:
                out.add((a, a + len(word)))
            at = text.find(phrase, at + 1)
    return sorted(out)


def moved(spans, errors: list[Injected]) -> list[tuple[int, int]]:
    """Spans of an unmodified text where they are once `inject` has put `errors` in, leaving out
    any an error was put in."""
    edits, shift = [], 0  # (start, end) in the unmodified text, change in length
    for e in sorted(errors, key=lambda e: e.start):
        start = e.start - shift
        edits.append((start, start + len(e.original), len(e.typo) - len(e.original)))
        shift += len(e.typo) - len(e.original)
    out = []
    for a, b in spans:
        if not any(x < b and a < y for x, y, _ in edits):
            d = sum(change for x, _, change in edits if x < a)
            out.append((a + d, b + d))
    return out


def excerpts(path: Path, books: int, per_book: int, chars: int) -> list[tuple[int, str, str]]:
    """(book index, title, excerpt) from the valid split: `per_book` excerpts of about `chars`
    characters each, spread over the book and cut at paragraph breaks."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    valid = [r for r in rows if r["split"] == "valid"][:books]
    for b, row in enumerate(valid):
        text = row["text"]
        for k in range(per_book):
            at = int(len(text) * (k + 1) / (per_book + 1))
            a = text.find("\n\n", at) + 2
            end = text.rfind("\n\n", a, a + chars)
            if a > 1 and end > a:
                out.append((b, row["title"], text[a:end]))
    return out


def markdown_excerpts(path: Path, count: int, chars: int) -> list[tuple[int, str, str]]:
    """(index, name, text) of the first `count` documents of a revisions file, each its latest
    revision's opening cut at a paragraph break outside fenced code near `chars` characters."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if len(out) >= count:
                break
            row = json.loads(line)
            text = row["revisions"][-1]["text"]
            end = text.rfind("\n\n", 0, chars)
            while end > 0 and len(re.findall(r"^ {0,3}(?:```|~~~)", text[:end], re.MULTILINE)) % 2:
                end = text.rfind("\n\n", 0, end)
            if end > chars // 4:
                out.append((len(out), row["doc"], text[: end + 1]))
    return out


def technical_excerpts(data: Path, count: int, chars: int) -> list[tuple[int, str, str]]:
    """The Art of Command Line README in pieces (it is one long document), then Rust book chapters."""
    readme = json.loads(
        gzip.open(data / "revisions" / "art_of_command_line_README_en.jsonl.gz", "rt", encoding="utf-8").readline()
    )["revisions"][-1]["text"]
    out, at = [], 0
    while len(out) < count // 3 and at < len(readme):
        end = readme.rfind("\n\n", at, at + chars)
        while end > at and len(re.findall(r"^ {0,3}(?:```|~~~)", readme[at:end], re.MULTILINE)) % 2:
            end = readme.rfind("\n\n", at, end)
        if end <= at:
            break
        out.append((len(out), "art-of-command-line README", readme[at : end + 1]))
        at = end + 2
    for _, name, text in markdown_excerpts(data / "revisions" / "rust_book_chapters.jsonl.gz", count - len(out), chars):
        out.append((len(out), name, text))
    return out


def review_excerpts(path: Path, count: int, chars: int) -> list[tuple[int, str, str]]:
    """IMDB train reviews (never test), joined a few to a text of about `chars` characters."""
    out, cur = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = re.sub(r"<br\s*/?>", "\n", json.loads(line)["text"])
            cur.append(re.sub(r"\n{2,}", "\n\n", text).strip())
            if sum(len(c) for c in cur) >= chars:
                out.append((len(out), "imdb train reviews", "\n\n".join(cur) + "\n"))
                cur = []
                if len(out) >= count:
                    break
    return out


def layout_of(kind: str, text: str) -> markup.Layout:
    return markup.layout(text, markup.MARKDOWN if kind == "technical" else markup.PLAIN)


def findings_of(model, text: str, lay: markup.Layout | None = None) -> list[typos.WordFinding]:
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    doc = inference.IncrementalDocument(model, ids)
    starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
    return hints.analyse(text, starts, doc, lay or markup.layout(text, markup.PLAIN), caches=HintCaches())[2]


def prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    f = 2 * p * r / (p + r) if tp else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "tp": tp, "fp": fp, "fn": fn}


def evaluate(cases, flag_nw, flag_rw) -> dict:
    """Per-class recall, precision/recall/F1 of the non-word and real-word predictions, and false
    alarms per 1,000 correct words, counting the source texts' own errors as false alarms and
    (`..._source_errors_not_counted`) leaving them out of both the false alarms and the correct words.

    `cases`: (errors, predictions[, words in the text[, spans of the text's own errors]]) per
    text; `flag_nw(finding_or_none)` says whether a non-word prediction is made, `flag_rw(finding)`
    a real-word one. A prediction is right when it covers an injected error exactly.
    """
    per_class = {c: [0, 0] for c in CLASSES}  # found, total
    totals = {"non-word": [0, 0, 0], "real-word": [0, 0, 0]}
    false_alarms, correct_words, on_source, source_words = 0, 0, 0, 0
    for case in cases:
        errors, preds = case[0], case[1]
        truth = {(e.start, e.end): e for e in errors}
        flagged_nw = {span for span, kind, item in preds if kind == "non-word" and flag_nw(item)}
        flagged_rw = {span for span, kind, item in preds if kind == "real-word" and flag_rw(item)}
        for e in errors:
            hit = (e.start, e.end) in (flagged_nw | flagged_rw)
            per_class[e.kind][0] += hit
            per_class[e.kind][1] += 1
        for group, flagged in (("non-word", flagged_nw), ("real-word", flagged_rw)):
            kinds = NON_WORD if group == "non-word" else REAL_WORD
            tp = sum(1 for s in flagged if s in truth and truth[s].kind in kinds)
            totals[group][0] += tp
            totals[group][1] += len(flagged) - tp
            totals[group][2] += sum(1 for e in errors if e.kind in kinds) - tp
        wrong = (flagged_nw | flagged_rw) - set(truth)
        false_alarms += len(wrong)
        if len(case) > 2:
            correct_words += case[2] - len(errors)
        if len(case) > 3:
            on_source += len(wrong & set(case[3]))
            source_words += len(case[3])
    out = {g: prf(*v) for g, v in totals.items()}
    out["recall_by_class"] = {
        c: {"recall": round(f / t, 4) if t else None, "errors": t} for c, (f, t) in per_class.items()
    }
    out["false_alarms"] = false_alarms
    out["false_alarms_per_1000_words"] = round(1000 * false_alarms / correct_words, 2) if correct_words else None
    out["source_errors"] = source_words
    out["false_alarms_source_errors_not_counted"] = false_alarms - on_source
    out["false_alarms_per_1000_words_source_errors_not_counted"] = (
        round(1000 * (false_alarms - on_source) / (correct_words - source_words), 2)
        if correct_words > source_words
        else None
    )
    return out


def _without(preds, spans: set) -> list:
    return [p for p in preds if p[0] not in spans]


def precise_threshold(cases, target: float) -> tuple[float | None, dict | None]:
    """The lowest real-word gain threshold whose precision on these cases reaches `target`, a
    hint on one of the texts' own errors (case[3]) counted neither right nor wrong: it is a right
    hint, but no error was put there."""
    cases = [(c[0], _without(c[1], set(c[3])), *c[2:]) if len(c) > 3 else c for c in cases]
    gains = sorted(
        {
            round(item.gain, 2)
            for case in cases
            for _, k, item in case[1]
            if k == "real-word" and item is not None and np.isfinite(item.gain)
        }
    )
    for t in gains:
        res = evaluate(cases, lambda f: False, lambda f: f.gain >= t)["real-word"]
        if res["tp"] + res["fp"] and res["precision"] >= target:
            return t, res
    return None, None


def choose_threshold(cases, kind: str) -> tuple[float, dict]:
    """The gain threshold with the best F1 on these cases, for one kind of prediction."""
    gains = sorted(
        {
            round(item.gain, 2)
            for case in cases
            for _, k, item in case[1]
            if k == kind and item is not None and np.isfinite(item.gain)
        }
    )
    best = (float("-inf"), None, None)
    for t in gains:
        res = (
            evaluate(cases, lambda f: f is not None and f.gain >= t, lambda f: f.gain >= t)
            if kind == "non-word"
            else evaluate(cases, lambda f: False, lambda f: f.gain >= t)
        )
        if res[kind]["f1"] > best[0]:
            best = (res[kind]["f1"], t, res[kind])
    return best[1], best[2]


def curve(cases, kind: str) -> list[dict]:
    gains = sorted(
        {
            round(item.gain, 1)
            for case in cases
            for _, k, item in case[1]
            if k == kind and item is not None and np.isfinite(item.gain)
        }
    )
    out = []
    for t in gains[:: max(1, len(gains) // 60)]:
        res = evaluate(
            cases,
            (lambda f: f is not None and f.gain >= t) if kind == "non-word" else (lambda f: False),
            (lambda f: f.gain >= t) if kind == "real-word" else (lambda f: False),
        )
        out.append({"threshold": t, **res[kind]})
    return out


def predictions(model, errors, text, lay: markup.Layout | None = None):
    """(span, kind, finding or None) for the detector's findings and every prose word
    pyspellchecker calls unknown (a plain spell checker's predictions: finding None when the
    detector made none)."""
    lay = lay or markup.layout(text, markup.PLAIN)
    found = [f for f in findings_of(model, text, lay) if f.kind in ("non-word", "real-word")]
    by_span = {(f.start, f.end): f for f in found}
    preds = [((f.start, f.end), f.kind, f) for f in found]
    spell = typos.dictionary()
    for a, b in lay.words(text):
        if (a, b) not in by_span and spell.unknown([text[a:b]]):  # plain pyspellchecker: no extra rules
            preds.append(((a, b), "non-word", None))
    return preds


def hint_cost(model, tokens: int = 2000, repeat: int = 10) -> dict:
    """What choosing hints costs per publish on a ~2,000-token Markdown document (this project's
    README, cut at a paragraph): the Markdown parse alone and all hint material (surprise, words,
    typo findings, tone blocks), beside what a publish computed before (token surprise and
    blank-line paragraph scores)."""
    from vq_lsp.documents.textsync import TrackedText

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ids, offsets = model.tokenizer.encode_with_offsets(readme)
    cut = readme.rfind("\n\n", 0, offsets[min(tokens, len(ids) - 1)][0])
    text = readme[: cut + 1]
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)

    caches = HintCaches()  # kept across the repeats, as a server keeps them across publishes

    def median_ms(fn) -> float:
        fn()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return round(1000 * float(np.median(times)), 2)

    def before():  # the material without markup and typos: token surprise and paragraph scores
        doc.surprise(0, doc.n_tokens)
        hints.paragraph_scores(tt, doc)

    return {
        "tokens": len(tt.ids),
        "markdown_layout_ms": median_ms(lambda: markup.layout(text, markup.MARKDOWN)),
        "hint_material_ms": median_ms(lambda: hints.HintMaterial.of(tt, doc, 1, "markdown", caches=caches)),
        "previous_material_ms": median_ms(before),
    }


# Misspellings this repository's docs quote on purpose, as examples of what the detector flags.
DOC_EXAMPLES = frozenset({"recieve", "teh", "signatues"})
DOC_EXAMPLE_PHRASES = ("they took there departure", '"they\'re"', "'they're'")


def repo_docs_hints(model) -> dict:
    """Typo and real-word hints at the default thresholds on clean technical prose: this
    repository's README.md, docs/*.md (the rule list docs/grammar-rules.md aside) and
    training/README.md, read as Markdown, each alone (as
    the server sees it) and together (as `vq-lsp check` over the folder sees them, where it can
    learn the workspace's words). Every hint here is a false alarm but the examples the docs quote
    on purpose (DOC_EXAMPLES), which are counted apart."""
    repo = Path(__file__).resolve().parents[1]  # this file's checkout, whichever vq_lsp is measured
    docs = sorted(p for p in (repo / "docs").glob("*.md") if p.name != "grammar-rules.md")  # a generated list
    paths = [repo / "README.md", *docs, repo / "training" / "README.md"]
    defaults = DiagnosticSettings()
    words, alone, examples, shown = 0, [], 0, []
    texts = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lay = markup.layout(text, markup.MARKDOWN)
        words += sum(1 for _ in lay.words(text))
        texts.append((path, text))
        for f in findings_of(model, text, lay):
            if typos.flagged(f, defaults.typo_threshold, defaults.real_word_threshold):
                line = text[text.rfind("\n", 0, f.start) + 1 : text.find("\n", f.end)]
                quoted = f.word.lower() in DOC_EXAMPLES or any(p in line for p in DOC_EXAMPLE_PHRASES)
                examples += quoted
                if not quoted:
                    alone.append(f.word)
                shown.append(f"{path.relative_to(repo)}: {f.word}{' (a quoted example)' if quoted else ''}")
    out = {
        "documents": [str(p.relative_to(repo)) for p in paths],
        "words": words,
        "quoted_examples_flagged": examples,
        "false_alarms_each_alone": len(alone),
        "false_alarms_per_1000_words_each_alone": round(1000 * len(alone) / words, 2),
        "flagged_each_alone": shown,
    }
    try:
        from vq_lsp.scoring import check
    except ImportError:
        return out
    if hasattr(check, "workspace_words"):  # a checkout that learns the workspace's words
        settings = check.Settings()
        caches = HintCaches()
        scored = [check.scored(model, text, str(path.relative_to(repo)), settings, caches) for path, text in texts]
        learned = check.workspace_words([s for s in scored if s is not None])
        together = [w for w in alone if w.lower() not in learned]
        out["false_alarms_together"] = len(together)
        out["false_alarms_per_1000_words_together"] = round(1000 * len(together) / words, 2)
        out["workspace_words_learned"] = sorted(learned)
    return out


def texts_of(data: Path, args) -> dict[str, list[tuple[int, str, str]]]:
    return {
        "fiction": excerpts(data / "gutenberg" / "gutenberg_subset.jsonl.gz", args.texts, 1, args.chars),
        "technical": technical_excerpts(data, args.texts, args.chars),
        "reviews": review_excerpts(data / "imdb" / "imdb_train.jsonl.gz", args.texts, args.chars),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--texts", type=int, default=12, help="texts of each kind (alternating tune/report)")
    ap.add_argument("--chars", type=int, default=5000, help="characters per text (about 1,200 tokens)")
    ap.add_argument("--rate", type=float, default=0.02, help="share of eligible words given an error")
    ap.add_argument(
        "--real-word-precision",
        type=float,
        default=0.8,
        help="the real-word threshold is the lowest reaching this precision on the tune split",
    )
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--context", choices=CONTEXTS, default=SERVER.context, help="what a token sees (default: the server's)"
    )
    ap.add_argument(
        "--precision", choices=PRECISIONS, default=SERVER.precision, help="engine dtype (default: the server's)"
    )
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "typo_detection"))
    args = ap.parse_args(argv)
    plot = optional.can_plot("typo_detection.py")
    torch.set_num_threads(args.threads)
    model = inference.load_model(args.model, device="cpu", dtype=args.precision, context=args.context)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    split = {k: {"tune": [], "report": []} for k in KINDS}
    for kind, texts in texts_of(data_dir(args.data), args).items():
        for b, title, text in texts:
            lay = layout_of(kind, text)
            bad_text, errors = inject(text, rng, args.rate, lay.words(text))
            bad_lay = layout_of(kind, bad_text)
            name = "tune" if b % 2 == 0 else "report"
            n_words = sum(1 for _ in bad_lay.words(bad_text))
            own = moved(source_errors(text, list(lay.words(text))), errors)
            split[kind][name].append((errors, predictions(model, errors, bad_text, bad_lay), n_words, own))
            print(f"{kind:9} {name:6} {title[:40]:40} {len(errors):3} errors", file=sys.stderr)
    seconds = time.perf_counter() - t0

    cost = hint_cost(model)
    docs = repo_docs_hints(model)
    defaults = DiagnosticSettings()
    nw_t, nw_tuned = choose_threshold(split["fiction"]["tune"], "non-word")
    tune_all = [c for k in KINDS for c in split[k]["tune"]]
    rw_t, rw_tuned = precise_threshold(tune_all, args.real_word_precision)
    rw_t = rw_t if rw_t is not None else defaults.real_word_threshold
    report = {}
    for kind in KINDS:
        cases = split[kind]["report"]
        report[kind] = {
            "model_default_thresholds": evaluate(
                cases,
                lambda f: f is not None and typos.flagged(f, defaults.typo_threshold, float("inf")),
                lambda f: typos.flagged(f, float("inf"), defaults.real_word_threshold),
            ),
            "model_tuned_thresholds": evaluate(
                cases,
                lambda f: f is not None and typos.flagged(f, nw_t, float("inf")),
                lambda f: typos.flagged(f, float("inf"), rw_t),
            ),
            "pyspellchecker": evaluate(
                cases, lambda f: f is None or bool(typos.dictionary().unknown([f.word])), lambda f: False
            ),
            "dictionary_plus_close_word_no_model": evaluate(cases, lambda f: f is not None, lambda f: False),
        }
    results = {
        "label": args.label,
        "command": command_line("typo_detection", sys.argv[1:] if argv is None else argv),
        "hardware": "one CPU core" if args.threads == 1 else f"{args.threads} CPU threads",
        "model": str(model.path.relative_to(REPO) if model.path.is_relative_to(REPO) else model.path),
        "context": args.context,
        "precision": args.precision,
        "data": "fiction: gutenberg valid split; technical: revisions/ Markdown; reviews: imdb train (texts alternate "
        "tune/report)",
        "texts": {k: {n: len(v) for n, v in split[k].items()} for k in KINDS},
        "words": {k: sum(c[2] for c in split[k]["report"]) for k in KINDS},
        "errors": {k: sum(len(c[0]) for c in split[k]["report"]) for k in KINDS},
        "source_errors": {k: sum(len(c[3]) for c in split[k]["report"]) for k in KINDS},
        "seconds": round(seconds, 1),
        "defaults": {"typo_threshold": defaults.typo_threshold, "real_word_threshold": defaults.real_word_threshold},
        "tuned_on_tune_split": {
            "typo_threshold": nw_t,
            "non_word_f1": nw_tuned and nw_tuned["f1"],
            "real_word_threshold": rw_t,
            "real_word_precision_target": args.real_word_precision,
            "real_word_tune": rw_tuned,
        },
        "report_split": report,
        "hint_cost_2000_tokens": cost,
        "repo_docs_clean": docs,
        "curves_report_split": {
            "non-word": curve(split["fiction"]["report"], "non-word"),
            "real-word": curve([c for k in KINDS for c in split[k]["report"]], "real-word"),
        },
        "args": {**vars(args), "out": _shown(Path(args.out))},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(table(results))
    print(table(results))
    if plot:
        plot_curves(results, out.with_suffix(".png"))
    return 0


def _settings_said(context: str, precision: str) -> str:
    """Whether a run's context and dtype are the server's defaults, in words."""
    if (context, precision) == (SERVER.context, SERVER.precision):
        return "the server's defaults"
    return f"the server reads with `context: {SERVER.context}` in {SERVER.precision}"


def _shown(path: Path) -> str:
    """A path as the results show it: relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _pct(x) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.0f}%"


def table(r: dict) -> str:
    d, tuned = r["defaults"], r["tuned_on_tune_split"]
    names = [
        (
            "model_default_thresholds",
            f"vq-lsp detector, default thresholds ({d['typo_threshold']:g} / {d['real_word_threshold']:g} nats)",
        ),
        (
            "model_tuned_thresholds",
            f"vq-lsp detector, thresholds from the tune split ({tuned['typo_threshold']} / "
            f"{tuned['real_word_threshold']} nats)",
        ),
        ("dictionary_plus_close_word_no_model", "same dictionary rules, no model"),
        ("pyspellchecker", "pyspellchecker (every unknown word)"),
    ]
    lines = [
        f"{r.get('label', '')}: report split, model {Path(r['model']).name}, scored with "
        f"`context: {r.get('context', 'window')}` in {r.get('precision', 'float64')} "
        f"({_settings_said(r.get('context', 'window'), r.get('precision', 'float64'))}).",
        "",
    ]
    if "command" in r:
        lines += [f"`{r['command'].strip()}`, {r['hardware']}.", ""]
    for kind in KINDS:
        rs = r["report_split"][kind]
        counts = ", ".join(f"{c} {v['errors']}" for c, v in rs["pyspellchecker"]["recall_by_class"].items())
        lines += [
            f"**{kind}**: {r['texts'][kind]['report']} texts, {r['words'][kind]} words, {r['errors'][kind]} "
            f"injected errors ({counts}); errors of the source texts themselves: "
            f"{r.get('source_errors', {}).get(kind, 0)}.",
            "",
            "| detector | non-word P | non-word R | real-word P | real-word R | false alarms / 1,000 words | "
            "false alarms / 1,000 words, source errors not counted | " + " | ".join(f"R {c}" for c in CLASSES) + " |",
            "|---" * (7 + len(CLASSES)) + "|",
        ]
        for key, name in names:
            res = rs[key]
            nw, rw, by = res["non-word"], res["real-word"], res["recall_by_class"]
            lines.append(
                f"| {name} | {_pct(nw['precision'])} | {_pct(nw['recall'])} | {_pct(rw['precision'])} | "
                f"{_pct(rw['recall'])} | {res['false_alarms_per_1000_words']} | "
                f"{res.get('false_alarms_per_1000_words_source_errors_not_counted', 'n/a')} | "
                + " | ".join(_pct(by[c]["recall"]) for c in CLASSES)
                + " |"
            )
        lines.append("")
    d = r.get("repo_docs_clean")
    if d:
        together = (
            f"; read together as `vq-lsp check` reads a folder: {d['false_alarms_together']} "
            f"({d['false_alarms_per_1000_words_together']} per 1,000 words)"
            if "false_alarms_together" in d
            else ""
        )
        lines += [
            f"**clean technical prose** (this repository's README.md, docs/*.md, training/README.md; {d['words']:,} "
            f"words, no errors put in): typo and real-word false alarms at the default thresholds, each document "
            f"alone: {d['false_alarms_each_alone']} ({d['false_alarms_per_1000_words_each_alone']} per 1,000 "
            f"words){together}; the misspellings the docs quote as examples, flagged: "
            f"{d['quoted_examples_flagged']}. Flagged: " + ", ".join(d["flagged_each_alone"]) + ".",
            "",
        ]
    c = r["hint_cost_2000_tokens"]
    lines += [
        f"Per publish on a {c['tokens']}-token Markdown document (medians, 1 thread): Markdown layout "
        f"{c['markdown_layout_ms']} ms, all hint material (surprise, prose words, typo findings, tone) "
        f"{c['hint_material_ms']} ms, against {c['previous_material_ms']} ms for token surprise and "
        f"blank-line paragraph scores alone."
    ]
    return "\n".join(lines) + "\n"


def plot_curves(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for kind, style in (("non-word", "-"), ("real-word", "--")):
        pts = r["curves_report_split"][kind]
        ax.plot([p["recall"] for p in pts], [p["precision"] for p in pts], style, label=f"vq-lsp {kind}")
    for name, marker in (
        ("pyspellchecker", "s"),
        ("dictionary_plus_close_word_no_model", "^"),
        ("model_default_thresholds", "o"),
    ):
        nw = r["report_split"]["fiction"][name]["non-word"]
        ax.plot([nw["recall"]], [nw["precision"]], marker, label=f"{name.replace('_', ' ')} (non-word)")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("Typo detection on held-out prose (report split; non-word: fiction)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
