"""The settings themselves: nested keyword-only dataclasses, each field with its default and
its documentation, range or choices (`meta`), which parsing.py checks a client's values against
and table.py writes the README's table from."""

from __future__ import annotations

from dataclasses import dataclass, field

SECTION = "vqLsp"
# Typo thresholds (nats of gain, see hints/typos/), chosen on the tuning split of benchmarks/typo_detection.py
NON_WORD_THRESHOLD = 1.76
REAL_WORD_THRESHOLD = 3.25
SEVERITIES = ("error", "warning", "information", "hint")  # LSP's DiagnosticSeverity, most severe first


def meta(doc: str, lo: float | None = None, hi: float | None = None, choices: tuple | None = None) -> dict:
    """A field's metadata: its documentation, and the bounds or choices a value must keep to."""
    return {"doc": doc, "lo": lo, "hi": hi, "choices": choices}


@dataclass(frozen=True, kw_only=True)
class DiagnosticSettings:
    sentiment: bool = field(default=True, metadata=meta("Publish per-paragraph sentiment diagnostics."))
    sentiment_threshold: float = field(
        default=0.7,
        metadata=meta(
            "A paragraph gets a sentiment diagnostic when its top label's probability is at least this.", 0.0, 1.0
        ),
    )
    surprise: bool = field(
        default=False,
        metadata=meta(
            "Publish unlikely words (whole-word surprise) in prose. Off by default: they fire on names and rare "
            "words as often as on typos; typo hints are the measured detector."
        ),
    )
    surprise_threshold: float = field(
        default=14.0,
        metadata=meta("Surprise (-log p of a whole word, in nats) at or above which a word is flagged.", 0.0, 1000.0),
    )
    max_surprise_hints: int = field(
        default=50, metadata=meta("At most this many surprise hints per document.", 0, 10_000)
    )
    typo: bool = field(
        default=True,
        metadata=meta(
            "Publish likely typos: words missing from the dictionary that the model reads as a close dictionary word, "
            "and confusable words (their/there, form/from) whose partner the model finds far likelier."
        ),
    )
    typo_threshold: float = field(
        default=NON_WORD_THRESHOLD,
        metadata=meta(
            "A word missing from the dictionary is a typo when its likeliest close spelling is at least this many nats "
            "likelier here (chosen on held-out Gutenberg text, benchmarks/typo_detection.py).",
            -100.0,
            100.0,
        ),
    )
    real_word_threshold: float = field(
        default=REAL_WORD_THRESHOLD,
        metadata=meta(
            "A lower-case confusable dictionary word is flagged when its partner is at least this many nats likelier "
            "here, the few words after it read too (the lowest with 80% precision on held-out fiction, technical "
            "Markdown and reviews, benchmarks/typo_detection.py).",
            -100.0,
            100.0,
        ),
    )
    max_typo_hints: int = field(default=50, metadata=meta("At most this many typo hints per document.", 0, 10_000))
    tone_min_words: int = field(
        default=12,
        metadata=meta(
            "Only prose paragraphs of at least this many words get a tone (headings, tables, code and short list "
            "items never do).",
            0,
            100_000,
        ),
    )
    tone_short_threshold: float = field(
        default=0.95,
        metadata=meta(
            "In a short text (fewer than 60 words of prose in all: a note, a commit message, a sentence) a paragraph "
            "shows a tone only when its top label reaches this (or sentimentThreshold, whichever is higher; 0: off): "
            "alone, a sentence's tone is right less often (benchmarks/tone_candidates.py).",
            0.0,
            1.0,
        ),
    )
    tone_gate: float = field(
        default=0.62,
        metadata=meta(
            "A document shows tones only when all its prose blocks together read at least this sure of one label "
            "(never more than sentimentThreshold; 0: off), and then only that label: a neutral document's few "
            "confident paragraphs stay unmarked (benchmarks/tone_candidates.py).",
            0.0,
            1.0,
        ),
    )
    source_comments: bool = field(
        default=True,
        metadata=meta(
            "In source files (a languageId in fileTypes such as python), hint comments and docstrings only; "
            "false: no hints in source files."
        ),
    )
    grammar: bool = field(
        default=True,
        metadata=meta(
            "Publish Harper's grammar and word-choice lints (agreement, articles, repeated words, capitalization) "
            "in prose, with their suggestions as quick fixes; spelling stays the model's typo hints."
        ),
    )
    sentiment_severity: str = field(
        default="information", metadata=meta("Severity of tone diagnostics.", choices=SEVERITIES)
    )
    typo_severity: str = field(
        default="warning",
        metadata=meta(
            "Severity of typo diagnostics (warning: `vq-lsp check` fails on typos by default).", choices=SEVERITIES
        ),
    )
    surprise_severity: str = field(
        default="hint", metadata=meta("Severity of unlikely-word diagnostics.", choices=SEVERITIES)
    )
    grammar_severity: str = field(
        default="hint", metadata=meta("Severity of grammar (Harper) diagnostics.", choices=SEVERITIES)
    )


