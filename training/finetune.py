"""Fine-tune for IMDB sentiment with the per-token head; the document score is the token mean.

Why this document score: it is what the engine reports and what updates incrementally (a
paragraph's score is the mean of its tokens' class log-probabilities, renormalised; see
``inference.document.span_probs``). The loss is the negative log of the document probability
of the true label, trained with sampled pool positions as everywhere else, optionally plus a
token-level term (every token's own cross-entropy against the review's label, ``--w-token``).
An earlier aggregate, the mean of token probabilities, squashed documents towards 0.5 and
fine-tuning crawled (64% after 2,240 reviews); with log-probabilities the head on frozen
features is plain logistic regression on mean-pooled states (``--head-fit``). A small LM loss keeps the LM head
(surprise hints)
alive. With ``--scope all`` the VQ model keeps EMA codebooks, the Gumbel pseudo-gradient and the
locality term; ``--scope post-vq`` (the bundled recipe, see ``post_vq``) trains only the modules
after the last quantiser, so no code changes. The dense teacher (``--dense``) is fine-tuned by
the same code for the comparison row.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F

from . import common, post_vq
from .augment import augmented_reviews, neutral_variants, parse_mix
from .data import imdb_examples
from .head_fit import fit_head
from .locality import layer_shares, locality_loss, make_edits
from .neutral import neutral_paragraphs
from .order_only import freeze_order_only
from .reviews import (
    NEUTRAL,
    accuracy,
    doc_probs,
    document_nll,
    encode_reviews,
    encode_with_context,
    opinion_accuracy,
    pad_batch,
    param_groups,
    pick_batch,
    rows_by_label,
    scored_rows,
    token_cross_entropy,
)
from .tokenizer import load_tokenizer
from .vq import RefitCodesError, TrainQuantizer, check_live_codes, kmeans_init


def load_for_finetune(args):
    """(net, tokenizer path, is_vq). The VQ model comes from our folder, the dense one from OPT."""
    from inference import load_hf_opt, load_model_folder

    folder = Path(args.model)
    if args.dense:
        net = load_hf_opt(folder, attention="softmax", vq=False)
    else:
        net, _ = load_model_folder(folder)
        if getattr(args, "tail_from", None):
            post_vq.copy_tail(load_model_folder(Path(args.tail_from))[0], net)
    tok_path = Path(args.tokenizer) if args.tokenizer else folder / "tokenizer.json"
    return net.train(), tok_path, (not args.dense) and net.config.vq


def finetune_losses(net, quant, batch, args, step: int) -> dict[str, torch.Tensor]:
    ids, pos, valid, scored, labels = batch
    b = ids.shape[0]
    n_edit = min(b, args.edit_batch) if (quant is not None and args.locality > 0) else 0
    all_ids, all_pos, all_valid = ids, pos, valid
    if n_edit:
        g = torch.Generator().manual_seed(args.seed * 31 + step)
        edited, where = make_edits(ids[:n_edit], valid[:n_edit], net.config.vocab_size, g)
        all_ids, all_pos, all_valid = (
            torch.cat([ids, edited]),
            torch.cat([pos, pos[:n_edit]]),
            torch.cat([valid, valid[:n_edit]]),
        )
    out = net(all_ids, all_pos, all_valid, quantizer=quant)
    probs = doc_probs(out.cls_logits[:b], scored)  # (B, C): the review's own tokens
    cls = document_nll(probs, labels)
    token_ce = token_cross_entropy(out.cls_logits[:b], scored, labels)
    logits = net.lm_logits(out.hidden[:b])  # (B, T, V)
    keep = valid[:, 1:]  # (B, T-1)
    lm = F.cross_entropy(logits[:, :-1][keep].float(), ids[:, 1:][keep])
    terms = {"cls": cls, "token_ce": token_ce, "lm": lm, "acc": opinion_accuracy(probs, labels)}
    loss = cls + args.w_token * token_ce + args.w_lm * lm
    if n_edit:
        terms["locality"] = locality_loss(
            net,
            [s[:n_edit] for s in out.pre_vq],
            [c[:n_edit] for c in out.codes],
            [s[b:] for s in out.pre_vq],
            where,
            valid[:n_edit],
            args.margin,
            args.locality_layers,
            args.margin_unit,
        )
        loss = loss + args.locality * terms["locality"]
    terms["loss"] = loss
    return terms


REFIT_BATCHES = 8  # batches of the training mix whose attention sums the --refit-codes k-means reads


def refit_codebooks(net, train, by_label, neutral, args, device) -> list[dict]:
    """``--refit-codes``: k-means on batches the training loop never draws (negative step numbers),
    a few codes live in each named layer and the rest parked (``vq.kmeans_init``)."""
    from inference.positions import sample_positions

    cfg = net.config
    batches = []
    for i in range(REFIT_BATCHES):
        g = torch.Generator().manual_seed(args.seed * 104_729 - 1 - i)
        chosen = [train[j] for j in pick_batch(by_label, neutral, args.batch, args.neutral_share, g)]
        ids, pos, valid, _ = pad_batch(chosen, lambda n, g=g: sample_positions(n, cfg.position_pool, g))
        batches.append((ids.to(device), pos.to(device), valid.to(device)))
    was_training = net.training
    net.eval()
    report = kmeans_init(net, batches, generator=torch.Generator().manual_seed(args.seed), live=args.refit_codes)
    net.train(was_training)
    return [{**r, "live_codes": args.refit_codes[r["layer"]]} for r in report]


def _finetune_all(net, train, probe, args, out: Path, device, is_vq: bool) -> tuple[int, float, dict | None, dict]:
    """Scope "all": every parameter trains (EMA codebooks, Gumbel pseudo-gradient, locality term)."""
    from inference.positions import sample_positions, spread_positions

    pool = net.config.position_pool
    layer_shares(args.locality_layers, net.config.num_hidden_layers)  # a misfit is refused before any work
    check_live_codes(args.refit_codes if is_vq else None, net.config)
    by_label, neutral = rows_by_label([ex[1] for ex in train])
    if is_vq and net.reads_order_only():
        freeze_order_only(net)  # its position tables stay constant, so the same text keeps its scores
    quant = (
        TrainQuantizer(
            net, decay=args.ema_decay, pseudo_grad=args.pseudo_grad, tau=args.tau, dead_threshold=args.dead_threshold
        )
        if is_vq
        else None
    )
    opt = torch.optim.AdamW(param_groups(net, args.head_lr_mult), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    ckpt = out / "checkpoint.pt"
    step, t_used, head_report, refit_report = 0, 0.0, None, None
    if args.resume and ckpt.is_file():
        state = common.load_checkpoint(ckpt)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        if quant is not None:
            quant.load_state_dict(state["quant"])
        torch.set_rng_state(state["rng"])
        step, t_used = state["step"], state["seconds"]
        head_report = state.get("head_fit")
        refit_report = state.get("refit_codes")
    else:  # a fresh run
        if quant is not None and args.refit_codes:
            refit_report = refit_codebooks(net, train, by_label, neutral, args, device)
            quant.reset_ema()
        if args.head_fit:  # start from the convex optimum of the head on frozen features
            head_report = fit_head(net, train[: args.head_fit], lambda n: spread_positions(n, pool))
            t_used = head_report["seconds"]
            net.train()

    bar = common.Progress(out, args.steps, step, "finetune-dense" if args.dense else "finetune", disable=args.quiet)
    if head_report and step == 0:
        bar.log(stage="head_fit", **head_report, probe=probe(net) if probe else None)
        net.train()
    t0 = time.time()

    def batch_terms(step: int):
        g = torch.Generator().manual_seed(args.seed * 104_729 + step)
        pick = pick_batch(by_label, neutral, args.batch, args.neutral_share, g)
        chosen = [train[i] for i in pick]
        ids, pos, valid, labels = pad_batch(chosen, lambda n: sample_positions(n, pool, g))
        batch = tuple(t.to(device) for t in (ids, pos, valid, scored_rows(chosen, valid), labels))
        return finetune_losses(net, quant, batch, args, step), int(valid.sum())

    step = common.train_steps(
        args,
        opt,
        net.parameters(),
        step,
        bar,
        batch_terms,
        after_step=quant.update if quant is not None else None,
        bar_keys=("loss", "acc"),
        probe=probe,
        net=net,
        log_record=lambda step, shown: dict(stage="finetune", dense=args.dense, step=step, tok_s=bar.rate, **shown),
        save=lambda step: common.save_checkpoint(
            ckpt,
            model=net.state_dict(),
            opt=opt.state_dict(),
            rng=torch.get_rng_state(),
            quant=quant.state_dict() if quant is not None else None,
            step=step,
            head_fit=head_report,
            refit_codes=refit_report,
            seconds=t_used + time.time() - t0,
        ),
    )
    bar.close()
    return step, t_used + time.time() - t0, head_report, {"refit_codes": refit_report} if refit_report else {}


def _finetune_post_vq(net, train, probe, args, out: Path, device) -> tuple[int, float, dict | None]:
    """Scope "post-vq": cache the frozen features once, then train the tail (``post_vq``)."""
    log = common.Progress(out, 0, 0, "features", disable=True).log
    feats, feature_seconds = post_vq.cache_features(net, train, out / "features", args.seed, log=log)
    cached = {"reviews": len(feats), "rows": int(feats.offsets[-1]), "seconds": round(feature_seconds, 1)}
    step, seconds = post_vq.train_tail(net, feats, args, out, device, probe)
    return step, seconds + feature_seconds, {"post_vq_features": cached}


def training_examples(tok, rows: list[tuple[str, int]], args) -> tuple[list[tuple], dict | None]:
    """Encoded training examples and what the augmentation mix made of them (None without ``--augment``
    or ``--neutral``).

    With ``--augment`` each review is replaced by one writing-style variant drawn from the mix
    (``augment.augmented_reviews``); ``after_context`` examples carry unscored text before the review.
    With ``--neutral N``, N neutral paragraphs (``neutral.neutral_paragraphs``, training part) join
    them with the label ``NEUTRAL`` (a uniform target), in the same writing styles."""
    report: dict = {}
    if args.augment:
        items = augmented_reviews(rows, parse_mix(args.augment), args.seed)
        examples = encode_with_context(tok, [(c, r, y) for c, r, y, _ in items], args.seq - 1)
        counts: dict[str, int] = {}
        for *_, kind in items:
            counts[kind] = counts.get(kind, 0) + 1
        report = {"mix": args.augment, "reviews_per_variant": counts, "tokens": sum(len(ex[0]) for ex in examples)}
    else:
        examples = encode_reviews(tok, rows, args.seq - 1)
    if args.neutral:
        paragraphs = neutral_paragraphs(args.data, "train", args.neutral, seed=args.seed)
        texts = [p.text for p in paragraphs]
        styled = (
            neutral_variants(texts, parse_mix(args.augment), args.seed)
            if args.augment
            else [(t, "original") for t in texts]
        )
        neutral = encode_reviews(tok, [(t, NEUTRAL) for t, _ in styled], args.seq - 1)
        examples = examples + neutral
        sources: dict[str, int] = {}
        for p in paragraphs:
            sources[p.source] = sources.get(p.source, 0) + 1
        report["neutral"] = {
            "paragraphs": len(neutral),
            "per_source": sources,
            "share_of_batch": args.neutral_share,
            "tokens": sum(len(ex[0]) for ex in neutral),
            "target": "uniform over the classes",
            "data": "neutral.neutral_paragraphs part 'train' ($VQ_LSP_DATA/revisions, gutenberg)",
        }
    return examples, report or None


STALE_SECTIONS = ("evaluation", "summary", "calibration")
EARLIER_STAGES = ("finetune", "average")


def card_after_finetune(source_card: dict) -> dict:
    """The source's card as a fine-tune of it inherits it.

    Why: its evaluation, summary and calibration described the source's weights and no longer hold
    (a fine-tuned model is calibrated afresh; `vq-train calibrate` refuses a card that says it is
    calibrated). Its own fine-tune and average records still say how the weights it starts from
    were made (a trunk refitted with ``--refit-codes``, then a tail on it), so they move, in order,
    to ``earlier_stages`` instead of being lost under the new run's record."""
    card = {k: v for k, v in source_card.items() if k not in STALE_SECTIONS}
    earlier = {k: card.pop(k) for k in EARLIER_STAGES if k in card}
    if earlier:
        card["earlier_stages"] = [*card.get("earlier_stages", []), earlier]
    return card


