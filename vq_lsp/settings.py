"""Server settings: nested keyword-only dataclasses, read from a client's JSON.

Clients send camelCase (`modelPath`, `diagnostics.sentimentThreshold`); snake_case is accepted
too. Settings may come bare or under a `vqLsp` key (VS Code's section). A value of the wrong
type or out of range falls back to its default, and `parse` returns one warning per such
value for the server to show the user. Unknown keys are reported the same way.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, get_type_hints

SECTION = "vqLsp"
# Typo thresholds (nats of gain, see typos.py), chosen on the tuning split of benchmarks/typo_detection.py
NON_WORD_THRESHOLD = 1.76
REAL_WORD_THRESHOLD = 3.25
SEVERITIES = ("error", "warning", "information", "hint")  # LSP's DiagnosticSeverity, most severe first


def _meta(doc: str, lo: float | None = None, hi: float | None = None, choices: tuple | None = None) -> dict:
    return {"doc": doc, "lo": lo, "hi": hi, "choices": choices}


@dataclass(frozen=True, kw_only=True)
class DiagnosticSettings:
    sentiment: bool = field(default=True, metadata=_meta("Publish per-paragraph sentiment diagnostics."))
    sentiment_threshold: float = field(
        default=0.7,
        metadata=_meta(
            "A paragraph gets a sentiment diagnostic when its top label's probability is at least this.", 0.0, 1.0
        ),
    )
    surprise: bool = field(
        default=False,
        metadata=_meta(
            "Publish unlikely words (whole-word surprise) in prose. Off by default: they fire on names and rare "
            "words as often as on typos; typo hints are the measured detector."
        ),
    )
    surprise_threshold: float = field(
        default=14.0,
        metadata=_meta("Surprise (-log p of a whole word, in nats) at or above which a word is flagged.", 0.0, 1000.0),
    )
    max_surprise_hints: int = field(
        default=50, metadata=_meta("At most this many surprise hints per document.", 0, 10_000)
    )
    typo: bool = field(
        default=True,
        metadata=_meta(
            "Publish likely typos: words missing from the dictionary that the model reads as a close dictionary word, "
            "and confusable words (their/there, form/from) whose partner the model finds far likelier."
        ),
    )
    typo_threshold: float = field(
        default=NON_WORD_THRESHOLD,
        metadata=_meta(
            "A word missing from the dictionary is a typo when its likeliest close spelling is at least this many nats "
            "likelier here (chosen on held-out Gutenberg text, benchmarks/typo_detection.py).",
            -100.0,
            100.0,
        ),
    )
    real_word_threshold: float = field(
        default=REAL_WORD_THRESHOLD,
        metadata=_meta(
            "A lower-case confusable dictionary word is flagged when its partner is at least this many nats likelier "
            "here, the few words after it read too (the lowest with 80% precision on held-out fiction, technical "
            "Markdown and reviews, benchmarks/typo_detection.py).",
            -100.0,
            100.0,
        ),
    )
    max_typo_hints: int = field(default=50, metadata=_meta("At most this many typo hints per document.", 0, 10_000))
    tone_min_words: int = field(
        default=12,
        metadata=_meta(
            "Only prose paragraphs of at least this many words get a tone (headings, tables, code and short list "
            "items never do).",
            0,
            100_000,
        ),
    )
    tone_gate: float = field(
        default=0.62,
        metadata=_meta(
            "A document shows tones only when all its prose blocks together read at least this sure of one label "
            "(never more than sentimentThreshold; 0: off), and then only that label: a neutral document's few "
            "confident paragraphs stay unmarked (benchmarks/tone_candidates.py).",
            0.0,
            1.0,
        ),
    )
    source_comments: bool = field(
        default=True,
        metadata=_meta(
            "In source files (a languageId in fileTypes such as python), hint comments and docstrings only; "
            "false: no hints in source files."
        ),
    )
    grammar: bool = field(
        default=True,
        metadata=_meta(
            "Publish Harper's grammar and word-choice lints (agreement, articles, repeated words, capitalization) "
            "in prose, with their suggestions as quick fixes; spelling stays the model's typo hints."
        ),
    )
    sentiment_severity: str = field(
        default="information", metadata=_meta("Severity of tone diagnostics.", choices=SEVERITIES)
    )
    typo_severity: str = field(
        default="warning",
        metadata=_meta(
            "Severity of typo diagnostics (warning: `vq-lsp check` fails on typos by default).", choices=SEVERITIES
        ),
    )
    surprise_severity: str = field(
        default="hint", metadata=_meta("Severity of unlikely-word diagnostics.", choices=SEVERITIES)
    )
    grammar_severity: str = field(
        default="hint", metadata=_meta("Severity of grammar (Harper) diagnostics.", choices=SEVERITIES)
    )


@dataclass(frozen=True, kw_only=True)
class GrammarSettings:
    rules: dict[str, bool] = field(
        default_factory=dict,
        metadata=_meta(
            "Harper rules or lint kinds turned on (true) or off (false) by name, as harper-ls's `linters`: "
            '`{"LongSentences": true, "Formatting": true, "AnA": false}`. A rule named wins over its kind. By '
            "default agreement, articles, repeated words and confused words are on; formatting, capitalization, "
            "readability and style are off. Names: docs/grammar-rules.md."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Settings:
    model_path: str | None = field(
        default=None,
        metadata=_meta(
            "Model folder (config.json, model.safetensors, tokenizer.json), or the name of a model installed with "
            "vq-train export --install NAME; None: the bundled default."
        ),
    )
    device: str | None = field(
        default=None,
        metadata=_meta(
            "Torch device: 'cpu', 'cuda', 'cuda:N'; None: the CPU for the live server (a keystroke's update is "
            "faster there than on a GPU, whose time goes to launching kernels), CUDA when present for "
            "`vq-lsp check` and `vq-lsp score`.",
            choices=(None, "cpu", "cuda", *(f"cuda:{i}" for i in range(16))),
        ),
    )
    precision: str = field(
        default="float32",
        metadata=_meta(
            "Engine dtype: float32 (serving: half the memory and time of float64) or float64 (verification mode); "
            "either way the codes equal a dense pass in the same dtype.",
            choices=("float32", "float64"),
        ),
    )
    context: str = field(
        default="paragraph",
        metadata=_meta(
            "What a token sees: paragraph (only its own paragraph: a paragraph's tone never depends on the text "
            "before it, neutral prose gets a third as many tones, and an edit's work stays inside its paragraph) or "
            "window (the text before it in its window of up to 2,048 tokens, the paper's setting).",
            choices=("window", "paragraph"),
        ),
    )
    state_layout: str = field(
        default="lean",
        metadata=_meta(
            "What a document's engine state keeps per token: lean (no layer outputs, recomputed from the codes when an "
            "edit needs them: about a fifth less memory, more documents stay live) or full (every layer's output: "
            "faster edits).",
            choices=("lean", "full"),
        ),
    )
    threads: int = field(
        default=1,
        metadata=_meta(
            "torch.set_num_threads for the server process (1 avoids spin-waiting on busy machines).", 1, 256
        ),
    )
    file_types: tuple[str, ...] = field(
        default=(
            "plaintext",
            "text",
            "markdown",
            "restructuredtext",
            "rst",
            "asciidoc",
            "org",
            "tex",
            "latex",
            "mail",
            "gitcommit",
        ),
        metadata=_meta("languageIds the server gives hints for; '*' means every document."),
    )
    exclude: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "Glob patterns of files that get no hints, relative to the workspace root (`docs/generated/**`, "
            "`*.min.md`); a pattern without a slash matches a file name in any folder."
        ),
    )
    diagnostics: DiagnosticSettings = field(default_factory=DiagnosticSettings, metadata=_meta("Diagnostics."))
    grammar: GrammarSettings = field(default_factory=GrammarSettings, metadata=_meta("Grammar hints (Harper)."))
    hover: bool = field(default=True, metadata=_meta("Answer hover requests with document and paragraph scores."))
    code_lens: bool = field(default=True, metadata=_meta("Show the document score as a code lens on the first line."))
    memory_budget_mb: float = field(
        default=1024.0,
        metadata=_meta(
            "Engine states of all open documents together stay under this many MiB; least recently used are dropped "
            "(and rebuilt when edited or asked about). A document whose state alone would exceed it gets no hints and "
            "one message saying so.",
            1.0,
            1e7,
        ),
    )
    max_document_tokens: int = field(
        default=50_000,
        metadata=_meta(
            "Documents with more tokens get no hints (and an explanation) instead of a slow state.", 1, 10_000_000
        ),
    )
    snapshots: bool = field(
        default=True,
        metadata=_meta(
            "Write a document's engine state to the user cache folder when it is closed or dropped for the memory "
            "budget, and read it back instead of rebuilding it when the same text is opened or edited again."
        ),
    )
    snapshot_cache_mb: float = field(
        default=2048.0,
        metadata=_meta(
            "Size cap of the snapshot cache in MiB; the least recently used snapshots are deleted beyond it.", 1.0, 1e7
        ),
    )
    debounce_ms: int = field(
        default=0,
        metadata=_meta("Optional delay before processing an edit; 0 (default): coalesce only, no timer.", 0, 10_000),
    )
    full_recompute: bool = field(
        default=False,
        metadata=_meta(
            "For benchmarks and debugging: recompute every update with a dense pass from scratch instead of the "
            "incremental engine (same protocol and coalescing; far more CPU per keystroke)."
        ),
    )

    def wants(self, language_id: str) -> bool:
        return "*" in self.file_types or language_id in self.file_types


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _coerce(value: Any, typ: Any, meta: dict) -> Any:
    """The value as `typ`, or raise ValueError with a reason."""
    if dataclasses.is_dataclass(typ):
        raise AssertionError("nested dataclasses are parsed by _parse")
    if meta.get("choices") is not None and value not in meta["choices"]:
        raise ValueError(f"must be one of {[c for c in meta['choices'] if c is None or not c.startswith('cuda:')]}")
    text = str(typ)
    if typ is bool:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
    elif typ in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (typ is int and value != int(value)):
            raise ValueError(f"must be a{'n integer' if typ is int else ' number'}")
        value = typ(value)
        if (meta["lo"] is not None and value < meta["lo"]) or (meta["hi"] is not None and value > meta["hi"]):
            raise ValueError(f"must lie in [{meta['lo']}, {meta['hi']}]")
    elif "dict" in text:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, bool) for k, v in value.items()):
            raise ValueError("must be a table of names to true or false")
        value = dict(value)
    elif "tuple" in text:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError("must be a list of strings")
        value = tuple(value)
    elif "str" in text:
        if value is not None and not isinstance(value, str):
            raise ValueError("must be a string or null")
        if value == "":
            value = None
    return value


def _parse(cls, data: Any, prefix: str, warnings: list[str], base):
    if not isinstance(data, dict):
        warnings.append(f"{prefix or 'settings'}: expected an object, got {type(data).__name__}; using defaults")
        return base
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in data.items():
        name = _snake(key) if key not in fields else key
        where = f"{prefix}{_camel(name)}"
        if name not in fields:
            warnings.append(f"{prefix}{key}: unknown setting, ignored")
            continue
        typ, f = hints[name], fields[name]
        if dataclasses.is_dataclass(typ):
            values[name] = _parse(typ, value, where + ".", warnings, getattr(base, name))
            continue
        try:
            values[name] = _coerce(value, typ, f.metadata)
        except ValueError as e:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            warnings.append(f"{where} = {value!r} is invalid ({e}); using the default {default!r}")
            values[name] = default
    return dataclasses.replace(base, **values)


def parse(data: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's JSON (None or {} gives `base` or the defaults) and the warnings."""
    base = base if base is not None else Settings()
    warnings: list[str] = []
    if data is None:
        return base, warnings
    if isinstance(data, dict) and SECTION in data:
        data = data[SECTION]
        if data is None:
            return base, warnings
    return _parse(Settings, data, "", warnings, base), warnings


