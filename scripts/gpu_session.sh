#!/usr/bin/env bash
# Work on a GPU machine that is reached one command at a time and given back when idle (this workplace's device
# machines; a batch or interactive cluster shell alike): receive the offline kit in parts, run long jobs in the
# background across commands, wait for them within a command's time limit. See docs/gpu.md.
#
#   scripts/gpu_session.sh receive DIR [SITE]    copy the kit parts carried into DIR to $MJFLEET_KIT_STORE (/tmp/kit);
#                                                once every part named in mjfleet-gpu-kit.sha256 is there and checks,
#                                                unpack into SITE (/tmp/site) and import what mjfleet needs.
#                                                Exit 0 installed, 3 parts still missing, 1 a part is corrupt.
#                                                A carried mjfleet-warp-cache.tar.xz (scripts/warp_cuda_cache.py)
#                                                goes into Warp's kernel cache once the kit is in.
#   scripts/gpu_session.sh start NAME CMD...     run CMD in its own process session (it outlives this command), from
#                                                a private copy of this checkout (a later command may replace the
#                                                checkout), with PYTHONPATH=<copy>/src:SITE; output in
#                                                $MJFLEET_JOBS/NAME.log (/tmp/jobs), exit code in NAME.rc.
#   scripts/gpu_session.sh wait SECONDS NAME...  until those jobs end or SECONDS pass; print each one's state and last
#                                                lines, copy its log into $OUT when set. Exit 0 all ended with 0,
#                                                1 one failed, 3 one still runs.
#   scripts/gpu_session.sh stop NAME...          SIGINT to the job's processes (training stops after the current
#                                                iteration with a checkpoint); SIGKILL if it still runs 60 s later.
#   scripts/gpu_session.sh jobs                  every job's state.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs_dir=${MJFLEET_JOBS:-/tmp/jobs}
store=${MJFLEET_KIT_STORE:-/tmp/kit}
python=${MJFLEET_PYTHON:-python3}
kit=mjfleet-gpu-kit
warp_cache=mjfleet-warp-cache.tar.xz

die() { echo "error: $*" >&2; exit 2; }

# The job's parent: a new process session (it outlives the command that started it), SIGINT and SIGTERM reset to
# their defaults for the job (a background command of a script starts with SIGINT ignored) and ignored by the
# parent itself, which stays to write the job's exit code (128 + N when signal N ended it).
job_wrapper='
import os, signal, subprocess, sys
prefix, cwd, *command = sys.argv[1:]
os.setsid()
with open(prefix + ".pid", "w") as f:
    f.write(f"{os.getpid()}\n")
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
def defaults():
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
with open(prefix + ".log", "wb") as log:
    try:
        code = subprocess.call(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=defaults)
    except OSError as e:
        log.write(f"cannot run {command[0]}: {e}\n".encode())
        code = 127
with open(prefix + ".rc", "w") as f:
    f.write(f"{128 - code if code < 0 else code}\n")
'

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

