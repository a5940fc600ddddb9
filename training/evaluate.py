"""Evaluate a fine-tuned VQ model (and its dense teacher) into one JSON report.

Why each figure is here: locality alone can be
faked by a collapsed codebook, so the flip rate after single-token edits is always reported
next to held-out code usage (codes used of 64, perplexity) and the LM loss gap between VQ on
and VQ off. Accuracy/F1 use inference-time positions (evenly spread over the pool), the MAC
saving and exactness come from the real incremental engine, and the incremental score after
an edit sequence is compared with a fresh open of the same text.

Data: IMDB test (a seeded subset), held-out LM text (Gutenberg valid split, IMDB test text), real
revision pairs for the paper protocol against a paragraph cache (``protocol``) and,
for the writing-style, paragraph-context and tone-hint sections (``robustness``, ``tone_hints``), the
IMDB training rows that fine-tuning held out and neutral paragraphs of documents never trained on
(``neutral``). Nothing under eval/ is read.
"""

from __future__ import annotations

import functools
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from . import common
from .data import imdb_examples, sample_chunks
from .distill import pool_batch
from .neutral import neutral_paragraphs
from .reviews import (
    NEUTRAL,
    accuracy,
    accuracy_of,
    document_scores,
    encode_reviews,
    model_device,
)
from .robustness import STYLES, context_report, style_report, style_scores
from .teacher import load_or_collect_tokens
from .tokenizer import BOS_ID, load_tokenizer
from .tone_hints import hint_report
from .vq import code_stats

POSITION_BUCKETS = (0, 16, 256, 1024, 2048)
VALID_TOKENS = 200_000  # held-out LM text the LM loss and the single-token edits are measured on


@torch.no_grad()
def lm_report(net, batches) -> dict:
    """LM loss with VQ on and off, held-out code usage per layer, and the VQ-on loss by token
    index: with sequences as long as the window, the buckets past the distillation length show
    whether the longer attention sums seen at inference (no normalisation) do harm."""
    losses = {True: [], False: []}
    per_token = []
    codes = [[] for _ in net.layers]
    dev = model_device(net)
    for ids, pos in batches:
        ids, pos = ids.to(dev), pos.to(dev)
        for vq in (True, False):
            out = net(ids, pos, vq=vq)
            logits = net.lm_logits(out.hidden)  # (B, T, V)
            nll = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
            losses[vq].append(nll.mean().item())
            if vq:
                per_token.append(nll.view(ids.shape[0], -1))  # (B, T-1)
                for i, c in enumerate(out.codes):
                    codes[i].append(c.reshape(-1, c.shape[-1]))
    on, off = sum(losses[True]) / len(batches), sum(losses[False]) / len(batches)
    usage = [code_stats(torch.cat(c), net.config.vq_codes) for c in codes]
    per_token = torch.cat(per_token)  # (N, T-1)
    t = per_token.shape[1]
    by_index = {
        f"{a}-{b}": per_token[:, a:b].mean().item() for a, b in zip(POSITION_BUCKETS, POSITION_BUCKETS[1:]) if a < t
    }
    return {
        "lm_loss_vq_on": on,
        "lm_loss_vq_off": off,
        "vq_loss_gap": on - off,
        "code_usage_per_layer": usage,
        "lm_loss_vq_on_by_token_index": by_index,
        "seq": t + 1,
    }


def edit_sequences(valid: torch.Tensor, docs: int, seq: int, seed: int) -> torch.Tensor:
    """The held-out sequences the card's single-token edits are measured on: (docs, seq), BOS first."""
    body = sample_chunks(valid, docs, seq - 1, 90_000, seed)  # (N, T-1)
    return torch.cat([torch.full((docs, 1), BOS_ID), body], 1)


DISTANCE_BANDS = (8, 64, 256)  # upper ends of flip_report's bands of distance from the edit (tokens)
# Upper ends of its bands of depth: the tokens before a row in its window. Attention sums are
# unnormalised, so a row's size grows with its depth while an edit's change to it does not: early
# rows flip far more often than late ones.
DEPTH_BANDS = (64, 256, 512)


