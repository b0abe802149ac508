"""Cart-pole settings and the balance / swing-up presets (no simulator imports: parsed before anything loads)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mjfleet.envs.config import EnvConfig
from mjfleet.sim.config import SimConfig


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
