#!/bin/bash
# Train under torchrun: every process torchrun starts is one rank of one job. mjfleet reads the rank, world size
# and rendezvous address from torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...); no flag is
# needed. Rank k uses seed + k and cuda:<LOCAL_RANK> (or the CPU), gradients are averaged every mini-batch, and
# rank 0 alone creates the run directory and logs progress. See docs/guides/other_launchers.md.
#
# Run it after `uv sync`, from any directory: it uses the project's environment (.venv) directly.
#
# One node, NPROC ranks on this machine (default 2; at most one per GPU):
#   bash examples/torchrun.sh                                        # cartpole-balance, one GPU per rank
#   GPU_IDS=None bash examples/torchrun.sh --agent.max-iterations 50 # CPU ranks (gloo); extra arguments go to train
#   TASK=go1-velocity-flat NPROC=4 bash examples/torchrun.sh
#
# Two nodes: run the same command on each node, with the project and its environment at the same path on both
# (a shared file system is simplest: rank 0 may be on either node, and a restart must find the run directory):
#   NNODES=2 RDZV_HOST=node1 RUN_ID=go1-a TASK=go1-velocity-flat NPROC=4 bash examples/torchrun.sh   # on both
#
# Settings (environment variables):
#   TASK           the task id (default cartpole-balance)
#   NPROC          ranks on this node (default 2): at most its GPUs, or any number of CPU ranks with GPU_IDS=None
#   GPU_IDS        auto (default: cuda:<LOCAL_RANK>, the CPU where CUDA is missing) or None (CPU ranks, gloo)
#   NNODES         nodes in the job (default 1)
#   RDZV_HOST      two or more nodes: the node whose torchrun hosts the rendezvous (any one of them)
#   RDZV_PORT      two or more nodes: a port free on RDZV_HOST that the other nodes reach (default 29400)
#   RUN_ID         two or more nodes: the job's name, the same on every node; a later job with the same RUN_ID
#                  continues its run from the newest checkpoint (inside a SLURM allocation the SLURM job id names
#                  the run instead: add `--run-id NAME` to the train options to name it across jobs there)
#   TORCHRUN_OPTS  more torchrun options, e.g. "--max-restarts 3" (restart every rank after a failure; they continue
#                  from the newest checkpoint) or "--log-dir logs/torchrun --tee 3" (each rank's output in a file)

set -euo pipefail

TASK="${TASK:-cartpole-balance}"
NPROC="${NPROC:-2}"
GPU_IDS="${GPU_IDS:-auto}"
NNODES="${NNODES:-1}"
TORCHRUN_OPTS="${TORCHRUN_OPTS:-}"

# The environment's torchrun and train, not `uv run torchrun`: a Ctrl-C reaches uv and torchrun alike, uv passes it on
# to torchrun a second time, and torchrun's ranks then stop at once instead of after the iteration with a checkpoint.
VENV_BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin"
if [ ! -x "${VENV_BIN}/torchrun" ] || [ ! -x "${VENV_BIN}/train" ]; then
    echo "error: ${VENV_BIN} has no torchrun and train: run \`uv sync\` in the project first" >&2
    exit 2
fi
export PATH="${VENV_BIN}:${PATH}"

if [ "${NNODES}" = 1 ]; then
    # --standalone: a rendezvous of its own on a free local port and a new run id for every invocation. torchrun's
    # own restarts (--max-restarts) keep the id, so they continue the run; a new invocation starts a new run (add
    # `--run-id NAME` to continue one instead), except inside a SLURM allocation, whose job id names the run.
    # shellcheck disable=SC2086  # TORCHRUN_OPTS is a list of options
    exec torchrun --standalone --nproc_per_node="${NPROC}" ${TORCHRUN_OPTS} \
        --no_python train "${TASK}" --gpu-ids "${GPU_IDS}" "$@"
fi

: "${RDZV_HOST:?NNODES=${NNODES}: set RDZV_HOST to the node that hosts the rendezvous (the same on every node)}"
: "${RUN_ID:?NNODES=${NNODES}: set RUN_ID, the same on every node (a job with the same RUN_ID continues its run)}"
RDZV_PORT="${RDZV_PORT:-29400}"

# c10d rendezvous: the torchrun on RDZV_HOST hosts it, the others connect; training starts once NNODES nodes have
# joined (torchrun waits up to 600 s for them). --rdzv-id is the job part of the run's identity: a restart, or a later
# job with the same RUN_ID and the same training settings, continues the same run directory from its newest
# checkpoint; other settings (another --seed) under the same RUN_ID are another run. Inside a SLURM allocation the
# SLURM job id takes the rendezvous id's place (a later allocation is a new run unless train is given --run-id).
# shellcheck disable=SC2086  # TORCHRUN_OPTS is a list of options
exec torchrun --nnodes="${NNODES}" --nproc_per_node="${NPROC}" \
    --rdzv-backend=c10d --rdzv-endpoint="${RDZV_HOST}:${RDZV_PORT}" --rdzv-id="${RUN_ID}" ${TORCHRUN_OPTS} \
    --no_python train "${TASK}" --gpu-ids "${GPU_IDS}" "$@"
