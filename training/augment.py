"""Writing-style variants of labelled reviews, and unrelated text to put before them.

Why: a model fine-tuned only on IMDB's cased, normally spaced, multi-paragraph reviews keys on
casing and tokenization (lowercased, tokenized reviews scored at chance, with 5% called positive)
and a paragraph's tone follows whatever came before it in the document. Fine-tuning on the same
reviews written other ways (lowercased, spaced around punctuation with split contractions as in
Pang & Lee's tokenization, single sentences, short or cut-off reviews), and on reviews placed after
unrelated text whose tokens are not scored, teaches the classifier the label, not the style.
Every function is a pure function of its inputs and a ``random.Random``, so a mix is reproducible.
"""

from __future__ import annotations

import random
import re

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_CONTRACTION = re.compile(r"(?i)\b(\w+)(n't|'s|'re|'ve|'ll|'d|'m)\b")
_PUNCT = re.compile(r"([.,!?;:()\[\]\"])")
_SPACES = re.compile(r"[ \t]+")

VARIANTS = ("original", "lowercase", "respaced", "lower_respaced", "sentence", "truncated", "after_context")


def lowercase(text: str) -> str:
    return text.lower()


def respace(text: str) -> str:
    """Spaces around punctuation and split contractions ("don't." -> "do n't ."), as in the
    tokenized movie-review corpora (Pang & Lee)."""
    text = _CONTRACTION.sub(lambda m: f"{m.group(1)} {m.group(2)}", text)
    text = _PUNCT.sub(r" \1 ", text)
    text = re.sub(r"\.\s+\.\s+\.", "...", text)  # keep an ellipsis in one piece
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n"))


def sentences(text: str) -> list[str]:
    """The review's sentences (split after . ! ? before a capital or digit, and at line breaks)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def first_sentence(text: str) -> str:
    parts = sentences(text)
    return parts[0] if parts else text


def one_sentence(text: str, rng: random.Random, min_words: int = 5) -> str:
    """A random sentence of at least ``min_words`` words (the longest one if none is that long)."""
    parts = sentences(text) or [text]
    long_enough = [s for s in parts if len(s.split()) >= min_words]
    return rng.choice(long_enough) if long_enough else max(parts, key=len)


def truncate(text: str, rng: random.Random, min_words: int = 12, max_words: int = 80) -> str:
    """The review cut off after a random number of words: a short note, or a draft in progress."""
    words = text.split(" ")
    n = rng.randint(min_words, max(min_words, min(max_words, len(words))))
    return " ".join(words[:n])


def markdown_table(rng: random.Random) -> str:
    """A small Markdown table of neutral facts (a schedule, a price list, a comparison)."""
    heads = rng.choice(
        [
            ("Name", "Value"),
            ("Item", "Price", "Qty"),
            ("Date", "Event"),
            ("Version", "Size", "Notes"),
            ("Day", "Start", "End"),
        ]
    )
    words = [
        "alpha",
        "beta",
        "main",
        "draft",
        "release",
        "monday",
        "north",
        "blue",
        "total",
        "backup",
        "server",
        "report",
        "meeting",
        "budget",
        "review",
        "team",
        "phase 2",
        "item",
        "default",
        "window",
    ]
    rows = [
        " | ".join(
            rng.choice([rng.choice(words), str(rng.randint(1, 999)), f"{rng.randint(1, 99)}.{rng.randint(0, 9)}"])
            for _ in heads
        )
        for _ in range(rng.randint(2, 5))
    ]
    return "\n".join([f"| {' | '.join(heads)} |", "|" + "---|" * len(heads)] + [f"| {r} |" for r in rows])


def code_block(rng: random.Random) -> str:
    """A fenced code block (Python, JavaScript or shell) with random names."""
    name = rng.choice(["load", "parse", "update", "main", "compute", "render", "fetch_rows"])
    var = rng.choice(["x", "items", "data", "count", "path", "result"])
    n = rng.randint(1, 50)
    body = rng.choice(
        [
            f"```python\ndef {name}({var}):\n    return [v * {n} for v in {var} if v]\n```",
            f'```python\nimport os\n\n{var} = os.environ.get("{name.upper()}", "{n}")\nprint({var})\n```',
            f"```js\nfunction {name}({var}) {{\n  return {var}.map(v => v + {n});\n}}\n```",
            f"```sh\nmkdir -p build && cd build\ncmake .. && make -j{n % 8 + 1}\n./{name} --{var} {n}\n```",
        ]
    )
    return body


def unrelated_prefix(rng: random.Random, other_reviews: list[str]) -> str:
    """Text before a review that says nothing about it: a table, a code block, or part of another
    review (either label), one to three of them."""
    pieces = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(3)
        if kind == 0:
            pieces.append(markdown_table(rng))
        elif kind == 1:
            pieces.append(code_block(rng))
        else:
            pieces.append(truncate(rng.choice(other_reviews), rng, 15, 120))
    return "\n\n".join(pieces)


def variant(text: str, kind: str, rng: random.Random) -> str:
    """One writing-style variant of a review (``after_context`` is built by ``augmented_reviews``)."""
    if kind == "original":
        return text
    if kind == "lowercase":
        return lowercase(text)
    if kind == "respaced":
        return respace(text)
    if kind == "lower_respaced":
        return lowercase(respace(text))
    if kind == "sentence":
        return one_sentence(text, rng)
    if kind == "truncated":
        return truncate(text, rng)
    raise ValueError(f"unknown variant {kind!r}; known: {', '.join(VARIANTS[:-1])}")


def parse_mix(spec: str) -> dict[str, float]:
    """``"original=3,lowercase=1,..."`` -> normalised weights; a clear error on a bad spec."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, w = part.partition("=")
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r} in {spec!r}; known: {', '.join(VARIANTS)}")
        try:
            weights[name] = float(w) if w else 1.0
        except ValueError:
            raise ValueError(f"weight of {name!r} in {spec!r} is not a number") from None
        if weights[name] < 0:
            raise ValueError(f"weight of {name!r} in {spec!r} is negative")
    total = sum(weights.values())
    if total <= 0:
        raise ValueError(f"mix {spec!r} has no positive weight")
    return {k: v / total for k, v in weights.items()}


def augmented_reviews(rows: list[tuple[str, int]], mix: dict[str, float], seed: int) -> list[tuple[str, str, int, str]]:
    """(prefix, review text, label, variant) for each row, its variant drawn from ``mix``.

    The prefix is "" except for ``after_context``, whose review (original or lowercased) follows
    unrelated text; only the review's tokens are to be scored."""
    rng = random.Random(seed)
    kinds, weights = list(mix), list(mix.values())
    texts = [t for t, _ in rows]
    out = []
    for text, label in rows:
        kind = rng.choices(kinds, weights)[0]
        if kind == "after_context":
            review = text if rng.random() < 0.5 else lowercase(text)
            out.append((unrelated_prefix(rng, texts) + "\n\n", review, label, kind))
        else:
            out.append(("", variant(text, kind, rng), label, kind))
    return out


def neutral_variants(texts: list[str], mix: dict[str, float], seed: int) -> list[tuple[str, str]]:
    """(text, variant) for each neutral paragraph, its variant drawn from the same ``mix`` as the
    reviews, so "no tone" is learnt in every writing style too (``after_context`` keeps the
    paragraph as written: it is about text before a review)."""
    rng = random.Random(seed * 7919 + 1)
    kinds, weights = list(mix), list(mix.values())
    out = []
    for text in texts:
        kind = rng.choices(kinds, weights)[0]
        kind = "original" if kind == "after_context" else kind
        out.append((variant(text, kind, rng), kind))
    return out
