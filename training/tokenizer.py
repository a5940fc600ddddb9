"""Byte-level BPE tokenizer for the model folder's ``tokenizer.json``.

Special tokens sit at OPT's ids: ``<s>``=0, ``<pad>``=1, ``</s>``=2, ``<unk>``=3. OPT uses
id 2 both as BOS (prepended to every sequence) and EOS, and 1 as padding; keeping those ids
means a trained model and a converted OPT checkpoint follow the same conventions. A pretrained
teacher's vocabulary (SmolLM2's) is used as it is when its ids 0-3 are special tokens too: the
student then uses ids 2 and 1 the same way (``training/teacher_pretrained.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 2, 1, 2, 3


def _finish(tok: Tokenizer) -> Tokenizer:
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int, char_budget: int) -> Tokenizer:
    """Train a byte-level BPE on at most ``char_budget`` characters of ``texts``."""

    def limited():
        seen = 0
        for t in texts:
            if seen >= char_budget:
                return
            t = t[: char_budget - seen]
            seen += len(t)
            yield t

    tok = _finish(Tokenizer(models.BPE(unk_token=None)))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIALS,  # ids 0..3 in this order
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(limited(), trainer=trainer)
    _check_specials(tok)
    return tok


def gpt2_tokenizer(gpt2_dir: Path) -> Tokenizer:
    """A byte-level BPE from ``vocab.json`` + ``merges.txt`` with OPT-style ids.

    An OPT checkpoint's files already hold the four specials at ids 0-3 and are used as they
    are. GPT-2's files get the specials first and every GPT-2 id shifted by 4; GPT-2's own
    ``<|endoftext|>`` is dropped (its role is played by ``</s>``).
    """
    vocab = json.loads((Path(gpt2_dir) / "vocab.json").read_text(encoding="utf-8"))
    if all(vocab.get(t) == i for i, t in enumerate(SPECIALS)):
        shifted = vocab
    else:
        vocab.pop("<|endoftext|>", None)
        shifted = {t: i for i, t in enumerate(SPECIALS)}
        for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            shifted[t] = len(shifted)
    merges = []
    for line in (Path(gpt2_dir) / "merges.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#version"):
            a, b = line.split(" ")
            merges.append((a, b))
    tok = _finish(Tokenizer(models.BPE(vocab=shifted, merges=merges)))
    tok.add_special_tokens(SPECIALS)
    _check_specials(tok)
    return tok


def _check_specials(tok: Tokenizer) -> None:
    """OPT's four specials at ids 0-3, or (a pretrained teacher's vocabulary, such as SmolLM2's) special
    tokens of its own there: ids 1 and 2 serve as padding and BOS/EOS either way, so no text may map to them."""
    if tok.token_to_id(SPECIALS[0]) is None and tok.token_to_id(SPECIALS[2]) is None:
        specials = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
        if all(tok.id_to_token(i) in specials for i in range(len(SPECIALS))):
            return
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            raise RuntimeError(f"special token {s} has id {tok.token_to_id(s)}, expected {i}")


def load_tokenizer(path: Path) -> Tokenizer:
    """A ``tokenizer.json`` file, or a folder holding one or OPT/GPT-2's vocab.json + merges.txt.

    A Hugging Face OPT checkpoint (``--teacher``) ships the latter pair, so it works as is.
    """
    path = Path(path)
    if (
        path.is_dir()
        and not (path / "tokenizer.json").is_file()
        and (path / "vocab.json").is_file()
        and (path / "merges.txt").is_file()
    ):
        return gpt2_tokenizer(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise SystemExit(f"no tokenizer at {path}")
    tok = Tokenizer.from_file(str(path))
    _check_specials(tok)
    return tok


def batch_encoder(tok: Tokenizer):
    """A function list[str] -> list[list[int]] without special tokens."""

    def encode(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

    return encode
