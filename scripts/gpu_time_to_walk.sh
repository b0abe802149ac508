#!/usr/bin/env bash
# Time to a walking robot against the number of environments, on one CUDA GPU (cuda:0). For each task and env count:
# `train <task> --gpu-ids 0 --env.num-envs N --stop-when 'success>=0.95'`, timed from the command to its exit, then
# `play` of the newest checkpoint it wrote (100 episodes of the deterministic policy). With MJFLEET_WALK_FRESH=1 each
# task first trains at its defaults with empty kernel caches (a fresh machine: every Warp kernel is compiled inside
# the run), then again with those caches warm, and its sweep uses them; without it the sweep uses Warp's usual cache
# (where nothing was compiled yet, the first row pays for it: see its overhead column, or fill the cache beforehand
# with scripts/warp_cuda_cache.py). Every run starts after the previous one ended.
# One markdown table per task goes to summary.md (rewritten after every phase) and is printed at the end.
#
#   scripts/gpu_time_to_walk.sh [--dry-run]     (see docs/gpu.md)
#
# Interpreter as in scripts/gpu_acceptance.sh: `uv run --locked` where uv is installed (resolved once to the
# environment's python, so uv's own start is not timed), else python3 with this checkout's src/ on PYTHONPATH;
# MJFLEET_PYTHON=/path/to/python forces one. --dry-run prints the commands and the time bound and runs nothing.
# Knobs (environment): MJFLEET_WALK_OUT (results folder), MJFLEET_WALK_TASKS (go1-velocity-flat),
# MJFLEET_WALK_NUM_ENVS (1024 4096 8192 16384), MJFLEET_WALK_LIMIT_S (seconds per train, 100),
# MJFLEET_WALK_PLAY_LIMIT_S (seconds per play, 45), MJFLEET_WALK_STOP_WHEN (success>=0.95),
# MJFLEET_WALK_TRAIN_ARGS (more train flags for the sweep, e.g. PPO settings), MJFLEET_WALK_FRESH (0),
# MJFLEET_WALK_FRESH_LIMIT_S (seconds per train at the defaults, 200), MJFLEET_WALK_BUDGET_S (total seconds: a
# phase whose limit no longer fits is skipped and says so; no budget by default), MJFLEET_COMMIT (the commit to
# record where the checkout has no .git, e.g. a copy made with `git archive`).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2
dry_run=0
for arg in "$@"; do
  case $arg in
    --dry-run) dry_run=1 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "error: unknown argument $arg (usage: scripts/gpu_time_to_walk.sh [--dry-run])" >&2; exit 2 ;;
  esac
done

source "$repo/scripts/python_env.sh"  # sets py (the interpreter command) and runner (its description)
# Wide enough that no log line wraps: the summary reads the start-up line and the last lines of each run (its
# iterations come from the run's progress.jsonl).
export COLUMNS=300

out=${MJFLEET_WALK_OUT:-$repo/time-to-walk/$(date +%Y-%m-%dT%H-%M-%S)}
read -r -a tasks <<<"${MJFLEET_WALK_TASKS:-go1-velocity-flat}"
read -r -a num_envs <<<"${MJFLEET_WALK_NUM_ENVS:-1024 4096 8192 16384}"
read -r -a train_args <<<"${MJFLEET_WALK_TRAIN_ARGS:-}"
limit=${MJFLEET_WALK_LIMIT_S:-100}
play_limit=${MJFLEET_WALK_PLAY_LIMIT_S:-45}
fresh_limit=${MJFLEET_WALK_FRESH_LIMIT_S:-200}
stop_when=${MJFLEET_WALK_STOP_WHEN:-success>=0.95}
fresh=${MJFLEET_WALK_FRESH:-0}
budget=${MJFLEET_WALK_BUDGET_S:-}
grace=15 # after its limit a phase gets SIGTERM (train stops after the iteration, with a checkpoint); SIGKILL after this
for n in "$limit" "$play_limit" "$fresh_limit" ${budget:+"$budget"} "${num_envs[@]}"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "error: expected a whole number, got '$n'" >&2; exit 2; }
done

