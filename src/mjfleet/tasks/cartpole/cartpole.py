# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Cart-pole balance and swing-up: push a cart on a rail so a hinged pole stands up and stays up."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import mujoco
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import Task
from mjfleet.tasks.cartpole.config import CartpoleConfig, CartpoleRewards, balance_config, swingup_config

__all__ = [
    "MODEL_PATH",
    "UP_COS",
    "CartpoleConfig",
    "CartpoleRewards",
    "CartpoleTask",
    "balance_config",
    "swingup_config",
]

MODEL_PATH = Path(__file__).with_name("cartpole.xml")

UP_COS = 0.9
"""The pole counts as up when cos(angle) exceeds this (about 26 degrees from vertical)."""
ACTION_CLIP = 1.0
"""Actions are clipped to [-1, 1] before the action scale (the motor's control range)."""


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
        env.sim.ctrl[:, 0] = actions[:, 0].clamp(-ACTION_CLIP, ACTION_CLIP) * self.cfg.action_scale

    def export_metadata(self) -> dict[str, Any]:
        # The clip that applies before the action scale: this task's, inside the environment's wider one.
        terms = [
            ("cart_pos", 1, "the cart's position on its rail (m)"),
            ("pole_cos", 1, "the cosine of the pole's angle (1: up)"),
            ("pole_sin", 1, "the sine of the pole's angle"),
            ("cart_vel", 1, "the cart's velocity (m/s)"),
            ("pole_vel", 1, "the pole's angular velocity (rad/s)"),
        ]
        return {
            "clip_actions": min(float(self.cfg.clip_actions), ACTION_CLIP),
            "observation_terms": {"policy": [{"name": name, "size": size, "what": what} for name, size, what in terms]},
        }

    def after_step(self, env: MjEnv) -> None:
        self._up_steps += (self.pole_cos(env) > UP_COS).float()

    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        qpos, qvel = env.sim.qpos, env.sim.qvel
        obs = torch.stack((qpos[:, 0], torch.cos(qpos[:, 1]), torch.sin(qpos[:, 1]), qvel[:, 0], qvel[:, 1]), dim=-1)
        return {"policy": obs, "critic": obs}

    def termination_names(self) -> tuple[str, ...]:
        return () if self.cfg.swingup else ("pole_fallen", "cart_out_of_range")

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
        steps = env.episode_steps[env_ids].clamp(min=1).float()
        return {"pole_up_fraction": self._up_steps[env_ids] / steps}

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """The episode reached its time limit with the pole up."""
        return time_outs & (self.pole_cos(env)[env_ids] > UP_COS)