@torch.no_grad()
def flip_report(net, ids: torch.Tensor, seed: int) -> dict:
    """Replace one random token per sequence; per layer, the fraction of later positions whose
    code flipped and whose layer input changed (the engine's dirty set), at spread positions."""
    from inference.positions import spread_positions

    from .locality import make_edits

    b, t = ids.shape
    dev = model_device(net)
    ids = ids.to(dev)
    pos = spread_positions(t, net.config.position_pool).to(dev).expand(b, t)  # (B, T)
    g = torch.Generator().manual_seed(seed)
    edited, where = make_edits(ids, torch.ones_like(ids, dtype=torch.bool), net.config.vocab_size, g)
    a, e = net(ids, pos, vq=True), net(edited, pos, vq=True)
    depth = torch.arange(t, device=dev)  # (T,): tokens before each row
    distance = depth[None] - where[:, None]  # (B, T): tokens after the edit
    later = distance > 0
    band = torch.bucketize(distance, torch.tensor(DISTANCE_BANDS, device=dev))  # (B, T): 0 .. len(bands)
    depth_band = torch.bucketize(depth, torch.tensor(DEPTH_BANDS, device=dev)).expand(b, t)  # (B, T)
    flips, dirty, by_distance, by_depth = [], [], [], []
    inputs_a, inputs_e = [None] + a.layer_outputs[:-1], [None] + e.layer_outputs[:-1]
    for i, (ca, ce) in enumerate(zip(a.codes, e.codes)):
        flipped = (ca != ce).any(-1) & later
        flips.append(float(flipped[later].float().mean()))
        by_distance.append(torch.bincount(band[flipped], minlength=len(DISTANCE_BANDS) + 1).tolist())
        by_depth.append(torch.bincount(depth_band[flipped], minlength=len(DEPTH_BANDS) + 1).tolist())
        if i == 0:
            dirty.append(0.0)  # only the edited token itself is dirty at layer 0
        else:
            dirty.append(float((inputs_a[i] != inputs_e[i]).any(-1)[later].float().mean()))
    return {
        "flip_rate_per_layer": flips,
        "dirty_fraction_of_later_per_layer": dirty,
        "mean_flip_rate": sum(flips) / len(flips),
        "later_positions": int(later.sum()),  # what each rate is a share of
        # where the flips land: per layer, flipped later positions per band of distance from the edit
        # (1..8, 9..64, 65..256, 257.. tokens after it), and how many later positions each band has
        "distance_bands": list(DISTANCE_BANDS),
        "flips_by_distance": by_distance,
        "later_by_distance": torch.bincount(band[later], minlength=len(DISTANCE_BANDS) + 1).tolist(),
        # and by depth: flipped later positions per band of tokens before them in the window
        "depth_bands": list(DEPTH_BANDS),
        "flips_by_depth": by_depth,
        "later_by_depth": torch.bincount(depth_band[later], minlength=len(DEPTH_BANDS) + 1).tolist(),
        "sequences": b,
        "tokens": t,
    }


