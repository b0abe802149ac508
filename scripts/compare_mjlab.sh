#!/usr/bin/env bash
# mjfleet next to mjlab on this machine: mjlab's Go1 flat velocity task timed as mjlab's nightly throughput benchmark
# times it (raw physics and full env step, zero actions), the very model mjlab steps timed on mjfleet's physics
# backends, and mjfleet's go1-velocity-flat; one table. mjlab goes into its own environment (it pins other mujoco
# and mujoco-warp versions than mjfleet), built with uv from PyPI, or comes from a bundle made where PyPI is reachable.
#
#   scripts/compare_mjlab.sh                       # CUDA when there is a GPU, else the CPU; 4096 envs
#   scripts/compare_mjlab.sh --device cpu --num-envs 1024 --steps 30
#   scripts/compare_mjlab.sh --lift|--tracking|--cartpole [--num-envs 256] [--iterations 5]
#       PPO training throughput of mjlab's Mjlab-Lift-Cube-Yam and mjfleet's yam-lift-cube (--lift), of mjlab's
#       Mjlab-Tracking-Flat-Unitree-G1 and mjfleet's unitree-g1-tracking on mjfleet's shipped motion (--tracking), or
#       of their cart-poles at mjlab's physics per step (--cartpole), on the CPU, one after the other
#       (scripts/mjlab_compare/train_beside.py); mjfleet needs the robot's files (mujoco-menagerie or MENAGERIE_ROOT)
#   scripts/compare_mjlab.sh --bundle DIR [--python 3.12] [--beside SITE]
#       where uv reaches PyPI: mjlab and every package it pins, resolved for that Python on x86-64 Linux, installed
#       into DIR/site without torch and the CUDA libraries (the target's own CUDA torch serves) and without what the
#       site folder SITE already holds at the same version (e.g. mjfleet's offline install: warp-lang is ~370 MB);
#       copy DIR to a machine without an index and run there with MJLAB_SITE=DIR/site (or DIR/site:SITE).
#
# Environment: MJLAB_VERSION (default 1.6.0), MJLAB_VENV (default .mjlab-venv), MJLAB_COMPARE_OUT (default
# mjlab-compare/<timestamp>); offline: MJLAB_SITE (a bundle's site folder: mjlab runs on MJLAB_PYTHON, default
# python3, with it first on PYTHONPATH; nothing is installed) and MJFLEET_PYTHON (the command of the Python that
# imports mjfleet there, default python3). Results: mjlab.json, the exported scene/ and table.txt in that folder.
set -euo pipefail
cd "$(dirname "$0")/.."

device=""
num_envs=""
steps=200
bundle=""
beside=""
lift=""
iterations=5
target_python=3.12
while [ $# -gt 0 ]; do
  case "$1" in
    --device|--num-envs|--steps|--bundle|--iterations|--python|--beside)
      [ $# -ge 2 ] || { echo "compare_mjlab.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;&
    --device) device="$2"; shift 2 ;;
    --num-envs) num_envs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --lift) lift=lift; shift ;;
    --tracking) lift=tracking; shift ;;
    --cartpole) lift=cartpole; shift ;;
    --iterations) iterations="$2"; shift 2 ;;
    --python) target_python="$2"; shift 2 ;;
    --beside) beside="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_mjlab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
version="${MJLAB_VERSION:-1.6.0}"