@dataclass(frozen=True, kw_only=True)
class GrammarSettings:
    rules: dict[str, bool] = field(
        default_factory=dict,
        metadata=meta(
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
        metadata=meta(
            "Model folder (config.json, model.safetensors, tokenizer.json), or the name of a model installed with "
            "vq-train export --install NAME; None: the bundled default."
        ),
    )
    device: str | None = field(
        default=None,
        metadata=meta(
            "Torch device: 'cpu', 'cuda', 'cuda:N'; None: the CPU for the live server (a keystroke's update is "
            "faster there than on a GPU, whose time goes to launching kernels), CUDA when present for "
            "`vq-lsp check` and `vq-lsp score`.",
            choices=(None, "cpu", "cuda", *(f"cuda:{i}" for i in range(16))),
        ),
    )
    precision: str = field(
        default="float32",
        metadata=meta(
            "Engine dtype: float32 (serving: half the memory and time of float64) or float64 (verification mode); "
            "either way the codes equal a dense pass in the same dtype.",
            choices=("float32", "float64"),
        ),
    )
    context: str = field(
        default="paragraph",
        metadata=meta(
            "What a token sees: paragraph (only its own paragraph: a paragraph's tone never depends on the text "
            "before it, neutral prose gets a third as many tones, and an edit's work stays inside its paragraph) or "
            "window (the text before it in its window of up to 2,048 tokens, the paper's setting).",
            choices=("window", "paragraph"),
        ),
    )
    state_layout: str = field(
        default="auto",
        metadata=meta(
            "What a document's engine state keeps per token: full (every layer's output: faster edits), lean (no layer "
            "outputs, recomputed from the codes when an edit needs them: about a fifth less memory, more documents "
            "stay live) or auto (full while the memory budget has room; the least recently used documents become "
            "lean before any document's state is dropped).",
            choices=("auto", "lean", "full"),
        ),
    )
    sizing: str = field(
        default="auto",
        metadata=meta(
            "How an edit's update sizes its work: auto (exact on every device today), exact (no padding, the host "
            "reads each layer's rows: fastest on a CPU), bucketed (shapes padded so that they repeat, one host read "
            "per update) or graphed (bucketed, each update replayed as a CUDA graph once its shapes were seen twice: "
            "fewer kernel launches on a GPU; on a CPU an emulation for the tests, slower). The codes are the same.",
            choices=("auto", "exact", "bucketed", "graphed"),
        ),
    )
    threads: int = field(
        default=1,
        metadata=meta("torch.set_num_threads for the server process (1 avoids spin-waiting on busy machines).", 1, 256),
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
        metadata=meta("languageIds the server gives hints for; '*' means every document."),
    )
    exclude: tuple[str, ...] = field(
        default=(),
        metadata=meta(
            "Glob patterns of files that get no hints, relative to the workspace root (`docs/generated/**`, "
            "`*.min.md`); a pattern without a slash matches a file name in any folder."
        ),
    )
    diagnostics: DiagnosticSettings = field(default_factory=DiagnosticSettings, metadata=meta("Diagnostics."))
    grammar: GrammarSettings = field(default_factory=GrammarSettings, metadata=meta("Grammar hints (Harper)."))
    hover: bool = field(default=True, metadata=meta("Answer hover requests with document and paragraph scores."))
    code_lens: bool = field(default=True, metadata=meta("Show the document score as a code lens on the first line."))
    memory_budget_mb: float = field(
        default=1024.0,
        metadata=meta(
            "Engine states of all open documents together stay under this many MiB; the least recently used are "
            "dropped (and rebuilt when edited or asked about), with stateLayout auto only after losing their layer "
            "outputs (still exact, edits a little slower). A document whose state alone would exceed it gets no hints "
            "and one message saying so.",
            1.0,
            1e7,
        ),
    )
    max_document_tokens: int = field(
        default=50_000,
        metadata=meta(
            "Documents with more tokens get no hints (and an explanation) instead of a slow state.", 1, 10_000_000
        ),
    )
    snapshots: bool = field(
        default=True,
        metadata=meta(
            "Write a document's engine state to the user cache folder when it is closed or dropped for the memory "
            "budget, and read it back instead of rebuilding it when the same text is opened or edited again."
        ),
    )
    snapshot_cache_mb: float = field(
        default=2048.0,
        metadata=meta(
            "Size cap of the snapshot cache in MiB; the least recently used snapshots are deleted beyond it.", 1.0, 1e7
        ),
    )
    debounce_ms: int = field(
        default=0,
        metadata=meta("Optional delay before processing an edit; 0 (default): coalesce only, no timer.", 0, 10_000),
    )
    full_recompute: bool = field(
        default=False,
        metadata=meta(
            "For benchmarks and debugging: recompute every update with a dense pass from scratch instead of the "
            "incremental engine (same protocol and coalescing; far more CPU per keystroke)."
        ),
    )

    def wants(self, language_id: str) -> bool:
        return "*" in self.file_types or language_id in self.file_types


def load_options(values=None) -> dict[str, str]:
    """inference.load_model's engine options (dtype, context, layout, sizing) from a Settings, or from the
    engine flags' values (vq_lsp.engine_flags: an argparse namespace under the settings' names); None: the
    defaults. The server, every command that loads the engine and every worker it starts (`vq-lsp score
    --ray`) read them here, so the same text is scored the same way."""
    v = Settings() if values is None else values
    return {"dtype": v.precision, "context": v.context, "layout": v.state_layout, "sizing": v.sizing}