def engine_report(net, tok_path: Path, docs: list[list[int]], seed: int) -> dict:
    """The real engine: MAC saving of one replaced token, exactness, and incremental-vs-fresh scores."""
    from inference import IncrementalDocument, LoadedModel, Splice, Tokenizer

    model = LoadedModel.from_net(net, Tokenizer.from_file(tok_path), device="cpu", dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    speedups, exact, score_gaps, seconds = [], [], [], []
    vocab = net.config.vocab_size
    for ids in docs:
        doc = IncrementalDocument(model, ids)
        j = int(torch.randint(1, len(ids), (1,), generator=g))
        res = doc.apply([Splice(j, j + 1, [int(torch.randint(4, vocab, (1,), generator=g))])])
        speedups.append(res.cost.speedup)
        seconds.append(res.cost.seconds)
        # A short edit sequence (replace, insert, delete), then compare with a fresh open.
        for _ in range(8):
            n = doc.n_tokens
            k = int(torch.randint(0, n, (1,), generator=g))
            kind = int(torch.randint(0, 3, (1,), generator=g))
            new = [int(torch.randint(4, vocab, (1,), generator=g))]
            sp = Splice(k, k + 1, new) if kind == 0 else Splice(k, k, new) if kind == 1 else Splice(k, k + 1, [])
            doc.apply([sp])
        check = doc.verify()
        exact.append(bool(check.codes_equal))
        fresh = IncrementalDocument(model, doc.token_ids)
        label = net.config.labels[-1]
        score_gaps.append(abs(doc.scores[label] - fresh.scores[label]))
    model.net.float()  # LoadedModel moved the shared net to float64
    return {
        "single_token_mac_speedup_median": statistics.median(speedups),
        "single_token_mac_speedups": speedups,
        "single_token_edit_seconds_median": statistics.median(seconds),
        "verify_codes_equal": exact,
        "incremental_vs_fresh_score_abs_diff_mean": sum(score_gaps) / len(score_gaps),
        "incremental_vs_fresh_score_abs_diff_max": max(score_gaps),
        "docs": len(docs),
        "doc_tokens": [len(d) for d in docs],
    }


def tone_hint_section(
    net,
    card: dict,
    tok,
    args,
    held: list[tuple[str, int]],
    by_style: dict[str, torch.Tensor],
    test: list[tuple[str, int]],
    test_probs: torch.Tensor | None,
    positions_for,
) -> dict:
    """``tone_hints.hint_report`` on IMDB test, the held-out reviews in every style (their scores
    already computed: ``test_probs``, ``by_style``), and held-out neutral paragraphs (all of them
    and per source)."""
    known = {f"held_out_{name}": probs for name, probs in by_style.items()}
    if test_probs is not None:
        known["imdb_test"] = test_probs

    def scores_of(name: str, texts: list[str]) -> torch.Tensor:
        if name in known:
            return known[name]
        return document_scores(net, encode_reviews(tok, [(t, 0) for t in texts], args.max_tokens), positions_for)

    sets: dict[str, list[tuple[str, int]]] = {"imdb_test": test}
    sets.update({f"held_out_{name}": [(f(t), y) for t, y in held] for name, f in STYLES.items()})
    if args.neutral_paragraphs:
        paragraphs = neutral_paragraphs(args.data, "test", args.neutral_paragraphs, seed=args.seed)
        sets["neutral"] = [(p.text, NEUTRAL) for p in paragraphs]
        sets["neutral_technical"] = [(p.text, NEUTRAL) for p in paragraphs if p.source != "gutenberg_narration"]
        sets["neutral_narration"] = [(p.text, NEUTRAL) for p in paragraphs if p.source == "gutenberg_narration"]
    temperature = (card.get("calibration") or {}).get("temperature")
    report = hint_report(scores_of, sets, temperature)
    report["neutral_data"] = "neutral.neutral_paragraphs part 'test' (documents never trained on)"
    return report


def run_evaluate(args) -> Path:
    from inference import load_model_folder
    from inference.positions import spread_positions

    out = common.start_run(args)
    t0 = time.time()
    net, card = load_model_folder(args.model)
    tok_path = Path(args.model) / "tokenizer.json"
    tok = load_tokenizer(tok_path)
    pool = net.config.position_pool
    report: dict = {"model": str(args.model)}

    test_ids, test, test_probs = [], [], None
    if not args.no_imdb:
        test, _ = imdb_examples(args.data, "test", limit=args.test_limit, seed=args.seed)
        test_ids = encode_reviews(tok, test, args.max_tokens)
        spread = functools.partial(spread_positions, pool=pool)
        test_probs = document_scores(net, test_ids, spread)
        report["imdb_test"] = {
            "vq": accuracy_of(test_probs.argmax(-1), torch.tensor([y for _, y in test])),
            "subset": f"{len(test)} reviews (seeded shuffle of imdb_test), first {args.max_tokens} tokens",
        }
    if args.dense_model and not args.no_imdb:
        dense, dense_card = load_model_folder(args.dense_model)
        report["dense_teacher_finetune"] = dense_card.get("finetune")
        dense_acc = accuracy(dense, test_ids, lambda n: spread_positions(n, dense.config.position_pool))
        report["imdb_test"]["dense_teacher"] = dense_acc
        report["imdb_test"]["vq_over_dense_accuracy"] = report["imdb_test"]["vq"]["accuracy"] / max(
            1e-9, dense_acc["accuracy"]
        )

    if args.robust_reviews:  # held-out training reviews (finetune --holdout rows), never the test split
        _, held = imdb_examples(args.data, "train", seed=args.seed, holdout=args.holdout)
        if len(held) < args.robust_reviews:
            raise SystemExit(
                f"--robust-reviews {args.robust_reviews} is more than the {len(held)} held-out rows "
                f"(--holdout {args.holdout})"
            )
        spread = functools.partial(spread_positions, pool=pool)
        held = held[: args.robust_reviews]
        by_style = style_scores(net, tok, held, args.max_tokens, spread)
        report["robustness"] = style_report(net, tok, held, args.max_tokens, spread, by_style)
        report["paragraph_context"] = context_report(
            net, tok, held[: args.context_reviews], args.max_tokens, spread, args.seed
        )
        report["tone_hints"] = tone_hint_section(net, card, tok, args, held, by_style, test, test_probs, spread)

    valid = load_or_collect_tokens(tok, args.data, "valid", VALID_TOKENS, out / "tokens_valid.pt", args.seed)
    lm_seq = args.lm_seq or net.config.window_tokens
    lm_batches = [pool_batch(valid, 2, lm_seq, 50_000 + i, args.seed, pool) for i in range(args.lm_batches)]
    report["held_out_lm"] = lm_report(net, lm_batches)

    ids = edit_sequences(valid, args.edit_docs, args.edit_seq, args.seed)  # (N, T)
    body = ids[:, 1:]
    report["single_token_edits"] = {**flip_report(net, ids, args.seed), "seed": args.seed}
    reviews = [r[0] for r in test_ids[: args.edit_docs // 2]]  # real reviews, without BOS
    chunks = [b[1:].tolist() for b in body[: args.edit_docs - len(reviews)]]  # held-out LM text
    report["engine"] = engine_report(net, tok_path, reviews + chunks, args.seed)
    if args.protocol_pairs:
        from .protocol import protocol_report

        report["paper_protocol"] = protocol_report(net, tok_path, args.data, args.protocol_pairs, args.seed)

    if args.teacher and (Path(args.teacher) / "teacher_report.json").is_file():
        import json

        report["teacher_uses_context"] = json.loads((Path(args.teacher) / "teacher_report.json").read_text())
    report["seconds"] = round(time.time() - t0, 1)
    common.write_json(out / "eval.json", report)
    return out / "eval.json"