if [ -n "$bundle" ]; then
  command -v uv >/dev/null 2>&1 ||
    { echo "compare_mjlab.sh: --bundle needs uv (it resolves mjlab from PyPI)" >&2; exit 2; }
  [ -z "$beside" ] || [ -d "$beside" ] || { echo "compare_mjlab.sh: --beside $beside is not a folder" >&2; exit 2; }
  platform=x86_64-manylinux_2_28
  mkdir -p "$bundle"
  printf 'mjlab==%s\n' "$version" >"$bundle/requested.txt"
  uv pip compile -q --no-header --no-annotate --python-version "$target_python" --python-platform "$platform" \
    "$bundle/requested.txt" -o "$bundle/resolved.txt"
  # torch and what only torch needs stay out: the target's CUDA build must be the one that runs.
  grep -v -E '^(torch|torchvision|torchaudio|triton|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)==' "$bundle/resolved.txt" \
    >"$bundle/requirements.txt"
  if [ -n "$beside" ]; then
    # Drop what SITE holds at the same version; names compared lower-cased, runs of -, _ and . as one _ (as in wheels).
    find "$beside" -maxdepth 1 -name '*.dist-info' -printf '%f\n' | sed 's/\.dist-info$//' >"$bundle/beside.txt"
    awk -v held_file="$bundle/beside.txt" '
      function key(name, version) { name = tolower(name); gsub(/[-_.]+/, "_", name); return name "==" version }
      FILENAME == held_file { split($0, d, "-"); held[key(d[1], d[2])]; next }
      { split($0, r, "=="); if (!(key(r[1], r[2]) in held)) print }' "$bundle/beside.txt" "$bundle/requirements.txt" \
      >"$bundle/requirements.own.txt"
    mv "$bundle/requirements.own.txt" "$bundle/requirements.txt"
  fi
  rm -rf "$bundle/site"
  uv pip install -q --no-deps --target "$bundle/site" --python-version "$target_python" --python-platform "$platform" \
    -r "$bundle/requirements.txt"
  echo "mjlab $version for Python $target_python: $(wc -l <"$bundle/requirements.txt") packages in $bundle/site" \
    "($(du -sh "$bundle/site" | cut -f1)); on the target: MJLAB_SITE=<copy>/site scripts/compare_mjlab.sh"
  exit 0
fi

if [ -z "$device" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=cuda:0; else device=cpu; fi
fi
out="${MJLAB_COMPARE_OUT:-mjlab-compare/$(date +%Y%m%d-%H%M%S)}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"

if [ -n "${MJLAB_SITE:-}" ]; then
  [ -d "${MJLAB_SITE%%:*}/mjlab" ] ||
    { echo "compare_mjlab.sh: MJLAB_SITE=$MJLAB_SITE has no mjlab/ (make it with --bundle)" >&2; exit 2; }
  mjlab_python=(env PYTHONPATH="$MJLAB_SITE" "${MJLAB_PYTHON:-python3}")
  read -r -a mjfleet_python <<<"${MJFLEET_PYTHON:-python3}"
else
  if ! command -v uv >/dev/null 2>&1; then
    echo "compare_mjlab.sh: needs uv (mjlab is installed from PyPI into its own environment)" >&2
    exit 2
  fi
  venv="$(realpath -m "${MJLAB_VENV:-.mjlab-venv}")"  # absolute: mjlab's csv_to_npz runs in the results folder
  # The same interpreter and torch as mjfleet's environment, so that only mjlab and its physics versions differ.
  python="$(uv run --locked python -c 'import sys; print(sys.executable)')"
  torch_version="$(uv run --locked python -c 'import torch; print(torch.__version__.split("+")[0])')"
  [ -x "$venv/bin/python" ] || uv venv -q -p "$python" "$venv"
  VIRTUAL_ENV="$venv" uv pip install -q "mjlab==$version" "torch==$torch_version"
  mjlab_python=("$venv/bin/python")
  mjfleet_python=(uv run --locked python)
fi

if [ -n "$lift" ]; then
  [ -z "${MJLAB_SITE:-}" ] ||
    { echo "compare_mjlab.sh: --$lift runs mjlab from its own environment, not MJLAB_SITE" >&2; exit 2; }
  num_envs="${num_envs:-256}"
  mkdir -p "$out"
  "${mjfleet_python[@]}" scripts/mjlab_compare/train_beside.py --task "$lift" --mjlab-python "${mjlab_python[0]}" \
    --num-envs "$num_envs" --iterations "$iterations" --out "$out" | tee "$out/table.txt"
  exit 0
fi

num_envs="${num_envs:-4096}"
"${mjlab_python[@]}" scripts/mjlab_compare/mjlab_side.py --num-envs "$num_envs" --steps "$steps" --device "$device" \
  --out "$out"
"${mjfleet_python[@]}" scripts/mjlab_compare/model_side.py "$out" --device "$device" | tee "$out/table.txt"
