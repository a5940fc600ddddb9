#!/usr/bin/env bash
# Make the pack that benchmarks/gpu_pack_run.sh runs from on a GPU machine that has the repository,
# torch, numpy, safetensors, tokenizers and transformers but neither the data folder nor the server's
# other dependencies: the held-out data benchmarks.gpu_session reads (eval/python_peps.jsonl.gz; the
# two revisions/ files of the server's 10,000-word document), the wheels of the project's other
# dependencies and of pytest at the versions installed here (for Python 3.12 on x86-64 Linux; unpacked
# there, not installed) and run.sh. About 28 MiB: with the working tree it fits one run's payload.
#
#   VQ_LSP_DATA=... bash benchmarks/make_gpu_pack.sh [PACK]     # default PACK: .gpu
#   then, on the GPU machine: bash PACK/run.sh OUT [more benchmarks.gpu_session flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source training/pack_wheels.sh
: "${VQ_LSP_DATA:?set VQ_LSP_DATA to the data folder}"
PACK="${1:-.gpu}"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
# what the server imports beyond torch, numpy, safetensors, tokenizers and tqdm (tests/test_dependencies.py
# keeps pyproject's list honest), with their own dependencies
WHEELS=(msgpack platformdirs pygls lsprotocol cattrs attrs markdown-it-py mdurl mdit-py-plugins pyspellchecker harper-py)
# and pytest, for the engine's tests that need CUDA (real CUDA graphs) and skip on a CPU
WHEELS+=(pytest pluggy iniconfig packaging pygments)
mkdir -p "$PACK/data/eval" "$PACK/data/revisions" "$PACK/wheels"
install -m 644 "$VQ_LSP_DATA/eval/python_peps.jsonl.gz" "$PACK/data/eval/"
install -m 644 "$VQ_LSP_DATA/revisions/art_of_command_line_README_en.jsonl.gz" \
  "$VQ_LSP_DATA/revisions/rust_book_chapters.jsonl.gz" "$PACK/data/revisions/"
pack_wheels "$PACK/wheels" "${WHEELS[@]}"
cp benchmarks/gpu_pack_run.sh "$PACK/run.sh"
du -sb "$PACK" | awk '{printf "%s: %.1f MiB\n", $2, $1 / 1048576}'
