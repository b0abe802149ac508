#!/usr/bin/env bash
# Offline install kit for a CUDA machine without a package index (Python 3.12, CUDA PyTorch >= 2.11 preinstalled):
# the shared wheelhouse (../shared/gpu-kit/build.sh, or MJFLEET_GPU_KIT=<its folder>) plus the wheels mjfleet needs
# that it leaves out: psutil (the launcher), onnxruntime and its dependencies (ONNX play and tests), imageio-ffmpeg
# (mp4 videos), mujoco-menagerie (the Unitree tasks' resolver) and pytest. Run it where pip reaches PyPI.
#
#   scripts/gpu_kit.sh OUT_DIR [PART_MB]
#
# OUT_DIR gets wheelhouse.tar.part-* (the shared kit) and mjfleet-extras.tar.part-*, each part at most PART_MB
# (default 50) MiB, so every part fits one device call. On the CUDA machine, with all parts in one folder:
#
#   cat wheelhouse.tar.part-* | tar -x && cat mjfleet-extras.tar.part-* | tar -x    # both unpack into wheelhouse/
#   wheelhouse/install.sh /tmp/site && export PYTHONPATH=$PWD/src:/tmp/site
set -euo pipefail
out=${1:?usage: scripts/gpu_kit.sh OUT_DIR [PART_MB]}; part_mb=${2:-50}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kit=${MJFLEET_GPU_KIT:-$repo/../shared/gpu-kit}
[[ -x $kit/build.sh ]] || { echo "error: no shared kit at $kit (set MJFLEET_GPU_KIT)" >&2; exit 2; }
mkdir -p "$out"
"$kit/build.sh" "$out" "$part_mb"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Each at uv.lock's version; their dependencies are listed too (the kit installs --no-deps).
extras=()
for name in psutil onnxruntime flatbuffers sympy mpmath packaging protobuf imageio-ffmpeg mujoco-menagerie \
  pytest pluggy iniconfig; do
  version=$(awk -v n="$name" '$0 == "name = \""n"\"" {getline; gsub(/version = |"/, ""); print; exit}' "$repo/uv.lock")
  extras+=("$name${version:+==$version}")
done
echo "extras: ${extras[*]}"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform any \
  -d "$tmp/wheelhouse" "${extras[@]}"
tar -C "$tmp" -cf "$tmp/mjfleet-extras.tar" wheelhouse
rm -f "$out"/mjfleet-extras.tar.part-*
split -b "${part_mb}M" "$tmp/mjfleet-extras.tar" "$out/mjfleet-extras.tar.part-"
ls -l "$out"
echo "$(ls "$tmp/wheelhouse" | wc -l) extra wheels; unpack with: cat mjfleet-extras.tar.part-* | tar -x"
