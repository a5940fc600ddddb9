"""Same text, same hints: how far a document's scores after an edit history are from a fresh open's.

    python -m benchmarks.same_text [--quick] [--out benchmarks/results]

The engine is exact at the positions its state holds, but the model reads positions, so the
positions an edit history leaves behind can change what a writer sees. This replays histories
of three kinds, all from data outside $VQ_LSP_DATA/eval:

- typing: IMDB test reviews typed word by word at the end, from their first 20 characters;
- revisions: real consecutive revisions (Rust book chapters, the Art of Command Line README)
  and sampled Wikipedia versions, each revision applied as the diff of its tokens;
- splices: random word insertions, deletions and replacements anywhere in IMDB test reviews.

At checkpoints (every few words or edits, and the end) the live state, as the server holds it
while edits keep coming, is compared with a fresh open of the same text: the document score,
every tone block's score (the blocks the server shows a tone for, with at least
`toneMinWords` words) and the tone verdict at the default threshold (label shown, or none).
At the end of each history the state is settled (IncrementalDocument.settle: what the server
does when the document is idle and `vq-lsp score` does for every revision) and compared again.

Causes are split, at the checkpoints: appends (typing) against middle edits (splices); and the
trunk (the codes) against the tail (the same codes finished at the fresh open's positions: the
position embedding rides the residual stream to the heads). Costs: MACs of the edits and of
settling against a dense pass per revision, and relabelled rows.

`--edits N` measures the median MAC saving of N single-token edits in the 10,000-word document of
benchmarks.typing_word_hints. `--accuracy N` also scores N IMDB test reviews (not those typed) by
a fresh open with the layout `spread_positions` gives and with the even spread over the whole
pool (stride pool // rows), so that a change of the open's layout can be seen not to cost accuracy.

Runs against another checkout for a before/after comparison (`PYTHONPATH=OTHER python -m
benchmarks.same_text`): a checkout without `settle` reports the live state only.
Single-threaded (one CPU core).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import data_dir, markdown_table, percentile, recorded_command, run_benchmark
from vq_lsp.engine_flags import add_engine_flags

QUICK = dict(typing=4, typing_words=120, rust=2, readme=0, wiki=3, revisions=4, splices=3, splice_edits=24, every=10)
FULL = dict(typing=12, typing_words=300, rust=8, readme=1, wiki=10, revisions=8, splices=8, splice_edits=40, every=10)


@dataclass
class Compare:
    """One checkpoint: live (or settled) state against a fresh open of the same text."""

    kind: str  # typing | revisions | splices
    doc: str
    step: int
    settled: bool
    doc_diff: float  # |positive score, history - fresh open|
    tail_diff: float | None  # |history - history's codes finished at the fresh open's positions|
    trunk_diff: float | None  # |that - fresh open|
    code_mismatch: float | None  # share of (row, layer) codes that differ from the fresh open's
    para_diffs: list[float] = field(default_factory=list)  # per tone block with enough words
    verdicts_same: list[bool] = field(default_factory=list)


@dataclass
class HistoryCost:
    kind: str
    doc: str
    revisions: int
    appends: int  # revisions that only added tokens at the end
    edit_macs: int
    dense_macs: int  # a dense pass over every revision
    relabelled: int
    full_respreads: int
    settle_macs: int
    settle_relabelled: int


# ----------------------------------------------------------------- histories
def imdb_rows(data: Path) -> list[dict]:
    with gzip.open(data / "imdb" / "imdb_test.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    random.Random(0).shuffle(rows)
    return rows


def review_text(row: dict) -> str:
    return row["text"].replace("<br /><br />", "\n\n").replace("<br />", "\n")


def typing_history(text: str, words: int, every: int) -> tuple[list[str], set[int]]:
    """Prefixes of `text` one word longer each, from its first 20 characters (at most `words` words
    typed): (texts, indices of checkpoints)."""
    ends = [i for i in range(20, len(text)) if text[i].isspace() and not text[i - 1].isspace()] + [len(text)]
    texts = [text[:20]] + [text[:e] for e in ends[:words]]
    return texts, {i for i in range(len(texts)) if i % every == 0} | {len(texts) - 1}


def splice_history(text: str, edits: int, rng: random.Random, every: int) -> tuple[list[str], set[int]]:
    """`edits` random word edits anywhere: insert 1-6 words taken from the text, delete 1-4, replace one."""
    words = text.split(" ")
    texts = [text]
    for _ in range(edits):
        at = rng.randrange(len(words))
        kind = rng.random()
        if kind < 0.5:
            src = rng.randrange(len(words))
            words[at:at] = words[src : src + rng.randint(1, 6)]
        elif kind < 0.8 and len(words) > 20:
            del words[at : at + rng.randint(1, 4)]
        else:
            words[at] = words[rng.randrange(len(words))]
        texts.append(" ".join(words))
    return texts, {i for i in range(len(texts)) if i % every == 0} | {len(texts) - 1}


def revision_rows(path: Path, limit: int, per_doc: int, rng: random.Random) -> list[tuple[str, list[str]]]:
    """`limit` documents (a seeded sample), each its last `per_doc` + 1 revisions."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    rng.shuffle(rows)
    out = []
    for row in rows[:limit]:
        if "revisions" in row:
            texts = [r["text"] for r in row["revisions"]]
            name = row["doc"]
        else:  # wiki_versions: {title, versions}
            texts, name = row["versions"], row["title"]
        texts = [t for t in texts if t.strip()][-(per_doc + 1) :]
        if len(texts) >= 2:
            out.append((name, texts))
    return out


