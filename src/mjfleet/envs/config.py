"""Configuration shared by every task's environment."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from mjfleet.errors import UsageError
from mjfleet.sim.config import SimConfig, as_shipped


@dataclass
class EnvConfig:
    """Settings every batched environment has; tasks subclass it with their own fields."""

    num_envs: int = 1024
    """Parallel environments per worker (each worker of a multi-worker run simulates this many)."""
    episode_length_s: float = 5.0
    """Episode time limit in seconds; reaching it is a time-out, not a termination."""
    clip_actions: float = 10.0
    """Policy outputs are clipped to [-clip_actions, clip_actions] before the task scales them."""
    sim: SimConfig = field(default_factory=SimConfig)
    """Physics settings."""

    def as_judged(self) -> Self:
        """These settings as a policy is judged under them (the evaluation's own simulation, ``play``): the robot
        file's own contact model, whatever the training simulation runs. Tasks that train under other conditions than
        they judge (a command curriculum) override it and call this one."""
        return dataclasses.replace(self, sim=as_shipped(self.sim))

    def model_files(self) -> list[Path]:
        """The MJCF files the task loads (a robot's, an arm's), after :meth:`prepare_assets`: a run records their
        text's digest, and ``play`` says when it loads other ones. Tasks whose models are built in return none."""
        return []

    def model_records(self) -> dict[str, str]:
        """What the task builds its model from besides :meth:`model_files` (a robot record: its servos, home pose,
        zones), by label, as text: a run records its digest with the files', and ``play`` says when it differs."""
        return {}

    def content_files(self) -> dict[str, Path]:
        """Settings that name a file whose content decides what trains (``{"motion": path}``), after
        :meth:`prepare_assets`: a run's settings hold each file's digest (``env.<name>_sha256``), so the same name
        with another content is another run."""
        return {}

    def prepare_assets(self) -> None:
        """Fetch or check the files the task loads, once, before any worker starts.

        Raises :class:`~mjfleet.errors.UsageError` when they cannot be had, so a multi-worker run fails with one
        line in the launcher instead of in every worker. Tasks whose models are built in need not override it.
        """


def check_ranges(ranges: dict[str, tuple[tuple[float, ...] | None, float | None]]) -> None:
    """:class:`UsageError` for the first range whose low end is above its high end, or not above its bound:
    ``{"--env.flag": ((low, high), bound or None)}``; a range of None (an item turned off) is not checked."""
    for flag, (values, above) in ranges.items():
        if values is None:
            continue
        low, high = values[0], values[-1]
        if low > high:
            raise UsageError(f"{flag} {low:g} {high:g}: the low end is above the high end")
        if above is not None and not low > above:
            raise UsageError(f"{flag} {low:g} {high:g}: must be above {above:g}")


def check_at_least(values: dict[str, tuple[float, float, bool]]) -> None:
    """:class:`UsageError` for the first setting below its bound: ``{"--env.flag": (value, bound, strictly)}``
    (``strictly``: it must be above the bound)."""
    for flag, (value, bound, strictly) in values.items():
        if not (value > bound if strictly else value >= bound):
            raise UsageError(f"{flag} must be {'above' if strictly else 'at least'} {bound:g} (got {value:g})")


def check_env(env: EnvConfig) -> None:
    """The environment settings every command checks (``train`` and ``play``); :class:`UsageError` naming the flag."""
    if not 0 < env.episode_length_s < 1e6:
        raise UsageError(f"--env.episode-length-s must be positive and finite (got {env.episode_length_s})")
    if not env.clip_actions > 0:
        raise UsageError(f"--env.clip-actions must be positive (got {env.clip_actions})")
    sim = env.sim
    if sim.decimation < 1:
        raise UsageError(f"--env.sim.decimation must be at least 1 (got {sim.decimation})")
    if sim.threads is not None and sim.threads < 1:
        raise UsageError(f"--env.sim.threads must be at least 1 (got {sim.threads}; leave it out for every core)")
    for flag, capacity in (("--env.sim.nconmax", sim.nconmax), ("--env.sim.njmax", sim.njmax)):
        if capacity is not None and capacity < 1:
            raise UsageError(f"{flag} must be at least 1 (got {capacity}; leave it out for the default)")
    contacts = sim.training_contacts
    if contacts.impratio is not None and not contacts.impratio > 0:
        # MuJoCo takes it without a word: pyramidal cones lose their normal force (the robot falls through the
        # floor), elliptic ones their friction.
        raise UsageError(f"--env.sim.training-contacts.impratio must be positive (got {contacts.impratio})")
    if contacts.timestep_scale < 1 or sim.decimation % contacts.timestep_scale:
        raise UsageError(
            f"--env.sim.training-contacts.timestep-scale {contacts.timestep_scale} must divide --env.sim.decimation"
            f" {sim.decimation}"
        )
    if sim.divergence_speed is not None and not sim.divergence_speed > 0:
        raise UsageError(
            f"--env.sim.divergence-speed must be positive (got {sim.divergence_speed}; None turns the check off)"
        )