def describe() -> dict[str, str]:
    """camelCase setting name -> its documentation (for README/extension manifests)."""
    out = {}
    for f in dataclasses.fields(Settings):
        out[_camel(f.name)] = f.metadata["doc"]
    for f in dataclasses.fields(DiagnosticSettings):
        out["diagnostics." + _camel(f.name)] = f.metadata["doc"]
    for f in dataclasses.fields(GrammarSettings):
        out["grammar." + _camel(f.name)] = f.metadata["doc"]
    return out


def _default_text(f: dataclasses.Field) -> str:
    """A field's default as a client writes it in JSON settings."""
    import json

    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    if isinstance(value, tuple):
        value = list(value)
    return "`" + json.dumps(value) + "`"


def _number_text(value: float) -> str:
    """A range bound as a reader reads it: 10,000,000 rather than 1e+07."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _allowed_text(typ: Any, meta: dict) -> str:
    """The values a field accepts: its choices (cuda:N for the numbered devices), its range, or its type."""
    import json

    if meta.get("choices") is not None:
        shown = [c for c in meta["choices"] if c is None or not c.startswith("cuda:")]
        if len(shown) < len(meta["choices"]):
            shown.append("cuda:N")
        return ", ".join("`" + json.dumps(c).strip('"') + "`" for c in shown)
    if meta.get("lo") is not None and meta.get("hi") is not None:
        return f"{_number_text(meta['lo'])} to {_number_text(meta['hi'])}"
    if typ is bool:
        return "`true`, `false`"
    if "tuple" in str(typ):
        return "list of strings"
    if "dict" in str(typ):
        return "table of names to `true`, `false`"
    return "string or `null`"


def settings_table_markdown() -> str:
    """The README's configuration table, one row per setting, written from the fields' own metadata.

    tests/test_readme_settings.py fails when the README's copy differs, so a new or changed setting
    reaches the documentation with the code."""
    rows = ["| setting | default | accepted | what it does |", "|---|---|---|---|"]
    for prefix, cls in (("", Settings), ("diagnostics.", DiagnosticSettings), ("grammar.", GrammarSettings)):
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                continue
            doc = f.metadata["doc"].replace("|", "\\|")
            accepted = _allowed_text(hints[f.name], f.metadata)
            rows.append(f"| `{prefix}{_camel(f.name)}` | {_default_text(f)} | {accepted} | {doc} |")
    return "\n".join(rows) + "\n"
