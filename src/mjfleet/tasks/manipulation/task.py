# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""What the manipulation tasks share: the arm's servos, actions, joint observations and penalties."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, TypeVar

import mujoco
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import Task
from mjfleet.errors import UsageError
from mjfleet.tasks.joint_limits import joint_ranges, soft_ranges
from mjfleet.tasks.manipulation.config import Box3, ManipulationConfig
from mjfleet.tasks.manipulation.model import HAND_TABLE_SENSOR, home_qpos
from mjfleet.tasks.manipulation.sources import resolve_arm

CfgT = TypeVar("CfgT", bound=ManipulationConfig)


def uniform_in(box: Box3, n: int, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """``n`` positions drawn uniformly in ``box``, ``(n, 3)``."""
    low = torch.tensor([box.x[0], box.y[0], box.z[0]], device=device)
    high = torch.tensor([box.x[1], box.y[1], box.z[1]], device=device)
    return low + (high - low) * torch.rand(n, 3, device=device, generator=generator)


class ArmTask(Task[CfgT]):
    """A fixed-base arm whose actuators are position servos: actions are offsets from the home pose.

    Subclasses build the model (:meth:`_build`), draw their goals in :meth:`reset` after :meth:`reset_arm`, and add
    their own observations after :meth:`arm_observations`.
    """

    forward_after_reset: ClassVar[bool] = True  # observations read the end-effector site
    video_camera: ClassVar[str | None] = "front"

    def __init__(self, cfg: CfgT) -> None:
        super().__init__(cfg)
        self.arm = resolve_arm(cfg.arm)
        self._model = self._build()

    @abstractmethod
    def _build(self) -> mujoco.MjModel:
        """The task's scene (called once, by ``__init__``)."""

    def build_model(self) -> mujoco.MjModel:
        return self._model

    @property
    def num_actions(self) -> int:
        return int(self._model.nu)

    # --- setup -------------------------------------------------------------------------------------------------
    def setup(self, env: MjEnv) -> None:
        m, dev = env.sim.mj_model, env.device
        self.dt = env.step_dt
        joints = m.actuator_trnid[:, 0]
        self._qpos_idx = torch.as_tensor(m.jnt_qposadr[joints], dtype=torch.long, device=dev)
        self._qvel_idx = torch.as_tensor(m.jnt_dofadr[joints], dtype=torch.long, device=dev)
        self.home_qpos = torch.as_tensor(home_qpos(m, self.arm), dtype=torch.float32, device=dev)
        self.default_joint_pos = self.home_qpos[self._qpos_idx].clone()
        """Servo targets of the home pose, in actuator order; actions are offsets from them."""
        low, high = joint_ranges(m, joints)
        soft_low, soft_high = soft_ranges(low, high, self.cfg.soft_joint_limit)
        self._joint_low, self._joint_high, self._soft_low, self._soft_high = (
            torch.as_tensor(v, dtype=torch.float32, device=dev) for v in (low, high, soft_low, soft_high)
        )
        gripper = self._gripper_id = int(m.actuator(self.arm.gripper_actuator).id)
        scale = torch.full((m.nu,), self.cfg.action_scale, device=dev)
        ctrl_low, ctrl_high = m.actuator_ctrlrange[gripper]
        scale[gripper] = float(ctrl_high - ctrl_low) / 2
        self.action_scale = scale
        """Per actuator: radians per unit action on the arm; the gripper's half control range."""
        self._gripper = torch.zeros(m.nu, dtype=torch.bool, device=dev)
        self._gripper[gripper] = True
        alpha = self.cfg.action_filter
        if not 0 < alpha <= 1:
            raise UsageError(f"--env.action-filter must be in (0, 1] (got {alpha})")
        self._filtered = alpha < 1
        # Per actuator: the filter's share of the new target (the gripper's: all of it).
        self._alpha = torch.where(self._gripper, 1.0, alpha)
        self.targets = self.default_joint_pos.expand(env.num_envs, -1).clone()
        """Each environment's servo targets, in actuator order (``--env.action-filter``)."""
        self.ee_site = torch.as_tensor([int(m.site(self.arm.ee_site).id)], device=dev)
        site = m.site(self.arm.ee_site)
        self._gripper_point = {
            "body": m.body(int(site.bodyid[0])).name,
            "offset": [float(v) for v in site.pos],
            "site": self.arm.ee_site,
        }
        """Where the gripper point the observations measure from is (its body, and the offset in its frame)."""
        adr = int(m.sensor(HAND_TABLE_SENSOR).adr[0])
        self._hand_force = slice(adr + 1, adr + 4)
        # Joints the actuators do not drive (a finger that follows another) start at home too.
        self._arm_qpos = torch.as_tensor(
            [int(m.jnt_qposadr[j]) for j in range(m.njnt) if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE],
            dtype=torch.long,
            device=dev,
        )

    # --- state helpers -----------------------------------------------------------------------------------------
    def hand_on_table(self, env: MjEnv) -> torch.Tensor:
        """Whether the hand presses on the table with more than ``hand_table_force`` (never where that is 0)."""
        force = torch.linalg.vector_norm(env.sim.sensordata[:, self._hand_force], dim=-1)
        return (
            force > self.cfg.hand_table_force
            if self.cfg.hand_table_force > 0
            else torch.zeros_like(force, dtype=torch.bool)
        )

    def joint_pos(self, env: MjEnv) -> torch.Tensor:
        """Actuated joint positions, ``(num_envs, num_actions)``."""
        return env.sim.qpos[:, self._qpos_idx]

    def joint_vel(self, env: MjEnv) -> torch.Tensor:
        """Actuated joint velocities, ``(num_envs, num_actions)``."""
        return env.sim.qvel[:, self._qvel_idx]

    def ee_pos(self, env: MjEnv) -> torch.Tensor:
        """End-effector position in the base (= world) frame, ``(num_envs, 3)``."""
        return env.sim.site_pos(self.ee_site)[:, 0]

    # --- MDP pieces --------------------------------------------------------------------------------------------
    def reset_arm(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        """Home pose with uniform noise on the actuated joints, at rest, servos at home."""
        n = env_ids.numel()
        qpos = self.home_qpos.expand(n, -1).clone()
        noise = torch.rand(n, self.num_actions, device=env.device, generator=env.generator) * 2 - 1
        # The fingers keep their home opening (a finger coupled to the gripper's must match it).
        noise = noise * self.cfg.init_joint_noise * ~self._gripper
        qpos[:, self._qpos_idx] = torch.clamp(self.default_joint_pos + noise, self._joint_low, self._joint_high)
        rows = env_ids.unsqueeze(-1)
        env.sim.qpos[rows, self._arm_qpos] = qpos[:, self._arm_qpos]
        env.sim.qvel[env_ids] = 0.0
        env.sim.ctrl[env_ids] = self.default_joint_pos
        self.targets[env_ids] = self.default_joint_pos

    def export_metadata(self) -> dict[str, Any]:
        """How the control loop turns actions into servo targets (the sidecar's per-actuator ``action_scale``, the
        gripper's half its control range; below 1, the filter every arm target passes through) and builds the
        observation: its terms in order, and the gripper point the task's positions are measured from."""
        shared = {
            "observation_terms": {
                "policy": [{"name": name, "size": size, "what": what} for name, size, what in self.policy_terms()]
            },
            "gripper_point": self._gripper_point,
        }
        if not self._filtered:
            return {"joint_targets": "default_joint_pos + action_scale * clip(action)", **shared}
        return {
            "joint_targets": (
                "targets += action_filter * (default_joint_pos + action_scale * clip(action) - targets) at every"
                " control step (the gripper's filter 1: it takes its target at once), targets starting where the"
                " servos are aimed when the loop starts (default_joint_pos at the home pose)"
            ),
            "action_filter": [float(a) for a in self._alpha.tolist()],
            **shared,
        }

    def policy_terms(self) -> list[tuple[str, int, str]]:
        """The policy observation's terms in :meth:`observations`' order: name, columns and what they hold (the
        sidecar's ``observation_terms``); these are the arm's, a task adds its own after them."""
        n = int(self.default_joint_pos.numel())
        terms = [
            ("joint_pos", n, "the angles of joint_names minus default_joint_pos (rad)"),
            ("joint_vel", n, "the velocities of joint_names (rad/s)"),
            ("actions", n, "the last step's actions, clipped to clip_actions"),
        ]
        if self._filtered:
            terms.append(("servo_targets", n, "the filtered servo targets minus default_joint_pos"))
        return terms

    def apply_actions(self, env: MjEnv, actions: torch.Tensor) -> None:
        # Position servos; MuJoCo clamps each target to its actuator's control range.
        if not self._filtered:
            torch.addcmul(self.default_joint_pos, actions, self.action_scale, out=env.sim.ctrl)
            return
        aimed = torch.addcmul(self.default_joint_pos, actions, self.action_scale)
        self.targets.lerp_(aimed, self._alpha)
        env.sim.ctrl[:] = self.targets

    def arm_observations(self, env: MjEnv) -> list[torch.Tensor]:
        """Joint positions relative to home, joint velocities, and the last action; with ``--env.action-filter``
        below 1, the servo targets relative to home too."""
        joints = [self.joint_pos(env) - self.default_joint_pos, self.joint_vel(env), env.actions]
        return [*joints, self.targets - self.default_joint_pos] if self._filtered else joints

    # --- shared reward terms -----------------------------------------------------------------------------------
    def reward_action_rate(self, env: MjEnv) -> torch.Tensor:
        """Sum of squared action changes."""
        return torch.sum(torch.square(env.actions - env.last_actions), dim=-1)

    def reward_joint_limits(self, env: MjEnv) -> torch.Tensor:
        """Joint excursions beyond the soft limits."""
        q = self.joint_pos(env)
        return torch.sum((self._soft_low - q).clamp(min=0) + (q - self._soft_high).clamp(min=0), dim=-1)

    def reward_joint_vel(self, env: MjEnv) -> torch.Tensor:
        """Sum of squared joint velocities."""
        return torch.sum(torch.square(self.joint_vel(env)), dim=-1)

    def reward_termination(self, env: MjEnv) -> torch.Tensor:
        """1 on the step an episode terminates (not on time-outs)."""
        return env.terminated.float()
