#!/usr/bin/env bash
# mjfleet next to mjlab on this machine: mjlab's Go1 flat velocity task timed as mjlab's nightly throughput benchmark
# times it (raw physics and full env step, zero actions), the very model mjlab steps timed on mjfleet's physics
# backends, and mjfleet's go1-velocity-flat; one table. mjlab goes into its own environment (it pins other mujoco
# and mujoco-warp versions than mjfleet), built with uv from PyPI.
#
#   scripts/compare_mjlab.sh                       # CUDA when there is a GPU, else the CPU; 4096 envs
#   scripts/compare_mjlab.sh --device cpu --num-envs 1024 --steps 30
#
# Environment: MJLAB_VERSION (default 1.6.0), MJLAB_VENV (default .mjlab-venv), MJLAB_COMPARE_OUT (default
# mjlab-compare/<timestamp>). Results: mjlab.json, the exported scene/ and table.txt in that folder.
set -euo pipefail
cd "$(dirname "$0")/.."

device=""
num_envs=4096
steps=200
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --num-envs) num_envs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_mjlab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$device" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=cuda:0; else device=cpu; fi
fi
if ! command -v uv >/dev/null 2>&1; then
  echo "compare_mjlab.sh: needs uv (mjlab is installed from PyPI into its own environment)" >&2
  exit 2
fi

version="${MJLAB_VERSION:-1.6.0}"
venv="${MJLAB_VENV:-.mjlab-venv}"
out="${MJLAB_COMPARE_OUT:-mjlab-compare/$(date +%Y%m%d-%H%M%S)}"
# The same interpreter and torch as mjfleet's environment, so that only mjlab and its physics versions differ.
python="$(uv run --locked python -c 'import sys; print(sys.executable)')"
torch_version="$(uv run --locked python -c 'import torch; print(torch.__version__.split("+")[0])')"
[ -x "$venv/bin/python" ] || uv venv -q -p "$python" "$venv"
VIRTUAL_ENV="$venv" uv pip install -q "mjlab==$version" "torch==$torch_version"

export MUJOCO_GL="${MUJOCO_GL:-egl}"
"$venv/bin/python" scripts/mjlab_compare/mjlab_side.py --num-envs "$num_envs" --steps "$steps" --device "$device" \
  --out "$out"
uv run --locked python scripts/mjlab_compare/model_side.py "$out" --device "$device" | tee "$out/table.txt"
