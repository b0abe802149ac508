#!/usr/bin/env bash
# Time to a walking robot with each learner, on one CUDA GPU (cuda:0): for every task and learner,
# `train <task> --gpu-ids 0 --env.num-envs N --agent.learner <learner> <its settings> --stop-when 'success>=0.95'`,
# timed from the command to its exit, then `play` of the newest checkpoint it wrote (100 episodes of the deterministic
# policy). One scripts/gpu_time_to_walk.sh sweep per learner, one after another, into <results>/<learner>/ with its
# own summary.md (the tables' env-count column is N); each sweep prints its tables when it ends. The off-policy
# learners go first (their rows are the ones never measured on a GPU), PPO's last.
#
#   scripts/gpu_learners.sh [--dry-run]     (see docs/learners.md)
#
# The SAC, TD3 and FastTD3 settings below are starting points for legged robots, not measured ones (docs/learners.md),
# given to the tasks without an off-policy recipe of their own (a task's recipe, e.g. the cart-poles', applies by
# itself: those tasks sweep into <results>/<learner>-recipe/); MJFLEET_LEARNERS_SAC_ARGS, MJFLEET_LEARNERS_TD3_ARGS and
# MJFLEET_LEARNERS_FAST_TD3_ARGS replace them.
# --dry-run prints every sweep's commands and the time bound and runs nothing. Ctrl-C or SIGTERM stops the sweep
# that runs and every later one. Knobs (environment): MJFLEET_LEARNERS_OUT (results folder), MJFLEET_LEARNERS_TASKS
# (go1-velocity-flat unitree-go1-velocity-flat unitree-g1-velocity-flat), MJFLEET_LEARNERS (every registered learner),
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
tasks=${MJFLEET_LEARNERS_TASKS:-go1-velocity-flat unitree-go1-velocity-flat unitree-g1-velocity-flat}
source "$repo/scripts/python_env.sh"  # sets py (the interpreter command) and runner (its description)
# Every registered learner (the registry names them, a package's own included), the off-policy ones first, unless
# MJFLEET_LEARNERS picks some.
registered=$("${py[@]}" -c 'from mjfleet.rl.learners.registry import learner_entry, learner_names
print(" ".join(sorted(learner_names(), key=lambda name: not learner_entry(name).off_policy)))') ||
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
# FastTD3's settings for the Go1 on MuJoCo Playground where mjfleet's have them (its networks, discount, noise range,
# batch; 64 gradient steps of an iteration's 24 environment steps, its 8 per step at a quarter of the environments).
fast_td3_args=${MJFLEET_LEARNERS_FAST_TD3_ARGS-"--agent.fast-td3.batch-size 32768 --agent.fast-td3.gradient-steps 64 \
--agent.fast-td3.gamma 0.97 --agent.fast-td3.noise-min 0.2 --agent.fast-td3.noise-max 0.8 \
--agent.fast-td3.action-limit 2 --agent.fast-td3.value-limit 100 --agent.policy.activation relu \
--agent.policy.actor-hidden-dims 512 256 128 --agent.policy.critic-hidden-dims 1024 512 256"}
for n in "$num_envs" "$limit" "$play_limit" ${budget:+"$budget"}; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "error: expected a whole number, got '$n'" >&2; exit 2; }
done
for learner in "${learners[@]}"; do
  [[ " $registered " == *" $learner "* ]] ||
    { echo "error: unknown learner '$learner' in MJFLEET_LEARNERS (registered: $registered)" >&2; exit 2; }
done
read -r -a task_list <<<"$tasks"
# The tasks whose off-policy recipe changes their GPU defaults (the starting points above would replace it); a recipe
# for the CPU alone, as go1-velocity-flat's, leaves a GPU run the starting points.
recipe_tasks=$("${py[@]}" -c 'import sys
from mjfleet.tasks.registry import get_task
print(" ".join(t for t in sys.argv[1:] if get_task(t).has_off_policy_recipe(on_cpu=False)))' "${task_list[@]}") ||
  { echo "error: could not read the tasks' recipes with $runner (are the task ids right?)" >&2; exit 2; }
bound=$(( ${#learners[@]} * ${#task_list[@]} * (limit + play_limit) ))
echo "results: $out"
echo "plan: ${#learners[@]} learners (${learners[*]}) x ${#task_list[@]} tasks ($tasks), one run after another; at most"\
  "$bound s (the sum of their limits)${budget:+; budget $budget s}"

failed=0
source "$repo/scripts/stoppable.sh"  # sets stopping; stoppable CMD... (the sweep passes a stop on to its phase)
sweeps=()
# One sweep of gpu_time_to_walk.sh: <learner> on <tasks> with <settings>, into <folder>.
sweep() {
  local learner=$1 folder=$2 sweep_tasks=$3 settings=$4 left=""
  if ((stopping)); then echo "== $folder: skipped, stopped"; return; fi
  if [[ -n $budget ]]; then
    left=$((budget - SECONDS))
    if ((left <= 0)); then echo "== $folder: skipped, the budget of $budget s is spent"; return; fi
  fi
  echo "== $folder"
  sweeps+=("$folder")
  MJFLEET_WALK_OUT="$out/$folder" MJFLEET_WALK_TASKS="$sweep_tasks" MJFLEET_WALK_NUM_ENVS="$num_envs" \
    MJFLEET_WALK_LIMIT_S="$limit" MJFLEET_WALK_PLAY_LIMIT_S="$play_limit" MJFLEET_WALK_FRESH=0 \
    MJFLEET_WALK_BUDGET_S="$left" MJFLEET_WALK_TRAIN_ARGS="--agent.learner $learner $settings" \
    stoppable "$BASH" "$repo/scripts/gpu_time_to_walk.sh" ${dry_run[@]+"${dry_run[@]}"}
  local code=$?
  ((code == 130 || code == 143)) && stopping=1
  ((code == 0)) || failed=1
}
for learner in "${learners[@]}"; do
  case $learner in
    skrl-sac) settings=$sac_args ;;
    skrl-td3) settings=$td3_args ;;
    fast-td3) settings=$fast_td3_args ;;
    *) settings="" ;;  # PPO: the tasks' own settings
  esac
  own=() given=()
  for task in "${task_list[@]}"; do
    if [[ -n $settings && " $recipe_tasks " == *" $task "* ]]; then own+=("$task"); else given+=("$task"); fi
  done
  ((${#given[@]} == 0)) || sweep "$learner" "$learner" "${given[*]}" "$settings"
  ((${#own[@]} == 0)) || sweep "$learner" "$learner-recipe" "${own[*]}" ""
done
if ((${#dry_run[@]} == 0)); then
  for folder in ${sweeps[@]+"${sweeps[@]}"}; do echo "summary: $out/$folder/summary.md"; done
fi
exit "$failed"
