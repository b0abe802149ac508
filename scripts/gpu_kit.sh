#!/usr/bin/env bash
# Offline install kit for a CUDA machine without a package index whose Python 3.12 already holds a CUDA PyTorch
# (>= 2.11) and the usual scientific packages (the device machines' image has numpy, psutil, pytest, onnxruntime,
# rich, imageio, tensorboard, ...). Run it where pip reaches PyPI. The wheels -- the shared kit
# (../shared/gpu-kit/build.sh, or MJFLEET_GPU_KIT=<its folder>) plus imageio-ffmpeg and mujoco-menagerie -- are
# installed HERE into a site folder for that Python (pip's cross-platform --target install), packed with xz and
# split, so the CUDA machine only unpacks: fewer bytes (xz takes a third off warp-lang) and no pip run there.
#
#   scripts/gpu_kit.sh OUT_DIR [--part-mib N] [--full]
#
#   --part-mib N  parts of at most N MiB (default 60: one part plus this checkout fit one 64 MiB device call)
#   --full        also pack psutil, onnxruntime (and its dependencies) and pytest, for a bare Python 3.12 that has
#                 only torch, numpy, pyyaml, rich, imageio, tensorboard, onnx and cloudpickle
#   --arch N      also write mjfleet-warp-cache.tar.xz: the acceptance tasks' Warp kernels compiled for CUDA compute
#                 capability N (90: H100 and H200) by scripts/warp_cuda_cache.py, through uv; 0: none (default 90)
#
# mujoco-studio (Filament rendering and the Studio viewer, 12 MiB) is left out: nothing headless uses it. Debian's
# glvnd EGL/GL loader packages ride along (apt-get download) for headless MuJoCo rendering through NVIDIA's EGL.
# OUT_DIR gets mjfleet-gpu-kit.tar.xz.part-aa, -ab, ... and mjfleet-gpu-kit.sha256. On the CUDA machine, with the
# parts and the .sha256 in DIR (they may arrive over several calls):
#
#   scripts/gpu_session.sh receive DIR       # checks, unpacks into /tmp/site, imports what mjfleet needs
#   export PYTHONPATH=$PWD/src:/tmp/site
set -euo pipefail
usage="usage: scripts/gpu_kit.sh OUT_DIR [--part-mib N] [--full] [--arch N]"
out=""; part_mib=60; full=0; arch=90
while (($#)); do
  case $1 in
    --part-mib) part_mib=${2:?$usage}; shift 2 ;;
    --full) full=1; shift ;;
    --arch) arch=${2:?$usage}; shift 2 ;;
    -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown option $1 ($usage)" >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "error: one OUT_DIR only ($usage)" >&2; exit 2; }; out=$1; shift ;;
  esac
done
[[ -n $out ]] || { echo "error: $usage" >&2; exit 2; }
[[ $part_mib =~ ^[1-9][0-9]*$ ]] || { echo "error: --part-mib must be a positive integer (got $part_mib)" >&2; exit 2; }
[[ $arch =~ ^[0-9]+$ ]] || { echo "error: --arch must be a compute capability like 90, or 0 (got $arch)" >&2; exit 2; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kit=${MJFLEET_GPU_KIT:-$repo/../shared/gpu-kit}
[[ -x $kit/build.sh ]] || { echo "error: no shared kit at $kit (set MJFLEET_GPU_KIT)" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd)  # absolute: the Warp cache is built from the checkout
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$kit/build.sh" "$tmp/shared" 100000 >/dev/null
cat "$tmp/shared"/wheelhouse.tar.part-* | tar -C "$tmp" -x
rm -f "$tmp"/wheelhouse/mujoco_studio-*.whl "$tmp"/wheelhouse/install.sh

# At uv.lock's versions; the kit installs --no-deps, so dependencies are named too.
names=(imageio-ffmpeg mujoco-menagerie)
((full)) && names+=(psutil onnxruntime flatbuffers sympy mpmath packaging protobuf pytest pluggy iniconfig)
extras=()
for name in "${names[@]}"; do
  version=$(awk -v n="$name" '$0 == "name = \""n"\"" {getline; gsub(/version = |"/, ""); print; exit}' "$repo/uv.lock")
  extras+=("$name${version:+==$version}")
done
platform=(--python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform any)
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: "${platform[@]}" \
  -d "$tmp/wheelhouse" "${extras[@]}"

python3 -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile --ignore-requires-python \
  --only-binary=:all: "${platform[@]}" --target "$tmp/site" "$tmp"/wheelhouse/*.whl
rm -rf "$tmp/site/bin"  # console scripts whose shebang names this machine's Python
(cd "$tmp/wheelhouse" && ls ./*.whl | sed 's|^\./||') >"$tmp/site/MJFLEET_GPU_KIT.txt"

# glvnd's EGL/GL loaders (0.3 MiB): the device image has NVIDIA's EGL vendor library but may lack the loaders that
# MUJOCO_GL=egl opens; `gpu_session.sh receive` unpacks them only where libEGL.so.1 is missing.
mkdir -p "$tmp/gl/lists/partial"
apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$tmp/gl/lists")
if command -v apt-get >/dev/null 2>&1 && apt-get "${apt[@]}" update >/dev/null 2>&1 &&
  (cd "$tmp/gl" && apt-get "${apt[@]}" download libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1); then
  rm -rf "$tmp/gl/lists"
else
  echo "warning: no EGL/GL loader packages (apt-get download failed): the kit leaves rendering to the machine" >&2
  rm -rf "$tmp/gl"; mkdir "$tmp/gl"
fi

rm -f "$out"/mjfleet-gpu-kit.tar.xz.part-* "$out/mjfleet-gpu-kit.sha256"
tar -C "$tmp" -cf - site gl | xz -T0 -6 | split -b "${part_mib}M" - "$out/mjfleet-gpu-kit.tar.xz.part-"
(cd "$out" && sha256sum mjfleet-gpu-kit.tar.xz.part-* >mjfleet-gpu-kit.sha256)
if ((arch)); then
  # The first GPU run would otherwise compile these (NVRTC, one module after another) on the GPU machine's time.
  rm -f "$out/mjfleet-warp-cache.tar.xz"
  # With the mjlab export (docs/gpu.md, call 7), its Go1 model's kernels too.
  export_dir=${MJFLEET_MJLAB_EXPORT:-$repo/mjlab-compare/export}
  with_export=()
  [[ -f $export_dir/mjlab.json ]] && with_export=(--mjlab-export "$export_dir")
  (cd "$repo" && uv run --locked python scripts/warp_cuda_cache.py build "$out/mjfleet-warp-cache.tar.xz" --arch "$arch" \
    "${with_export[@]}")
fi
ls -l "$out"
echo "$(wc -l <"$tmp/site/MJFLEET_GPU_KIT.txt") wheels in $(wc -l <"$out/mjfleet-gpu-kit.sha256") parts" \
  "(see docs/gpu.md: one part per device call, then scripts/gpu_session.sh receive)"
