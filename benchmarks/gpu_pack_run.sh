#!/usr/bin/env bash
# Every section of benchmarks.gpu_session on a GPU machine, from a pack made by
# benchmarks/make_gpu_pack.sh (which copies this script into it as run.sh), in a checkout of the
# repository:
#
#   bash PACK/run.sh OUT [more benchmarks.gpu_session flags]      # e.g. bash .gpu/run.sh "$OUT"
#   bash PACK/run.sh OUT --quick --device cpu                    # a dry run on a CPU, in seconds
#
# The pack's wheels are unpacked (not installed) into a folder on PYTHONPATH beside the checkout, so
# the machine's own torch, numpy, safetensors, tokenizers and transformers are used; `python -m vq_lsp`
# stands for the vq-lsp command. First the engine's tests that need CUDA (real CUDA graphs; skipped on
# a CPU), then the session. OUT gets gpu_session.json, gpu_session.md, run.log (the machine's GPU,
# Python and torch, the tests' outcome) and extras.tgz with the rest (the profile, the server runs'
# JSON): a remote run returns at most 8 files, and two runs of this script fill exactly that.
set -euo pipefail
PACK="$(cd "$(dirname "$0")" && pwd)"
REPO="${REPO:-$(cd "$PACK/.." && pwd)}"
OUT="${1:?usage: run.sh OUT [more benchmarks.gpu_session flags]}"
shift
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
SITE="${SITE:-$(mktemp -d)}"
mkdir -p "$OUT"
# (where they import already, as on a development machine's dry run, the wheels are not needed)
if ! "$PYTHON" -c "import msgpack, pygls, lsprotocol, cattrs, mdit_py_plugins, spellchecker, harper, platformdirs" 2>/dev/null \
  && compgen -G "$PACK/wheels/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --target "$SITE" "$PACK"/wheels/*.whl
fi
{
  nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi"
  "$PYTHON" -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
} > "$OUT/run.log" 2>&1
cd "$REPO"
export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}" VQ_LSP_DATA="$PACK/data"
if [ -z "${SKIP_TESTS:-}" ]; then
  "$PYTHON" -m pytest -q -p no:cacheprovider tests/engine/test_pass_graphs.py 2>&1 | tail -5 | tee -a "$OUT/run.log" || true
fi
rc=0
"$PYTHON" -m benchmarks.gpu_session --out "$OUT" "$@" 2>&1 | tee -a "$OUT/run.log" || rc=$?
cd "$OUT"
extras=$(ls | grep -vx 'gpu_session.json\|gpu_session.md\|run.log\|extras.tgz' || true)
if [ -n "$extras" ]; then
  tar czf extras.tgz $extras && rm -rf $extras
fi
exit $rc