# ----------------------------------------------------------------- measuring
def tone_blocks(model, doc, text: str, name: str) -> list[tuple[dict, int]]:
    """(scores, words) of the tone blocks of `text` as the server finds them (markup from the name)."""
    from vq_lsp.hints import markup
    from vq_lsp.hints.material import tone_blocks as blocks

    _, offsets = model.tokenizer.encode_with_offsets(text)
    starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
    lay = markup.layout(text, markup.markup_of(name=name), markup.language_of(name))
    return [(b.scores, b.words) for b in blocks(starts, doc, lay)]


def window_logp(model, window, positions: np.ndarray | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of a window's class log-probabilities from its codes, its tokens at `positions` (None:
    its own), and its codes per (row, layer)."""
    net, order = model.net, window.order
    ids = torch.from_numpy(window.ids_host[order]).unsqueeze(0)
    own = window.pos_host[order]
    pos = torch.from_numpy(own if positions is None else positions).unsqueeze(0)
    codes = [window.codes[l, order] for l in range(model.config.num_hidden_layers)]

    def forced(i, s):  # the window's own codes, whatever the sums at these positions are
        cb = net.layers[i].vq.codebook
        heads = torch.arange(cb.shape[0])
        return cb[heads, codes[i]].flatten(-2).unsqueeze(0).to(s.dtype), codes[i].unsqueeze(0)

    with torch.no_grad():
        out = net(ids, pos, quantizer=forced)
    return torch.log_softmax(out.cls_logits[0, 1:].double(), -1).sum(0), torch.stack(codes)


def positive(total: torch.Tensor, n: int, labels: list[str]) -> float:
    return float(torch.softmax(total / max(1, n), -1)[labels.index("positive")])


def compare(model, live, fresh, text: str, name: str, kind: str, step: int, settled: bool, cfg) -> Compare:
    from vq_lsp.hints.selection import shown_tone

    labels = list(model.config.labels)
    doc_diff = abs(live.scores["positive"] - fresh.scores["positive"])
    tail = trunk = mismatch = None
    if [w.n_tokens for w in live.windows] == [w.n_tokens for w in fresh.windows] and model.config.vq:
        hist = hybrid = ref = 0
        wrong = total = 0
        for lw, fw in zip(live.windows, fresh.windows):
            a, codes = window_logp(model, lw, None)
            b, _ = window_logp(model, lw, fw.pos_host[fw.order])
            c, fresh_codes = window_logp(model, fw, None)
            hist, hybrid, ref = hist + a, hybrid + b, ref + c
            wrong += int((codes != fresh_codes).any(-1).sum())
            total += codes.shape[0] * codes.shape[1]
        n = live.n_tokens
        tail = abs(positive(hist, n, labels) - positive(hybrid, n, labels))
        trunk = abs(positive(hybrid, n, labels) - positive(ref, n, labels))
        mismatch = wrong / max(1, total)
    out = Compare(kind, name, step, settled, doc_diff, tail, trunk, mismatch)
    for (ls, words), (fs, _) in zip(tone_blocks(model, live, text, name), tone_blocks(model, fresh, text, name)):
        if words < cfg.tone_min_words:
            continue
        out.para_diffs.append(abs(ls["positive"] - fs["positive"]))
        out.verdicts_same.append(verdict(shown_tone(ls, words, cfg)) == verdict(shown_tone(fs, words, cfg)))
    return out


def verdict(shown: tuple[str, float] | None) -> str | None:
    """The tone a block shows (its label), or None when it shows none."""
    return None if shown is None else shown[0]


def replay(model, kind: str, name: str, texts: list[str], checkpoints: set[int], cfg) -> tuple[list, HistoryCost]:
    """Apply a history revision by revision, comparing with fresh opens at the checkpoints; settle at the end."""
    import inference

    tok = model.tokenizer
    ids = tok.encode(texts[0])
    doc = inference.IncrementalDocument(model, ids)
    cost = HistoryCost(kind, name, len(texts), 0, 0, doc.dense_macs(), 0, 0, 0, 0)
    cost.edit_macs = doc.dense_macs()
    compares = []
    for step, text in enumerate(texts[1:], 1):
        new = tok.encode(text)
        if not new:
            continue
        splices = inference.diff(ids, new)
        cost.appends += all(s.start == s.end == len(ids) for s in splices)
        res = doc.apply(splices).cost
        ids = new
        cost.edit_macs += res.incremental_macs
        cost.dense_macs += doc.dense_macs()
        cost.relabelled += res.relabelled
        cost.full_respreads += res.full_respreads
        if step in checkpoints:
            fresh = inference.IncrementalDocument(model, ids)
            compares.append(compare(model, doc, fresh, text, name, kind, step, False, cfg))
    if hasattr(doc, "settle"):
        res = doc.settle().cost
        cost.settle_macs, cost.settle_relabelled = res.incremental_macs, res.relabelled
        fresh = inference.IncrementalDocument(model, ids)
        compares.append(compare(model, doc, fresh, texts[-1], name, kind, len(texts) - 1, True, cfg))
    return compares, cost


def accuracy(model, rows: list[dict]) -> dict:
    """Fresh-open accuracy of reviews (first 511 tokens) under two layouts: `spread_positions` and
    the even spread over the whole pool."""
    from inference.positions import spread_positions

    net, pool = model.net, model.config.position_pool
    labels = list(model.config.labels)
    got = {"layout": [], "whole_pool": []}
    for row in rows:
        ids = [model.config.bos_token_id, *model.tokenizer.encode(review_text(row))[:511]]
        n = len(ids)
        for name, pos in (("layout", spread_positions(n, pool)), ("whole_pool", torch.arange(n) * (pool // n))):
            with torch.no_grad():
                out = net(torch.tensor([ids]), pos.unsqueeze(0))
            lp = torch.log_softmax(out.cls_logits[0, 1:].double(), -1).sum(0)
            got[name].append(positive(lp, n - 1, labels))
    y = np.array([r["label"] for r in rows])
    a, b = np.array(got["layout"]), np.array(got["whole_pool"])
    return {
        "reviews": len(rows),
        "accuracy_layout": float(((a > 0.5) == y).mean()),
        "accuracy_whole_pool": float(((b > 0.5) == y).mean()),
        "mean_abs_diff": float(np.abs(a - b).mean()),
    }


def edit_savings(model, data: Path, words: int, edits: int) -> dict:
    """Median MAC saving of single-token edits (replace, insert, delete in turn, at seeded random
    places) in the long Markdown document of benchmarks.typing_word_hints: a dense pass over the
    edited windows against the update. What a layout change may cost the engine's saving."""
    import inference
    from benchmarks.typing_word_hints import document

    ids = model.tokenizer.encode(document(data, words))
    doc = inference.IncrementalDocument(model, ids)
    rng = random.Random(5)
    savings = []
    for k in range(edits):
        at = rng.randrange(1, doc.n_tokens - 1)
        new = [ids[rng.randrange(len(ids))]]
        splice = [inference.Splice(at, at + 1, new), inference.Splice(at, at, new), inference.Splice(at, at + 1, [])][
            k % 3
        ]
        savings.append(doc.apply([splice]).cost.speedup)
    return {"words": words, "tokens": len(ids), "edits": edits, "median_mac_saving": float(np.median(savings))}