# The plan: every phase with its limit, in order (train-<task>-<label>, play-<task>-<label>): every task's first rows
# (fresh and warm, then its first env count) before any task's further env counts, so that a budget or a stop that
# cuts the sweep short leaves the rows that matter most.
plan=()
if [[ $fresh == 1 ]]; then
  for task in "${tasks[@]}"; do plan+=("train-$task-fresh $fresh_limit" "play-$task-fresh $play_limit" \
    "train-$task-warm $fresh_limit" "play-$task-warm $play_limit"); done
fi
for n in "${num_envs[@]}"; do
  for task in "${tasks[@]}"; do plan+=("train-$task-$n $limit" "play-$task-$n $play_limit"); done
done
bound=0
for p in "${plan[@]}"; do bound=$((bound + ${p##* })); done

if ((!dry_run)) && [[ $runner == uv* ]]; then
  # One `uv run` here, not one per phase: its environment check would be timed with every command.
  interpreter=$("${py[@]}" -c 'import sys; print(sys.executable)') || { echo "error: $runner failed" >&2; exit 2; }
  py=(env -u PYTHONPATH "$interpreter"); runner="$runner ($interpreter)"
elif [[ $runner == uv* ]]; then
  runner="$runner (resolved to its interpreter before the first phase)"
fi
echo "runner: $runner"
echo "results: $out"
echo "plan: ${#plan[@]} phases, one after another; at most $bound s (the sum of their limits; a phase that ignores"\
  "SIGTERM at its limit is killed $grace s later)${budget:+; budget $budget s}"

if ((!dry_run)); then
  mkdir -p "$out" || exit 2
  # A fixed MJFLEET_WALK_OUT must not summarise an earlier run's results as this one's.
  rm -rf "$out/runs" "$out/caches"
  rm -f "$out"/phases.txt "$out"/commands.txt "$out"/about.txt "$out"/environment.txt "$out"/summary.md \
    "$out"/train-*.log "$out"/play-*.log "$out"/play-*.json
  if ! "${py[@]}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "error: CUDA is not available to $runner (torch.cuda.is_available() is False); this script needs a GPU" >&2
    exit 2
  fi
  printf '%s\n' "${plan[@]}" >"$out/plan.txt"
  : >"$out/phases.txt"
  : >"$out/commands.txt"
  {
    echo "started: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: ${MJFLEET_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "stop_when: $stop_when"
  } >"$out/about.txt"
fi

# A command as it can be pasted into a shell (`--stop-when 'success>=0.95'`).
quoted() {
  local a words=()
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then words+=("$a"); else words+=("'${a//\'/\'\\\'\'}'"); fi
  done
  echo "${words[*]}"
}

now() { local t=${EPOCHREALTIME:-$(date +%s.%N)}; echo "${t/,/.}"; }

# Ctrl-C or SIGTERM (a session's stop) ends the phase that runs (train checkpoints and exits) and every later one.
source "$repo/scripts/stoppable.sh"  # sets stopping; stoppable CMD...

# One phase: its command with a time limit, output to <name>.log (play: its JSON line to <name>.json), and a line
# `name exit_code start end` in phases.txt. The summary is rewritten after it, so a cut-short sweep keeps its rows.
phase() {
  local name=$1 limit=$2; shift 2
  local shown
  shown=$(quoted "$@")
  echo "+ $shown"
  if ((dry_run)); then return 0; fi
  printf '%s\t%s\n' "$name" "$shown" >>"$out/commands.txt"
  if ((stopping)); then
    echo "  skipped: stopped"; echo "$name stopped - -" >>"$out/phases.txt"
    return 1
  fi
  if [[ -n $budget ]] && ((SECONDS + limit > budget)); then
    echo "  skipped: $limit s no longer fit the budget of $budget s"; echo "$name skipped - -" >>"$out/phases.txt"
    return 1
  fi
  local start end code stdout=$out/$name.log
  [[ $name == play-* ]] && stdout=$out/$name.json
  start=$(now)
  stoppable timeout --kill-after="$grace" "$limit" "$@" >"$stdout" 2>"$out/$name.log.err"
  code=$?
  end=$(now)
  ((code == 130 || code == 143)) && stopping=1  # the phase was stopped from outside, not by its limit (124)
  if [[ $stdout != "$out/$name.log" ]]; then mv "$out/$name.log.err" "$out/$name.log"
  else cat "$out/$name.log.err" >>"$stdout"; rm -f "$out/$name.log.err"; fi
  echo "$name $code $start $end" >>"$out/phases.txt"
  if ((code == 0)); then echo "  ok ($out/$name.log)"
  elif ((code == 124)); then echo "  time limit of $limit s reached ($out/$name.log)"
  else echo "  FAILED (exit $code); last lines of $out/$name.log:"; tail -n 15 "$out/$name.log"; fi
  "${py[@]}" scripts/gpu_walk_summary.py --quiet "$out" || true
  return "$code"
}

# The newest model_<iteration>.pt of the one run under a log root (<root>/<experiment>/<run>/).
newest_checkpoint() {
  local best="" best_it=-1 f it
  for f in "$1"/*/*/model_*.pt; do
    it=${f##*/model_}; it=${it%.pt}
    if [[ -f $f && $it =~ ^[0-9]+$ ]] && ((10#$it > best_it)); then best_it=$((10#$it)); best=$f; fi
  done
  printf '%s' "$best"
}

# train, then play of what it wrote (whether or not it reached the condition: the table says how it ended).
train_and_play() {
  local task=$1 label=$2 limit=$3; shift 3
  local root=$out/runs/$task-$label ckpt
  phase "train-$task-$label" "$limit" "$@" --log-root "$root"
  if ((dry_run)); then ckpt="<newest model_*.pt under $root>"
  elif ((stopping)); then ckpt="-"  # not played: phase records it as stopped
  else
    ckpt=$(newest_checkpoint "$root")
    if [[ -z $ckpt ]]; then
      echo "  no checkpoint under $root: play-$task-$label not run"
      echo "play-$task-$label no-checkpoint - -" >>"$out/phases.txt"
      return
    fi
  fi
  phase "play-$task-$label" "$play_limit" ${run_env[@]+"${run_env[@]}"} "${py[@]}" -m mjfleet.cli.play "$task" \
    --gpu-ids 0 --checkpoint "$ckpt" --num-episodes 100
}

# The environment of a task's runs: with MJFLEET_WALK_FRESH=1, Warp's kernel cache and the CUDA driver's JIT cache
# in folders of its own, empty before its fresh run; the warm run finds them filled, and its sweep keeps them, so the
# sweep's first row compiles nothing either.
task_env() {
  run_env=()
  if [[ $fresh == 1 ]]; then
    local caches=$out/caches/$1
    run_env=(env "WARP_CACHE_PATH=$caches/warp" "CUDA_CACHE_PATH=$caches/cuda")
    ((dry_run)) || mkdir -p "$caches/warp" "$caches/cuda"
  fi
}

if [[ $fresh == 1 ]]; then
  for task in "${tasks[@]}"; do
    task_env "$task"
    for label in fresh warm; do
      train_and_play "$task" "$label" "$fresh_limit" ${run_env[@]+"${run_env[@]}"} "${py[@]}" -m mjfleet.cli.train \
        "$task" --gpu-ids 0 --stop-when "$stop_when"
    done
  done
fi
for n in "${num_envs[@]}"; do
  for task in "${tasks[@]}"; do
    task_env "$task"
    train_and_play "$task" "$n" "$limit" ${run_env[@]+"${run_env[@]}"} "${py[@]}" -m mjfleet.cli.train "$task" \
      --gpu-ids 0 --env.num-envs "$n" --stop-when "$stop_when" ${train_args[@]+"${train_args[@]}"}
  done
done
echo "+ ${py[*]} scripts/gpu_walk_summary.py $out"
if ((dry_run)); then exit 0; fi
"${py[@]}" scripts/gpu_walk_summary.py "$out"