def train_finetune(args) -> Path:
    from inference import Tokenizer, save_model_folder
    from inference.positions import spread_positions

    out = common.start_run(args)
    device = common.pick_device(args.device)
    net, tok_path, is_vq = load_for_finetune(args)
    if args.refit_codes and not (is_vq and args.scope == "all"):  # post-vq and dense runs change no code
        raise RefitCodesError("--refit-codes needs a VQ model and --scope all: no other run changes a code")
    net = net.to(device)  # fp32 (codes must match the engine); see distill.py
    pool = net.config.position_pool
    tok = load_tokenizer(tok_path)
    rows, held = imdb_examples(args.data, "train", limit=args.limit, seed=args.seed, holdout=args.holdout)
    train, mix_report = training_examples(tok, rows, args)
    probe_set = encode_reviews(tok, held[-args.eval_reviews :], args.seq - 1) if args.eval_every else []
    probe = (lambda m: accuracy(m, probe_set, lambda n: spread_positions(n, pool))) if probe_set else None
    loop_start = time.monotonic()
    if args.scope == "post-vq":
        step, t_used, extra = _finetune_post_vq(net, train, probe, args, out, device)
        head_report = None
    else:
        step, t_used, head_report, extra = _finetune_all(net, train, probe, args, out, device, is_vq)
    # stopped early by --stop-after: the checkpoint is the result; by --max-seconds: finish with what it has
    # (without --stop-after the budget is the only other reason to stop early)
    timed_out = (
        step < args.steps
        and getattr(args, "max_seconds", None) is not None
        and (args.stop_after is None or common.out_of_time(args, step, loop_start))
    )
    if step < args.steps and not timed_out:
        return out / "checkpoint.pt"
    if timed_out:
        extra["stopped_by_max_seconds"] = {"max_seconds": args.max_seconds, "scheduled_steps": args.steps}

    net = net.cpu()
    val = encode_reviews(tok, held[:500], args.seq - 1)
    val_acc = accuracy(net, val, lambda n: spread_positions(n, pool)) if val else {}
    net.eval()
    card = {
        "finetune": {
            "source": str(args.model),
            "dense": args.dense,
            "scope": args.scope,
            "tail_from": args.tail_from,
            "steps": step,
            "batch": args.batch,
            "max_tokens": args.seq - 1,
            "lr": args.lr,
            "reviews_seen": step * args.batch,
            "data": f"imdb_train (seeded shuffle, last {args.holdout} rows held out)",
            "holdout_accuracy": val_acc,
            "loss_weights": {"lm": args.w_lm, "token": args.w_token},
            "locality_weight": args.locality if is_vq and args.scope == "all" else None,
            "margin": args.margin if is_vq and args.scope == "all" else None,
            "margin_unit": args.margin_unit if is_vq and args.scope == "all" else None,
            "dead_threshold": args.dead_threshold if is_vq and args.scope == "all" else None,
            "head_fit": head_report,
            "augment": {k: v for k, v in (mix_report or {}).items() if k != "neutral"} or None,
            "neutral": (mix_report or {}).get("neutral"),
            **extra,
            "wall_seconds": round(t_used, 1),
        }
    }
    if not args.dense:
        from inference import load_model_folder

        card = {**card_after_finetune(load_model_folder(args.model)[1]), **card}
    save_model_folder(net, Tokenizer.from_file(tok_path), out / "model", card)
    return out / "model"