# ----------------------------------------------------------------- run and report
def run(args) -> dict:
    import inference
    from vq_lsp.settings import DiagnosticSettings

    torch.set_num_threads(1)
    sizes = QUICK if args.quick else FULL
    data = data_dir(args.data)
    model = inference.load_model(args.model, device="cpu", dtype=args.precision, context=args.context)
    cfg = DiagnosticSettings()
    rng = random.Random(0)
    reviews = imdb_rows(data)
    histories = []
    for row in reviews[: sizes["typing"]]:
        texts, cps = typing_history(review_text(row), sizes["typing_words"], sizes["every"])
        histories.append(("typing", f"imdb_test review {row['id']}", texts, cps))
    sources = [("rust_book_chapters", sizes["rust"], ".md"), ("art_of_command_line_README_en", sizes["readme"], ".md")]
    for stem, limit, ext in sources:
        for name, texts in revision_rows(data / "revisions" / f"{stem}.jsonl.gz", limit, sizes["revisions"], rng):
            name = name if name.endswith(ext) else name + ext
            histories.append(("revisions", name, texts, set(range(1, len(texts)))))
    for name, texts in revision_rows(data / "revisions" / "wiki_versions.jsonl.gz", sizes["wiki"], 8, rng):
        histories.append(("revisions", f"wikipedia {name}", texts, set(range(1, len(texts)))))
    for row in reviews[sizes["typing"] : sizes["typing"] + sizes["splices"]]:
        texts, cps = splice_history(review_text(row), sizes["splice_edits"], rng, sizes["every"])
        histories.append(("splices", f"imdb_test review {row['id']}", texts, cps))
    compares, costs = [], []
    t0 = time.perf_counter()
    for kind, name, texts, cps in histories:
        got, cost = replay(model, kind, name, texts, cps, cfg)
        compares += got
        costs.append(cost)
        seconds = time.perf_counter() - t0
        print(f"  {kind:9s} {name[:50]:50s} {len(texts):4d} revisions, {seconds:6.1f} s", file=sys.stderr)
    start = sizes["typing"] + sizes["splices"]
    acc = accuracy(model, reviews[start : start + args.accuracy]) if args.accuracy else None
    saving = edit_savings(model, data, args.edit_words, args.edits) if args.edits else None
    return {
        "command": ["python", "-m", "benchmarks.same_text", *recorded_command(args.argv)],
        "hardware": "one CPU core (torch.set_num_threads(1))",
        "precision": args.precision,
        "context": args.context,
        "has_settle": hasattr(inference.IncrementalDocument, "settle"),
        "sizes": sizes,
        "compares": [asdict(c) for c in compares],
        "costs": [asdict(c) for c in costs],
        "accuracy": acc,
        "edit_savings": saving,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def summary_rows(compares: list[dict], label: str) -> list[str] | None:
    if not compares:
        return None
    docs = [c["doc_diff"] for c in compares]
    paras = [d for c in compares for d in c["para_diffs"]]
    same = [v for c in compares for v in c["verdicts_same"]]

    def fmt(xs, q):
        return f"{percentile(xs, q):.3f}" if xs else "-"

    tails = [c["tail_diff"] for c in compares if c["tail_diff"] is not None]
    trunks = [c["trunk_diff"] for c in compares if c["trunk_diff"] is not None]
    codes = [c["code_mismatch"] for c in compares if c["code_mismatch"] is not None]
    return [
        label,
        str(len(compares)),
        f"{np.mean(docs):.3f} / {max(docs):.3f}",
        str(len(paras)),
        f"{fmt(paras, 0.5)} / {fmt(paras, 0.95)} / {max(paras) if paras else 0:.3f}",
        f"{100 * np.mean(same):.1f}%" if same else "-",
        f"{np.mean(trunks):.3f} / {np.mean(tails):.3f}" if tails else "-",
        f"{100 * np.mean(codes):.2f}%" if codes else "-",
    ]


def report(results: dict) -> str:
    comps = results["compares"]
    rows = []
    for settled in (False, True):
        for kind in ("typing", "revisions", "splices", None):
            sel = [c for c in comps if c["settled"] == settled and (kind is None or c["kind"] == kind)]
            what = f"{kind or 'all'}, {'settled at the end' if settled else 'live, at checkpoints'}"
            row = summary_rows(sel, what)
            if row:
                rows.append(row)
    table = markdown_table(
        [
            "histories",
            "checkpoints",
            "document |diff| mean / max",
            "tone blocks",
            "block |diff| median / p95 / max",
            "same tone verdict",
            "mean |diff| from codes / from positions in the tail",
            "codes differing",
        ],
        rows,
    )
    crows = []
    for kind in ("typing", "revisions", "splices"):
        cs = [c for c in results["costs"] if c["kind"] == kind]
        if not cs:
            continue
        edit, dense = sum(c["edit_macs"] for c in cs), sum(c["dense_macs"] for c in cs)
        settle = sum(c["settle_macs"] for c in cs)
        crows.append(
            [
                kind,
                str(len(cs)),
                str(sum(c["revisions"] for c in cs)),
                str(sum(c["appends"] for c in cs)),
                f"{dense / max(1, edit):.2f}x",
                f"{dense / max(1, edit + settle):.2f}x",
                str(sum(c["relabelled"] for c in cs)),
                str(sum(c["full_respreads"] for c in cs)),
                str(sum(c["settle_relabelled"] for c in cs)),
            ]
        )
    costs = markdown_table(
        [
            "histories",
            "documents",
            "revisions",
            "pure appends",
            "MAC saving of the edits (dense pass per revision / edits)",
            "with one settle at the end",
            "rows relabelled by edits",
            "whole-window re-spreads",
            "rows relabelled by the settle",
        ],
        crows,
    )
    lines = [
        "# Same text, same hints: scores after an edit history against a fresh open",
        "",
        f"`{' '.join(results['command'])}`, {results['hardware']}, {results['precision']}, "
        f"context {results.get('context', 'window')}, bundled model unless --model; {results['seconds']} s.",
        "Positive-class score differences; a tone verdict is the label shown at the default threshold, or none.",
        "",
        table,
        "",
        costs,
    ]
    acc = results.get("accuracy")
    if acc:
        lines += [
            "",
            f"Fresh-open accuracy on {acc['reviews']} IMDB test reviews (first 511 tokens): "
            f"{100 * acc['accuracy_layout']:.1f}% with the open's layout (spread_positions), "
            f"{100 * acc['accuracy_whole_pool']:.1f}% spread over the whole pool; "
            f"mean |score difference| {acc['mean_abs_diff']:.3f}.",
        ]
    saving = results.get("edit_savings")
    if saving:
        lines += [
            "",
            f"Single-token edits in a {saving['words']:,}-word Markdown document ({saving['tokens']:,} tokens): "
            f"median MAC saving {saving['median_mac_saving']:.1f}x over {saving['edits']} edits.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small sample (a couple of minutes on one core)")
    add_engine_flags(parser, "precision", "context")
    parser.add_argument("--accuracy", type=int, default=0, help="also compare the open's layouts on N reviews")
    parser.add_argument("--edits", type=int, default=0, help="also measure N single-token edits' MAC saving")
    parser.add_argument("--edit-words", type=int, default=10000, help="words of the document --edits edits")
    parser.add_argument("--name", default="same_text", help="results file stem")
    argv = sys.argv[1:] if argv is None else argv
    args_name = parser.parse_known_args(argv)[0].name
    return run_benchmark(args_name, parser, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
