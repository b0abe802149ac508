"""A learner of a test's own, registered from outside mjfleet as a package would register one: rsl-rl-lib's PPO
under another name (the registry, not the algorithm, is what the tests show)."""

from __future__ import annotations

from mjfleet.envs.env import MjEnv
from mjfleet.rl.config import AgentConfig
from mjfleet.rl.learners.registry import LearnerEntry
from mjfleet.rl.learners.rsl_rl import RslRlPpo
from mjfleet.runtime.context import DistributedContext


class ToyPpo(RslRlPpo):
    """``--agent.learner toy-ppo``."""

    name = "toy-ppo"


def build(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> ToyPpo:
    return ToyPpo(env, agent_cfg, ctx, train_envs)


ENTRY = LearnerEntry(
    name="toy-ppo",
    build=f"{__name__}:build",
    label="TOY",
    settings="algorithm",
    checkpoint_keys=("actor_state_dict", "iter"),
    networks=(("actor", (("actor_state_dict",),)), ("critic", (("critic_state_dict",),))),
)
