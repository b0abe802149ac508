# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""What every viewer shares: a policy stepping the environment on demand, and the state people change live."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field

import mujoco
import numpy as np
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.rl.evaluation.episodes import Policy


@dataclass
class RewardReadout:
    """The shown environment's reward terms."""

    rate: dict[str, float] = field(default_factory=dict)
    """Weighted value of each term at the last step, per second (the step's reward divided by the control step)."""
    episode: dict[str, float] = field(default_factory=dict)
    """Each term summed over the shown environment's episode so far (what ``Episode_Reward/<term>`` logs)."""
    total: float = 0.0
    """Sum of ``episode``."""


class ViewerSession:
    """Steps ``env`` with ``policy`` one control step per :meth:`tick`, and holds what a viewer controls.

    Controls (pause, single steps, the shown environment, held commands) may be changed from other threads (GUI
    callbacks); :meth:`tick` applies them between steps.
    """

    def __init__(self, env: MjEnv, policy: Policy) -> None:
        self.env = env
        self.policy = policy
        self.command_ranges: dict[str, tuple[float, float]] = env.task.command_ranges()
        """Commands people may steer (empty for tasks without them)."""
        self.paused = False
        self.steps = 0
        """Control steps taken."""
        self.episode_steps = 0
        """Steps of the shown environment's current episode."""
        self.rewards = self._fresh_readout()
        self._env_index = 0
        self._held: dict[str, float] | None = None
        self._pending_steps = 0
        self._view_changed = False
        self._release = False
        self._commands_changed = False
        self._lock = threading.Lock()
        self.model = copy.copy(env.sim.mj_model)
        """The model drawn: the shown environment's own randomized values (a cube's size, ...) after each step."""
        self._data = mujoco.MjData(self.model)
        env.reset_all()
        self._obs = env.get_observations()
        self._refresh_pose()

    def _fresh_readout(self) -> RewardReadout:
        return RewardReadout(episode=dict.fromkeys(self.env.reward_weights, 0.0))

    # --- controls (any thread) ---------------------------------------------------------------------------------
    @property
    def env_index(self) -> int:
        """The environment shown (and whose rewards are read)."""
        return self._env_index

    def show_env(self, index: int) -> None:
        """Show environment ``index`` from the next :meth:`tick` on (paused too); its reward sums restart."""
        if not 0 <= index < self.env.num_envs:
            raise ValueError(f"environment index {index} is outside 0..{self.env.num_envs - 1}")
        with self._lock:
            self._env_index = index
            self.rewards = self._fresh_readout()
            self.episode_steps = 0
            self._view_changed = True

    def request_redraw(self) -> None:
        """Have the next :meth:`tick` report something to draw, also while paused (a view setting changed)."""
        with self._lock:
            self._view_changed = True

    def request_step(self) -> None:
        """Take one step at the next :meth:`tick`, also while paused."""
        with self._lock:
            self._pending_steps += 1

    def hold_commands(self, values: dict[str, float] | None) -> None:
        """Keep every environment's commands at ``values`` (names of :attr:`command_ranges`); None hands them back
        to the task's own schedule."""
        if values is not None and (unknown := set(values) - set(self.command_ranges)):
            raise KeyError(f"unknown commands {sorted(unknown)}; this task has {sorted(self.command_ranges)}")
        with self._lock:
            # Handed back at the next tick, between steps: a GUI thread never touches the task mid-step.
            self._release = self._release or (values is None and self._held is not None)
            self._commands_changed = self._commands_changed or values != self._held
            self._held = dict(values) if values is not None else None

    @property
    def held_commands(self) -> dict[str, float] | None:
        """The commands being held, or None."""
        with self._lock:
            return None if self._held is None else dict(self._held)

    # --- the loop (one thread) ---------------------------------------------------------------------------------
    def tick(self) -> bool:
        """Advance one control step unless paused (a requested step advances anyway); returns whether there is
        something new to draw: a step, or while paused another environment shown (:meth:`show_env`,
        :meth:`request_redraw`)."""
        with self._lock:
            redraw, self._view_changed = self._view_changed, False
            if self.paused and self._pending_steps == 0:
                if redraw:
                    self._refresh_pose()
                return redraw
            self._pending_steps = max(0, self._pending_steps - 1)
            held = None if self._held is None else dict(self._held)
            release, self._release = self._release, False
            changed, self._commands_changed = self._commands_changed, False
            index = self._env_index
        env = self.env
        with torch.inference_mode():  # the task's buffers are inference tensors once a step ran
            if release:
                env.task.hold_commands(env, None)
            if held is not None:
                env.task.hold_commands(env, held)  # here, between steps: GUI threads never touch the task mid-step
            if changed:  # the policy reads the commands it is asked for from this step on, not the old ones
                self._obs = env.refresh_observations()
            self._obs, _, dones, _ = env.step(self.policy(self._obs))
            terms = list(env.reward_terms)
            values = torch.stack([env.reward_terms[k][index] for k in terms]).tolist() if terms else []
            done = bool(dones[index])
        self.steps += 1
        self._read_rewards(index, terms, values, done)
        with self._lock:
            self._refresh_pose()
        return True

    def _read_rewards(self, index: int, terms: list[str], values: list[float], done: bool) -> None:
        dt = self.env.step_dt
        with self._lock:
            if index != self._env_index:  # another environment was chosen during the step: its readout starts empty
                return
            readout = self.rewards
            readout.rate = {k: v / dt for k, v in zip(terms, values, strict=True)}
            for k, v in zip(terms, values, strict=True):
                readout.episode[k] = readout.episode.get(k, 0.0) + v
            readout.total = sum(readout.episode.values())
            self.episode_steps += 1
            if done:  # the environment was reset: a new episode starts
                self.rewards = self._fresh_readout()
                self.rewards.rate = dict(readout.rate)
                self.episode_steps = 0

    # --- what to draw ------------------------------------------------------------------------------------------
    def _refresh_pose(self) -> None:
        """Copy the shown environment's pose into :attr:`data` (on the loop's thread: it draws from it)."""
        sim, data = self.env.sim, self._data
        sim.world_model(self._env_index, self.model)
        data.qpos[:] = sim.qpos[self._env_index].detach().cpu().numpy()
        mujoco.mj_kinematics(self.model, data)

    @property
    def data(self) -> mujoco.MjData:
        """Host copy of the shown environment after the last step (``qpos`` and body poses)."""
        return self._data

    def body_poses(self) -> tuple[np.ndarray, np.ndarray]:
        """World positions ``(nbody, 3)`` and orientations (w, x, y, z) ``(nbody, 4)`` of the shown environment."""
        return self._data.xpos.copy(), self._data.xquat.copy()
