# Sourced by the scripts that make GPU packs (benchmarks/make_gpu_pack.sh, training/make_tone_locality_pack.sh):
#   pack_wheels DIR NAME...
# downloads into DIR the wheels of the named packages at the versions installed here, for the GPU
# machine's Python (PY_VERSION, default 3.12) on x86-64 Linux, without their dependencies (name those too).
pack_wheels() {
  local dir="$1" python="${PYTHON:-$(command -v python || command -v python3)}" name
  shift
  local pins=()
  for name in "$@"; do
    pins+=("$name==$("$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")")
  done
  mkdir -p "$dir"
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version "${PY_VERSION:-3.12}" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir" "${pins[@]}"
}
