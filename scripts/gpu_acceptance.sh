#!/usr/bin/env bash
# GPU acceptance in one command, on one CUDA GPU (cuda:0): `pytest -m gpu`, then `bench` of cartpole-balance,
# go1-velocity-flat and humanoid-velocity-flat at 1024/4096/8192 envs (env step vs raw physics, graphs off/on, PPO
# training in-process, through torchrunx, and two workers sharing the GPU), then one summary table with the GPU,
# driver and versions. Exit code 0 only when every GPU test passed (none skipped) and every bench ran.
#
#   scripts/gpu_acceptance.sh [--dry-run]     (see docs/gpu.md)
#
# Runs through `uv run --locked` where uv is installed (with PYTHONPATH set: only if uv's environment is ready
# without a package index); otherwise (an offline install from scripts/offline_wheelhouse.py, into an environment
# or a PYTHONPATH folder) through `python3 -m ...`, with this checkout's src/ put on PYTHONPATH.
# MJFLEET_PYTHON=/path/to/python forces an interpreter (no uv). --dry-run prints the commands and runs nothing.
# Knobs (environment): MJFLEET_ACCEPTANCE_OUT (results folder), MJFLEET_ACCEPTANCE_TASKS, MJFLEET_ACCEPTANCE_NUM_ENVS,
# MJFLEET_ACCEPTANCE_STEPS (timed env steps per measurement), MJFLEET_ACCEPTANCE_TRAIN_ENVS,
# MJFLEET_ACCEPTANCE_ITERATIONS (PPO iterations per training row, the first untimed), MJFLEET_ACCEPTANCE_SCALING_TASKS
# (tasks that also train 2 workers sharing the GPU; cartpole-balance go1-velocity-flat), MJFLEET_ACCEPTANCE_LAUNCHER_TASKS
# (tasks that also train through torchrunx; go1-velocity-flat).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2
dry_run=0
for arg in "$@"; do
  case $arg in
    --dry-run) dry_run=1 ;;
    -h | --help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument $arg (usage: scripts/gpu_acceptance.sh [--dry-run])" >&2; exit 2 ;;
  esac
done

source "$repo/scripts/python_env.sh"  # sets py (the interpreter command) and runner (its description)

out=${MJFLEET_ACCEPTANCE_OUT:-$repo/acceptance/$(date +%Y-%m-%dT%H-%M-%S)}
read -r -a tasks <<<"${MJFLEET_ACCEPTANCE_TASKS:-cartpole-balance go1-velocity-flat humanoid-velocity-flat}"
read -r -a num_envs <<<"${MJFLEET_ACCEPTANCE_NUM_ENVS:-1024 4096 8192}"
steps=${MJFLEET_ACCEPTANCE_STEPS:-50}
train_envs=${MJFLEET_ACCEPTANCE_TRAIN_ENVS:-4096}
iterations=${MJFLEET_ACCEPTANCE_ITERATIONS:-4}

echo "runner: $runner"
echo "results: $out"

# Ctrl-C or SIGTERM (a session's stop) ends the phase that runs and every later one.
source "$repo/scripts/stoppable.sh"  # sets stopping; stoppable CMD...

# One phase: its command, log file and a time limit (a hung phase must not stall the whole acceptance run).
phase() {
  local name=$1 limit=$2; shift 2
  echo "+ $*"
  if ((dry_run)); then return 0; fi
  if ((stopping)); then echo "  skipped: stopped"; echo "$name stopped 0" >>"$out/phases.txt"; return; fi
  local start=$SECONDS code
  stoppable timeout --kill-after=30 "$limit" "$@" >"$out/$name.log" 2>&1
  code=$?
  ((code == 130 || code == 143)) && stopping=1  # stopped from outside, not by its limit (124)
  echo "$name $code $((SECONDS - start))" >>"$out/phases.txt"
  if ((code == 0)); then echo "  ok in $((SECONDS - start)) s ($out/$name.log)"
  else echo "  FAILED (exit $code) in $((SECONDS - start)) s; last lines of $out/$name.log:"; tail -n 15 "$out/$name.log"; fi
}

if ((!dry_run)); then
  mkdir -p "$out" || exit 2
  # A fixed MJFLEET_ACCEPTANCE_OUT must not summarise an earlier run's results as this one's.
  rm -f "$out"/phases.txt "$out"/pytest-gpu.xml "$out"/bench-*.json "$out"/summary.txt
  : >"$out/phases.txt"
  if ! "${py[@]}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "error: CUDA is not available to $runner (torch.cuda.is_available() is False); this script needs a GPU" >&2
    exit 2
  fi
fi

# Generous limits: they only catch hangs. The first run on a machine compiles every Warp kernel for the GPU (and the
# CPU, for the CPU/CUDA comparisons), which takes minutes unless scripts/warp_cuda_cache.py put the GPU's part in
# Warp's cache beforehand; a phase killed here would waste the whole run.
# A test running 300 s dumps every thread's stack into the log (faulthandler_timeout); where pytest-timeout is
# installed, one running 600 s (fixture set-up included, which may compile kernels) fails alone, not the whole phase.
per_test=(-o faulthandler_timeout=300)
if ((!dry_run)) && "${py[@]}" -c 'import pytest_timeout' >/dev/null 2>&1; then per_test+=(--timeout 600); fi
phase pytest-gpu 900 "${py[@]}" -m pytest -m gpu tests/gpu -p no:cacheprovider -q -rs --durations=0 "${per_test[@]}" \
  --junitxml "$out/pytest-gpu.xml"
# Launched training rows cost a fresh process each (~a minute on a first run): workers per GPU matter most for small
# tasks, and the launcher's overhead is one figure, so not every task measures them.
scaling=" ${MJFLEET_ACCEPTANCE_SCALING_TASKS-cartpole-balance go1-velocity-flat} "
launcher=" ${MJFLEET_ACCEPTANCE_LAUNCHER_TASKS-go1-velocity-flat} "
for task in "${tasks[@]}"; do
  rows=()
  if [[ $scaling == *" $task "* ]]; then rows+=(--workers 1 2 --workers-per-gpu 2); fi
  if [[ $launcher == *" $task "* ]]; then rows+=(--launcher-overhead); fi
  phase "bench-$task" 600 "${py[@]}" -m mjfleet.cli.bench "$task" --gpu-ids 0 --num-envs "${num_envs[@]}" \
    --steps "$steps" --train-num-envs "$train_envs" --train-iterations "$iterations" ${rows[@]+"${rows[@]}"} \
    --json "$out/bench-$task.json"
done
echo "+ ${py[*]} scripts/gpu_summary.py $out"
if ((dry_run)); then exit 0; fi
"${py[@]}" scripts/gpu_summary.py "$out" | tee "$out/summary.txt"
exit "${PIPESTATUS[0]}"
