"""Per-rank state a checkpoint carries so that a restarted run continues where it stopped.

Each rank's torch/NumPy/Python RNGs, its environment's generator, episode-length buffer and step counter, and the
task's ``state_dict()`` (e.g. terrain curriculum levels), also that of its evaluation environments where they have a
simulation of their own (on the CPU; on a GPU they are part of the training simulation and its task state). Tensors
and plain data only, so checkpoints load with ``weights_only=True``. A checkpoint resumes on any number of workers;
:func:`restore_rank_state` says which saved rank's state each rank takes.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import numpy as np
import torch

from mjfleet.envs.env import MjEnv

logger = logging.getLogger(__name__)


def capture_rank_state(env: MjEnv, rank: int, evaluation: MjEnv | None = None) -> dict[str, Any]:
    """This rank's RNG and episode state, and the task state of ``evaluation``, its evaluation environments'
    simulation, if any: a continued run's evaluation episodes then start on the curriculum levels they had reached,
    not on the first ones again."""
    np_state: tuple[Any, ...] = np.random.get_state(legacy=True)  # type: ignore[assignment]
    state: dict[str, Any] = {
        "rank": rank,
        "torch_rng_state": torch.get_rng_state(),
        "numpy_rng_state": {
            "kind": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python_rng_state": random.getstate(),
        "env_generator_state": env.generator.get_state(),
        "episode_length_buf": env.episode_length_buf.detach().to("cpu").clone(),
        "common_step_counter": int(env.common_step_counter),
    }
    if env.device.type == "cuda":
        state["cuda_rng_state"] = torch.cuda.get_rng_state(env.device)
    state["task_state"] = env.task.state_dict()
    if evaluation is not None:
        state["evaluation_task_state"] = evaluation.task.state_dict()
    return state


def restore_rank_state(env: MjEnv, states: Any, rank: int, world_size: int, evaluation: MjEnv | None = None) -> bool:
    """Restore this rank's part of a checkpoint's ``rank_states``; True if its episode counters were restored.

    The rule when the checkpoint was written by N workers and this run has M (docs/guides/runs.md, "Changing the
    number of workers on resume"):

    - every rank continues the shared step counter;
    - rank r < N restores saved rank r's RNG streams, episode-length buffer and task state (e.g. curriculum
      levels); the buffer and the task state only where their shapes match this run's (``--env.num-envs`` may have
      changed), otherwise they start fresh;
    - rank r >= N keeps the fresh RNG streams of ``seed + r`` (as a fresh run would) and fresh episode counters,
      but takes the task state of saved rank ``r mod N``: the policy already masters those curriculum levels.

    ``evaluation`` (the evaluation environments' own simulation) takes the evaluation task state of the saved rank
    whose task state ``env`` takes, under the same shape rule; its random streams and episodes start afresh.
    A checkpoint without the list (rsl_rl's own) restores nothing per rank.
    """
    if not isinstance(states, list) or not states:
        return False
    saved = len(states)
    env.common_step_counter = int(states[min(rank, saved - 1)].get("common_step_counter", env.common_step_counter))
    if saved != world_size and rank == 0:
        logger.info(
            "checkpoint was written by %d worker(s), this run has %d: ranks below %d continue the saved ranks' RNG"
            " and episode state, %s",
            saved,
            world_size,
            min(saved, world_size),
            f"saved ranks {world_size}..{saved - 1} are dropped"
            if saved > world_size
            else f"ranks {saved}..{world_size - 1} start fresh from seed + rank",
        )
    source = states[rank % saved]
    # The worlds were reset when the simulation was built, on the fresh task state (a robot on the tile of a fresh
    # curriculum level): reset again on the restored one, before the saved streams are restored, so that the first
    # episodes run where the restored state says and the curricula judge them there.
    if _load_task_state(env, source, f"saved rank {rank % saved}"):
        env.reset_all()
    if evaluation is not None and _load_task_state(
        evaluation, source, f"saved rank {rank % saved}'s evaluation", "evaluation_task_state"
    ):
        evaluation.reset_all()
    if rank >= saved:
        return False
    state = states[rank]
    torch.set_rng_state(state["torch_rng_state"].cpu())
    if "cuda_rng_state" in state and env.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng_state"].cpu(), env.device)
    nps = state.get("numpy_rng_state")
    if isinstance(nps, dict):
        keys = nps["keys"].cpu().numpy().astype(np.uint32)
        np.random.set_state((nps["kind"], keys, nps["pos"], nps["has_gauss"], nps["cached_gaussian"]))
    if "python_rng_state" in state:
        random.setstate(_as_tuple(state["python_rng_state"]))
    generator = state["env_generator_state"].cpu()
    # CPU and CUDA generators have different state formats: a checkpoint from GPU workers resumed on CPU workers.
    if generator.shape == env.generator.get_state().shape:
        env.generator.set_state(generator)
    else:
        logger.info("rank %d: the saved environment generator is for another device; it starts fresh", rank)
    buf = state.get("episode_length_buf")
    if isinstance(buf, torch.Tensor) and buf.shape == env.episode_length_buf.shape:
        env.episode_length_buf.copy_(buf.to(env.episode_length_buf.device))
        return True
    logger.info("rank %d: the checkpoint has another number of environments; episode counters start fresh", rank)
    return False


def restore_shared_state(env: MjEnv, states: Any) -> None:
    """What evaluating a checkpoint takes from it: the step counter alone. Not its task state: a policy is judged
    from the curriculum levels a fresh simulation has, as its ONNX file is and the run's own checks were (saved rank
    0's levels fitted only where ``--num-episodes`` equalled its environments); nor its random streams or episode
    counters, which follow the evaluation's own seed. A task file the policy did not train on is warned about."""
    if isinstance(states, list) and states:
        env.common_step_counter = int(states[0].get("common_step_counter", env.common_step_counter))
        _say_other_task_files(env, states[0].get("task_state") or {})


def _say_other_task_files(env: MjEnv, saved: dict[str, Any]) -> None:
    """A warning per content digest in the checkpoint's task state (``<name>_sha256``: a tracking task's motion) that
    is not this task's: a checkpoint evaluated without its run's settings plays on the task's defaults, and with them
    on the run's file as it is now (``<name>_file``, where saved, tells the two apart)."""
    current = env.task.state_dict()
    for key, value in saved.items():
        other = current.get(key)
        if key.endswith("_sha256") and isinstance(value, str) and isinstance(other, str) and value != other:
            name = key.removesuffix("_sha256")
            path = saved.get(f"{name}_file")
            if isinstance(path, str) and path == current.get(f"{name}_file"):
                # The run's own file, edited since: naming the run's settings would send the user to this file.
                logger.warning(
                    "the %s file %s changed since the policy trained on it (sha256 %s then, %s now)",
                    name,
                    path,
                    value[:12],
                    other[:12],
                )
                continue
            logger.warning(
                "the policy trained on another %s (sha256 %s) than this task's (%s): pass the run's own (its settings"
                " are in its params/ folder)",
                name,
                value[:12],
                other[:12],
            )


def _load_task_state(env: MjEnv, state: dict[str, Any], source: str, key: str = "task_state") -> bool:
    """Load ``state[key]`` into ``env``'s task unless a tensor's shape differs from this task's (another
    ``num_envs``); whether it was loaded."""
    saved = state.get(key)
    if not saved:
        return False
    current = env.task.state_dict()
    mismatched = [
        key
        for key, value in saved.items()
        if isinstance(value, torch.Tensor)
        and isinstance(current.get(key), torch.Tensor)
        and value.shape != current[key].shape
    ]
    if mismatched:
        logger.info("task state of %s does not fit this run (%s): it starts fresh", source, ", ".join(mismatched))
        return False
    env.task.load_state_dict(saved)
    return True


def _as_tuple(value: Any) -> Any:
    """``random.setstate`` wants nested tuples; a checkpoint round trip may hand back lists."""
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value