receive() {
  local dir=${1:-} site=${2:-${MJFLEET_SITE:-/tmp/site}}
  [[ -n $dir ]] || die "usage: scripts/gpu_session.sh receive DIR [SITE]"
  mkdir -p "$store" || exit 2
  if [[ -d $dir ]]; then
    find "$dir" -maxdepth 1 \( -name "$kit.*" -o -name "$warp_cache" \) -type f -exec cp -f {} "$store/" \;
  fi
  if [[ ! -f $store/$kit.sha256 ]]; then
    echo "kit: no $kit.sha256 received yet (carry it with every part)"
    return 3
  fi
  if [[ -f $site/.$kit.sha256 ]] && cmp -s "$store/$kit.sha256" "$site/.$kit.sha256"; then
    echo "kit: already installed in $site"
    install_warp_cache "$site"
    return
  fi
  local parts=() missing=() name
  while read -r _ name; do
    parts+=("$name")
    [[ -f $store/$name ]] || missing+=("$name")
  done <"$store/$kit.sha256"
  if ((${#missing[@]})); then
    echo "kit: $((${#parts[@]} - ${#missing[@]})) of ${#parts[@]} parts received; missing: ${missing[*]}"
    return 3
  fi
  if ! (cd "$store" && sha256sum --check --quiet "$kit.sha256"); then
    echo "kit: a part does not match $kit.sha256: carry it again" >&2
    return 1
  fi
  local unpack="$site.unpack"
  rm -rf "$unpack" && mkdir -p "$unpack" || return 2
  local decompress=(xz -d -T0)
  command -v xz >/dev/null 2>&1 ||
    decompress=("$python" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)')
  (cd "$store" && cat "${parts[@]}") | "${decompress[@]}" | tar -C "$unpack" -x || { echo "kit: unpacking failed" >&2; return 1; }
  rm -rf "$site" && mv "$unpack/site" "$site" || return 1
  if [[ -d $unpack/gl ]]; then install_gl "$unpack/gl"; fi
  rm -rf "$unpack"
  cp "$store/$kit.sha256" "$site/.$kit.sha256"
  echo "kit: installed $(wc -l <"$site/MJFLEET_GPU_KIT.txt") packages into $site"
  # Bytecode now, once: where PYTHONDONTWRITEBYTECODE is set, every process would compile the kit's sources again.
  "$python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || echo "kit: compiling bytecode failed (imports still work)"
  check_imports "$site" || return
  install_warp_cache "$site"
}

# Kernels compiled for this GPU before the session (scripts/warp_cuda_cache.py), once per archive. Only time is at
# stake: a refused or failed install leaves Warp compiling them here, as without the archive.
install_warp_cache() {
  local site=$1
  [[ -f $store/$warp_cache ]] || return 0
  cmp -s "$store/$warp_cache" "$site/.$warp_cache" 2>/dev/null && return 0
  if PYTHONPATH="$repo/src:$site${PYTHONPATH:+:$PYTHONPATH}" "$python" "$repo/scripts/warp_cuda_cache.py" install \
    "$store/$warp_cache"; then
    cp "$store/$warp_cache" "$site/.$warp_cache"
  else
    echo "kit: Warp kernel cache not installed (kernels compile on first use)"
  fi
}

# glvnd's EGL/GL loaders from the kit, unpacked into MJFLEET_GL_ROOT (/) where no libEGL.so.1 is found.
install_gl() {
  local debs=("$1"/*.deb) root=${MJFLEET_GL_ROOT:-/} deb
  [[ -f ${debs[0]} ]] || return 0
  if [[ $root == / ]] && ldconfig -p 2>/dev/null | grep -q 'libEGL\.so\.1 '; then return 0; fi
  if [[ $root != / ]] && compgen -G "$root/usr/lib/*/libEGL.so.1" >/dev/null; then return 0; fi
  if [[ ! -w $root ]]; then
    echo "kit: no libEGL.so.1 here and $root is not writable: MUJOCO_GL=egl rendering needs the libegl1 package"
    return 0
  fi
  for deb in "${debs[@]}"; do dpkg -x "$deb" "$root" || return 1; done
  if [[ $root == / ]]; then ldconfig; fi
  echo "kit: unpacked the EGL/GL loaders (${#debs[@]} packages) into $root"
}

# MJFLEET_KIT_IMPORTS overrides the modules checked (space-separated).
check_imports() {
  PYTHONPATH="$1${PYTHONPATH:+:$PYTHONPATH}" "$python" - ${MJFLEET_KIT_IMPORTS:-} <<'PY'
import importlib
import sys

import torch

print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
default = ("mujoco", "mujoco_warp", "warp", "rsl_rl", "tensordict", "torchrunx", "tyro", "psutil", "pytest")
for name in sys.argv[1:] or default:
    module = importlib.import_module(name)
    print(f"  {name:12} {getattr(module, '__version__', 'ok')}")
PY
}

# Whether job NAME's parent process still runs (no pid file: no; `kill -0 0` would ask about our own group).
alive() {
  local pid
  pid=$(cat "$jobs_dir/$1.pid" 2>/dev/null) && [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

state() {
  local name=$1 now started
  now=$(date +%s); started=$(cat "$jobs_dir/$name.start" 2>/dev/null || echo "$now")
  if [[ -f $jobs_dir/$name.rc ]]; then
    echo "$name: exit $(cat "$jobs_dir/$name.rc") after $(($(stat -c %Y "$jobs_dir/$name.rc") - started)) s"
  elif alive "$name"; then
    echo "$name: running for $((now - started)) s"
  else
    echo "$name: gone without an exit code (killed?)"
  fi
}

start() {
  local name=${1:-}
  [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "usage: scripts/gpu_session.sh start NAME CMD... (NAME: letters, digits, . _ -)"
  shift
  (($#)) || die "start $name: no command given"
  mkdir -p "$jobs_dir" || exit 2
  if [[ ! -f $jobs_dir/$name.rc ]] && alive "$name"; then
    die "job $name is running already"
  fi
  local copy="$jobs_dir/$name.repo" site=${MJFLEET_SITE:-/tmp/site}
  rm -rf "$copy" "$jobs_dir/$name.rc" "$jobs_dir/$name.pid" && mkdir -p "$copy" || exit 2
  tar -C "$repo" --exclude=./.git --exclude=./.venv --exclude=./gpu-kit --exclude=./acceptance --exclude=./logs \
    -cf - . | tar -C "$copy" -x || exit 2
  date +%s >"$jobs_dir/$name.start"
  local vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  if [[ -z ${__EGL_VENDOR_LIBRARY_FILENAMES:-} && -f $vendor && ! -f /usr/share/glvnd/egl_vendor.d/10_nvidia.json ]]; then
    export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor  # the driver's EGL vendor library, mounted where glvnd does not look
  fi
  PYTHONPATH="$copy/src:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    "$python" -c "$job_wrapper" "$jobs_dir/$name" "$copy" "$@" </dev/null >/dev/null 2>&1 &  # not the caller's pipe
  local i
  for i in $(seq 50); do [[ -s $jobs_dir/$name.pid ]] && break; sleep 0.1; done
  echo "started $name (pid $(cat "$jobs_dir/$name.pid" 2>/dev/null), log $jobs_dir/$name.log)"
}

wait_jobs() {
  local seconds=${1:-} name
  [[ $seconds =~ ^[0-9]+$ ]] || die "usage: scripts/gpu_session.sh wait SECONDS NAME..."
  shift
  (($#)) || die "wait: name at least one job"
  for name in "$@"; do [[ -f $jobs_dir/$name.start ]] || die "no job named $name (see: scripts/gpu_session.sh jobs)"; done
  local deadline=$((SECONDS + seconds)) running
  while :; do
    running=0
    for name in "$@"; do
      [[ -f $jobs_dir/$name.rc ]] || ! alive "$name" || running=1
    done
    ((running && SECONDS < deadline)) || break
    sleep 2
  done
  local code=0 rc
  for name in "$@"; do
    state "$name"
    tail -n 25 "$jobs_dir/$name.log" 2>/dev/null | sed 's/^/  | /'
    if [[ -n ${OUT:-} && -d ${OUT:-} ]]; then tail -c 16000000 "$jobs_dir/$name.log" >"$OUT/$name.log" 2>/dev/null; fi
    if [[ -f $jobs_dir/$name.rc ]]; then
      rc=$(cat "$jobs_dir/$name.rc")
      [[ $rc == 0 ]] || ((code == 3)) || code=1
    elif alive "$name"; then
      code=3
    else
      ((code == 3)) || code=1
    fi
  done
  return "$code"
}

# Signal every process of a job's session: timeout(1), as gpu_acceptance.sh uses it, moves its command into a process
# group of its own, which a signal to the job's group would miss. Linux reuses no session id while a member lives, so
# an ended job's stale pid signals nothing; the group fallback is only for a machine without pkill.
signal_job() {
  if command -v pkill >/dev/null 2>&1; then
    pkill "-$1" -s "$2" 2>/dev/null || true
  else
    kill "-$1" -- "-$2" 2>/dev/null || true
  fi
}

stop_jobs() {
  (($#)) || die "usage: scripts/gpu_session.sh stop NAME..."
  local name pid i
  for name in "$@"; do
    pid=$(cat "$jobs_dir/$name.pid" 2>/dev/null) || die "no job named $name"
    signal_job INT "$pid"
    for i in $(seq 120); do [[ ! -f $jobs_dir/$name.rc ]] && kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if [[ ! -f $jobs_dir/$name.rc ]] && kill -0 "$pid" 2>/dev/null; then
      signal_job KILL "$pid"
      echo 137 >"$jobs_dir/$name.rc"
    fi
    state "$name"
  done
}

list_jobs() {
  local f
  for f in "$jobs_dir"/*.start; do [[ -f $f ]] && state "$(basename "$f" .start)"; done
  return 0
}

command=${1:-}
shift || true
case $command in
  receive) receive "$@" ;;
  start) start "$@" ;;
  wait) wait_jobs "$@" ;;
  stop) stop_jobs "$@" ;;
  jobs) list_jobs ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
