#!/usr/bin/env bash
# Time to a walking robot with each learner, on one CUDA GPU (cuda:0): for every task and learner,
# `train <task> --gpu-ids 0 --env.num-envs N --agent.learner <learner> <its settings> --stop-when 'success>=0.95'`,
# timed from the command to its exit, then `play` of the newest checkpoint it wrote (100 episodes of the deterministic
# policy). One scripts/gpu_time_to_walk.sh sweep per learner, one after another, into <results>/<learner>/ with its
# own summary.md (the tables' env-count column is N); each sweep prints its tables when it ends.
#
#   scripts/gpu_learners.sh [--dry-run]     (see docs/learners.md)
#
# The SAC and TD3 settings for these robots are starting points, not measured ones (docs/learners.md);
# MJFLEET_LEARNERS_SAC_ARGS and MJFLEET_LEARNERS_TD3_ARGS replace them. --dry-run prints every sweep's commands and
# the time bound and runs nothing. Knobs (environment): MJFLEET_LEARNERS_OUT (results folder), MJFLEET_LEARNERS_TASKS
# (unitree-go1-velocity-flat unitree-g1-velocity-flat), MJFLEET_LEARNERS (every registered learner),
# MJFLEET_LEARNERS_NUM_ENVS (4096), MJFLEET_LEARNERS_LIMIT_S (seconds per train, 300); MJFLEET_WALK_PLAY_LIMIT_S (45),
# MJFLEET_WALK_STOP_WHEN and MJFLEET_WALK_BUDGET_S (total seconds of all sweeps) as in gpu_time_to_walk.sh.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2
dry_run=()
for arg in "$@"; do
  case $arg in
    --dry-run) dry_run=(--dry-run) ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "error: unknown argument $arg (usage: scripts/gpu_learners.sh [--dry-run])" >&2; exit 2 ;;
  esac
done

out=${MJFLEET_LEARNERS_OUT:-$repo/learners/$(date +%Y-%m-%dT%H-%M-%S)}
tasks=${MJFLEET_LEARNERS_TASKS:-unitree-go1-velocity-flat unitree-g1-velocity-flat}
source "$repo/scripts/python_env.sh"  # sets py (the interpreter command) and runner (its description)
# Every registered learner (the registry names them, a package's own included), unless MJFLEET_LEARNERS picks some.
registered=$("${py[@]}" -c 'from mjfleet.rl.learners.registry import learner_names; print(" ".join(learner_names()))') ||
  { echo "error: could not list the registered learners with $runner" >&2; exit 2; }
read -r -a learners <<<"${MJFLEET_LEARNERS:-$registered}"
num_envs=${MJFLEET_LEARNERS_NUM_ENVS:-4096}
limit=${MJFLEET_LEARNERS_LIMIT_S:-300}
play_limit=${MJFLEET_WALK_PLAY_LIMIT_S:-45}
budget=${MJFLEET_WALK_BUDGET_S:-}
# Starting points for legged robots on a GPU (docs/learners.md): large batches from a buffer of 1000 steps of every
# environment, a gentler learning rate than cartpole's, actions up to twice the task's action scale. Not measured.
sac_args=${MJFLEET_LEARNERS_SAC_ARGS-"--agent.sac.batch-size 8192 --agent.sac.gradient-steps 32 \
--agent.sac.learning-rate 3e-4 --agent.sac.action-limit 2"}
td3_args=${MJFLEET_LEARNERS_TD3_ARGS-"--agent.td3.batch-size 8192 --agent.td3.gradient-steps 32 \
--agent.td3.learning-rate 3e-4 --agent.td3.action-limit 2 --agent.td3.exploration-noise 0.2"}
for n in "$num_envs" "$limit" "$play_limit" ${budget:+"$budget"}; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "error: expected a whole number, got '$n'" >&2; exit 2; }
done
for learner in "${learners[@]}"; do
  [[ " $registered " == *" $learner "* ]] ||
    { echo "error: unknown learner '$learner' in MJFLEET_LEARNERS (registered: $registered)" >&2; exit 2; }
done
read -r -a task_list <<<"$tasks"
bound=$(( ${#learners[@]} * ${#task_list[@]} * (limit + play_limit) ))
echo "results: $out"
echo "plan: ${#learners[@]} learners (${learners[*]}) x ${#task_list[@]} tasks ($tasks), one run after another; at most"\
  "$bound s (the sum of their limits)${budget:+; budget $budget s}"

failed=0
for learner in "${learners[@]}"; do
  case $learner in
    skrl-sac) settings=$sac_args ;;
    skrl-td3) settings=$td3_args ;;
    *) settings="" ;;  # PPO: the tasks' own settings
  esac
  left=""
  if [[ -n $budget ]]; then
    left=$((budget - SECONDS))
    if ((left <= 0)); then echo "== $learner: skipped, the budget of $budget s is spent"; continue; fi
  fi
  echo "== $learner"
  MJFLEET_WALK_OUT="$out/$learner" MJFLEET_WALK_TASKS="$tasks" MJFLEET_WALK_NUM_ENVS="$num_envs" \
    MJFLEET_WALK_LIMIT_S="$limit" MJFLEET_WALK_PLAY_LIMIT_S="$play_limit" MJFLEET_WALK_FRESH=0 \
    MJFLEET_WALK_BUDGET_S="$left" MJFLEET_WALK_TRAIN_ARGS="--agent.learner $learner $settings" \
    "$BASH" "$repo/scripts/gpu_time_to_walk.sh" ${dry_run[@]+"${dry_run[@]}"} || failed=1
done
if ((${#dry_run[@]} == 0)); then
  for learner in "${learners[@]}"; do echo "summary: $out/$learner/summary.md"; done
fi
exit "$failed"
