"""Run a policy (or a baseline) for a number of episodes and summarise them."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import TERMINATION_NONFINITE
from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import is_onnx
from mjfleet.rl.learners.registry import learner_entry

if TYPE_CHECKING:
    from mjfleet.rl.config import AgentConfig

logger = logging.getLogger(__name__)

Policy = Callable[[TensorDict], torch.Tensor]

PROGRESS_INTERVAL_S = 10.0
"""How often :func:`evaluate` says how far it got (seconds of wall time)."""


def random_policy(env: MjEnv) -> Policy:
    """Uniform actions in [-1, 1] (the range tasks map onto their actuators)."""
    return lambda obs: torch.rand(env.num_envs, env.num_actions, device=env.device, generator=env.generator) * 2 - 1


def zero_policy(env: MjEnv) -> Policy:
    """All-zero actions."""
    return lambda obs: torch.zeros(env.num_envs, env.num_actions, device=env.device)


def task_differences(exported: dict[str, object], task: dict[str, object]) -> list[str]:
    """Where the environment an ONNX policy was exported from differs from the one it plays in (what the sidecar
    says of it: the action scale, the timing, a tracking task's motion, a filter's coefficients): an ONNX file played
    without its run's settings beside it runs on the task's defaults, another action scale or motion, without a
    word."""
    task = json.loads(json.dumps(task))  # as the sidecar has it: lists, not tuples
    return [
        f"exported with {key} {json.dumps(exported[key])}, played with {json.dumps(value)}"
        for key, value in task.items()
        if key in exported and exported[key] != value
    ]


def load_policy(checkpoint: Path, env: MjEnv, agent_cfg: AgentConfig, device: str) -> Policy:
    """The deterministic policy of ``checkpoint`` for ``env``: onnxruntime for ``.onnx``, else the torch actor."""
    if is_onnx(checkpoint):
        from mjfleet.rl.checkpoint.onnx import OnnxPolicy, environment_metadata

        onnx_policy = OnnxPolicy(checkpoint, index=lambda: env.task.export_index(env))
        onnx_policy.check_compatible(env.get_observations(), env.num_actions)
        played = environment_metadata(env)
        motion = task_differences(onnx_policy.metadata, {"motion": played["motion"]}) if "motion" in played else []
        if motion:  # the graph feeds the policy its own motion: judged against another, play's figures mean nothing
            raise UsageError(
                f"{checkpoint}: {motion[0]}; the graph carries the motion it was exported with: play it with that"
                " motion (--env.motion <its file>), or play the run's .pt checkpoint on this one"
            )
        for line in task_differences(onnx_policy.metadata, played):
            logger.warning("%s: %s", checkpoint, line)
        return onnx_policy

    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    runner = Runner(env, _without_replay(agent_cfg), DistributedContext(device=device), run_dir=None)
    runner.load(str(checkpoint), evaluate=True)  # play's --seed decides resets, not the training run's RNGs
    # No learner's memory reads them here; computing them would draw the task's observation noise once more at every
    # episode's end, and play's episodes would differ from the exported file's at the same --seed.
    env.final_observations = False
    return runner.get_inference_policy(device)  # type: ignore[return-value]


def _without_replay(agent_cfg: AgentConfig) -> AgentConfig:
    """``agent_cfg`` with an off-policy learner's replay buffer at one transition per environment: playing a checkpoint
    learns nothing, and a buffer of the training size for each of play's environments is gigabytes at thousands."""
    entry = learner_entry(agent_cfg.learner)
    name = entry.settings if entry.off_policy else None
    group = getattr(agent_cfg, name, None) if name else None
    if name is None or group is None or not hasattr(group, "buffer_per_env"):
        return agent_cfg
    return dataclasses.replace(agent_cfg, **{name: dataclasses.replace(group, buffer_per_env=1)})


@dataclass
class EvaluationSummary:
    """Means over the evaluated episodes."""

    episodes: int
    mean_return: float
    mean_length: float
    success_rate: float
    metrics: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float | int]:
        """Flat dict for the JSON summary line."""
        return {
            "episodes": self.episodes,
            "mean_return": self.mean_return,
            "mean_length": self.mean_length,
            "success_rate": self.success_rate,
            **self.metrics,
        }


def evaluate(
    env: MjEnv,
    policy: Policy,
    num_episodes: int,
) -> EvaluationSummary:
    """Step ``env`` with ``policy`` until ``num_episodes`` episodes ended, counting each environment's episodes in
    order so short (failed) episodes are not over-represented: with ``num_envs >= num_episodes`` every counted
    episode is the first of its environment.
    """
    env.reset_all()
    obs = env.get_observations()
    episodes_done = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
    rounds_needed = -(-num_episodes // env.num_envs)
    # Which episodes count is fixed by environment and round, not by when they end (the first to end are the
    # short ones: failures would crowd out the successes of an unfinished round).
    quota = torch.full_like(episodes_done, rounds_needed - 1)
    quota[: num_episodes - (rounds_needed - 1) * env.num_envs] += 1
    collected: dict[str, list[torch.Tensor]] = {}
    count = 0
    max_steps = rounds_needed * int(env.max_episode_length) + 1
    began = said = time.monotonic()
    with torch.inference_mode():
        for step in range(max_steps):
            if time.monotonic() - said >= PROGRESS_INTERVAL_S:
                said = time.monotonic()
                logger.info(
                    "%d of %d episodes ended after %d of at most %d steps (%.0f s)",
                    count, num_episodes, step, max_steps, said - began,
                )  # fmt: skip
            obs, _, _, extras = env.step(policy(obs))
            if "episodes" not in extras:
                continue
            ids, values = extras["episodes"]
            keep = episodes_done[ids] < quota[ids]
            episodes_done[ids] += 1
            for key, v in values.items():
                collected.setdefault(key, []).append(v[keep])
            count += int(keep.sum())
            if count >= num_episodes:
                break
    if count == 0:
        raise RuntimeError("no episode finished; is the episode length finite?")
    merged = {k: torch.cat(v)[:num_episodes].double() for k, v in collected.items()}
    n = int(merged["Episode/return"].numel())
    # A diverged world's metrics read its garbage state (NaN on a GPU): its episode counts, they do not.
    diverged = merged.get(f"Episode_Termination/{TERMINATION_NONFINITE}")
    finite = torch.ones(n, dtype=torch.bool) if diverged is None else diverged == 0
    metrics = {
        k.split("/", 1)[1]: float(v[finite].mean())
        for k, v in merged.items()
        if k.startswith("Metrics/") and bool(finite.any())
    }
    return EvaluationSummary(
        episodes=n,
        mean_return=float(merged["Episode/return"].mean()),
        mean_length=float(merged["Episode/length"].mean()),
        success_rate=float(merged["Episode/success"].mean()),
        metrics=metrics,
    )
