#!/usr/bin/env bash
# Make the pack that training/tone_locality_gpu_run.sh runs from on a GPU machine that has the
# repository, torch, numpy, safetensors, tokenizers and tqdm but not the data folder: the training
# data the tone fine-tune reads (imdb/imdb_train; the three revisions/ files and the Gutenberg
# training books' first GUTENBERG_CHARS characters, for the neutral paragraphs), the wheels of what
# the neutral paragraphs' layout imports (Markdown parsing, msgpack; Python 3.12, x86-64 Linux) and
# run.sh. About 24 MiB: with the working tree (about 31 MiB) it fits one run's 64 MiB payload.
#
#   VQ_LSP_DATA=... bash training/make_tone_locality_pack.sh [PACK]    # default PACK: .tonepack
set -euo pipefail
cd "$(dirname "$0")/.."
source training/pack_wheels.sh
: "${VQ_LSP_DATA:?set VQ_LSP_DATA to the data folder}"
PACK="${1:-.tonepack}"
GUTENBERG_CHARS="${GUTENBERG_CHARS:-30000}"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
WHEELS=(markdown-it-py mdurl mdit-py-plugins msgpack)
mkdir -p "$PACK/data/imdb" "$PACK/data/revisions" "$PACK/wheels"
install -m 644 "$VQ_LSP_DATA/imdb/imdb_train.jsonl.gz" "$PACK/data/imdb/"
install -m 644 "$VQ_LSP_DATA/revisions/rust_book_chapters.jsonl.gz" \
  "$VQ_LSP_DATA/revisions/art_of_command_line_README_en.jsonl.gz" "$VQ_LSP_DATA/revisions/wiki_versions.jsonl.gz" \
  "$PACK/data/revisions/"
"$PYTHON" -c "import sys; from pathlib import Path; from training.neutral import write_training_book_heads as w
print(w(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])), 'training books')" \
  "$VQ_LSP_DATA" "$PACK/data/gutenberg/gutenberg_subset.jsonl.gz" "$GUTENBERG_CHARS"
pack_wheels "$PACK/wheels" "${WHEELS[@]}"
cp training/tone_locality_gpu_run.sh "$PACK/run.sh"
du -sb "$PACK" | awk '{printf "%s: %.1f MiB\n", $2, $1 / 1048576}'
