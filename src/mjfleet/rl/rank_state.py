"""Per-rank state a checkpoint carries so that a restarted run continues where it stopped.

Each rank's torch/NumPy/Python RNGs, its environment's generator, episode-length buffer and step counter, and the
task's ``state_dict()`` (e.g. terrain curriculum levels). Tensors and plain data only, so checkpoints load with
``weights_only=True``.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import numpy as np
import torch

from mjfleet.envs.env import MjEnv

logger = logging.getLogger(__name__)


def capture_rank_state(env: MjEnv, rank: int) -> dict[str, Any]:
    """This rank's RNG and episode state."""
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
    return state


def restore_rank_state(env: MjEnv, states: Any, rank: int, world_size: int) -> bool:
    """Restore this rank's entry of a checkpoint's ``rank_states``; True if its episode state was restored.

    With a different number of workers (or a format-1 checkpoint without the list) only the shared step counter
    and rank 0's task state are restored; RNGs keep this run's per-rank seeds, so ranks still explore differently.
    """
    if not isinstance(states, list) or not states:
        return False
    same_layout = len(states) == world_size
    state = states[rank] if same_layout else states[0]
    env.common_step_counter = int(state.get("common_step_counter", env.common_step_counter))
    if "task_state" in state:
        env.task.load_state_dict(state["task_state"])
    if not same_layout:
        logger.info(
            "checkpoint was written by %d worker(s), this run has %d: per-worker RNG and episode state start fresh",
            len(states),
            world_size,
        )
        return False
    torch.set_rng_state(state["torch_rng_state"].cpu())
    if "cuda_rng_state" in state and env.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng_state"].cpu(), env.device)
    nps = state.get("numpy_rng_state")
    if isinstance(nps, dict):
        keys = nps["keys"].cpu().numpy().astype(np.uint32)
        np.random.set_state((nps["kind"], keys, nps["pos"], nps["has_gauss"], nps["cached_gaussian"]))
    if "python_rng_state" in state:
        random.setstate(_as_tuple(state["python_rng_state"]))
    env.generator.set_state(state["env_generator_state"].cpu())
    buf = state.get("episode_length_buf")
    if isinstance(buf, torch.Tensor) and buf.shape == env.episode_length_buf.shape:
        env.episode_length_buf.copy_(buf.to(env.episode_length_buf.device))
        return True
    return False


def _as_tuple(value: Any) -> Any:
    """``random.setstate`` wants nested tuples; a checkpoint round trip may hand back lists."""
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value
