# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Cart-pole balance and swing-up: push a cart on a rail so a hinged pole stands up and stays up."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import torch

from mjfleet.envs.config import EnvConfig
from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import Task
from mjfleet.sim.simulation import SimConfig

MODEL_PATH = Path(__file__).with_name("cartpole.xml")

UP_COS = 0.9
"""The pole counts as up when cos(angle) exceeds this (about 26 degrees from vertical)."""


@dataclass
class CartpoleRewards:
    """Per-term weights (0 disables a term). Each term is integrated over time (multiplied by the control step)."""

    alive: float = 0.0
    """Constant 1 while the episode runs (pays for not terminating)."""
    upright: float = 1.0
    """(cos(angle) + 1) / 2: 1 with the pole straight up, 0 straight down."""
    pole_up: float = 0.0
    """1 while the pole is up (cos(angle) > 0.9)."""
    cart_position: float = -0.1
    """Squared cart distance from the rail centre."""
    effort: float = -0.01
    """Squared control."""
    pole_velocity: float = -0.005
    """Squared pole angular velocity."""


@dataclass
class CartpoleConfig(EnvConfig):
    """Cart-pole environment settings."""

    swingup: bool = False
    """Start hanging down (swing-up) instead of near upright (balance)."""
    init_angle_range: float = 0.2
    """Initial pole angle is drawn uniformly within +-this (radians) around upright (balance) or down (swing-up)."""
    init_cart_range: float = 0.25
    """Initial cart position is drawn uniformly within +-this (metres)."""
    init_velocity_std: float = 0.05
    """Standard deviation of the initial cart and pole velocities."""
    fall_cos: float = 0.8
    """Balance only: the episode terminates when cos(angle) drops below this (about 37 degrees)."""
    cart_limit: float = 1.7
    """Balance only: the episode terminates when the cart leaves +-this (the rail ends at 1.8 m)."""
    action_scale: float = 1.0
    """Control = clip(action, -1, 1) * action_scale (the motor's gear turns 1 into 10 N)."""
    rewards: CartpoleRewards = field(default_factory=CartpoleRewards)
    """Reward term weights."""


class CartpoleTask(Task[CartpoleConfig]):
    """Both cart-pole variants: the config's ``swingup`` flag picks the start state and the terminations."""

    video_camera = "fixed"

    def build_model(self) -> mujoco.MjModel:
        return mujoco.MjModel.from_xml_path(str(MODEL_PATH))

    @property
    def num_actions(self) -> int:
        return 1

    def setup(self, env: MjEnv) -> None:
        self._up_steps = torch.zeros(env.num_envs, device=env.device)

    # --- state helpers -------------------------------------------------------------------------------------------
    @staticmethod
    def cart_position(env: MjEnv) -> torch.Tensor:
        return env.sim.qpos[:, 0]

    @staticmethod
    def pole_cos(env: MjEnv) -> torch.Tensor:
        return torch.cos(env.sim.qpos[:, 1])

    # --- MDP ---------------------------------------------------------------------------------------------------
    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        n, cfg, g = env_ids.numel(), self.cfg, env.generator
        angle = (torch.rand(n, device=env.device, generator=g) * 2 - 1) * cfg.init_angle_range
        if cfg.swingup:
            angle = angle + math.pi
        cart = (torch.rand(n, device=env.device, generator=g) * 2 - 1) * cfg.init_cart_range
        vel = torch.randn(n, 2, device=env.device, generator=g) * cfg.init_velocity_std
        env.sim.qpos[env_ids] = torch.stack((cart, angle), dim=-1)
        env.sim.qvel[env_ids] = vel
        self._up_steps[env_ids] = 0.0

    def apply_actions(self, env: MjEnv, actions: torch.Tensor) -> None:
        env.sim.ctrl[:, 0] = actions[:, 0].clamp(-1.0, 1.0) * self.cfg.action_scale

    def after_step(self, env: MjEnv) -> None:
        self._up_steps += (self.pole_cos(env) > UP_COS).float()

    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        qpos, qvel = env.sim.qpos, env.sim.qvel
        obs = torch.stack((qpos[:, 0], torch.cos(qpos[:, 1]), torch.sin(qpos[:, 1]), qvel[:, 0], qvel[:, 1]), dim=-1)
        return {"policy": obs, "critic": obs}

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        if self.cfg.swingup:
            return {}
        return {
            "pole_fallen": self.pole_cos(env) < self.cfg.fall_cos,
            "cart_out_of_range": self.cart_position(env).abs() > self.cfg.cart_limit,
        }

    # --- reward terms ------------------------------------------------------------------------------------------
    def reward_alive(self, env: MjEnv) -> torch.Tensor:
        """1 per second alive."""
        return torch.ones(env.num_envs, device=env.device)

    def reward_upright(self, env: MjEnv) -> torch.Tensor:
        """(cos + 1) / 2 of the pole angle."""
        return (self.pole_cos(env) + 1.0) * 0.5

    def reward_pole_up(self, env: MjEnv) -> torch.Tensor:
        """1 while the pole is up."""
        return (self.pole_cos(env) > UP_COS).float()

    def reward_cart_position(self, env: MjEnv) -> torch.Tensor:
        """Squared cart offset from the centre."""
        return torch.square(self.cart_position(env))

    def reward_effort(self, env: MjEnv) -> torch.Tensor:
        """Squared control."""
        return torch.square(env.sim.ctrl[:, 0])

    def reward_pole_velocity(self, env: MjEnv) -> torch.Tensor:
        """Squared pole angular velocity."""
        return torch.square(env.sim.qvel[:, 1])

    # --- statistics --------------------------------------------------------------------------------------------
    def metric_names(self) -> tuple[str, ...]:
        return ("pole_up_fraction",)

    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        steps = env.episode_length_buf[env_ids].clamp(min=1).float()
        return {"pole_up_fraction": self._up_steps[env_ids] / steps}

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """The episode reached its time limit with the pole up."""
        return time_outs & (self.pole_cos(env)[env_ids] > UP_COS)


def balance_config() -> CartpoleConfig:
    """Start near upright; keep the pole up for 5 s."""
    return CartpoleConfig(
        episode_length_s=5.0,
        sim=SimConfig(decimation=2),
        rewards=CartpoleRewards(alive=1.0),
    )


def swingup_config() -> CartpoleConfig:
    """Start hanging down; swing the pole up and hold it for the rest of 10 s."""
    return CartpoleConfig(
        swingup=True,
        episode_length_s=10.0,
        init_angle_range=0.2,
        sim=SimConfig(decimation=2),
        rewards=CartpoleRewards(pole_up=1.0, pole_velocity=-0.002),
    )
