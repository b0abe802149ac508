# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""How actions become joint targets: radians per unit of action, per actuator."""

from __future__ import annotations

import mujoco
import numpy as np

from mjfleet.errors import UsageError


def action_scales(m: mujoco.MjModel, scale: float, of_force: float) -> list[float]:
    """Per actuator: ``scale``, or with ``of_force`` > 0 that fraction of the actuator's force limit over its
    position gain (the joint's ``actuatorfrcrange`` where it has one, else the actuator's ``forcerange``)."""
    if of_force <= 0:
        return [scale] * m.nu
    scales = []
    for i in range(m.nu):
        joint = int(m.actuator_trnid[i, 0])
        if m.jnt_actfrclimited[joint]:
            limit = float(np.max(np.abs(m.jnt_actfrcrange[joint])))
        elif m.actuator_forcelimited[i]:
            limit = float(np.max(np.abs(m.actuator_forcerange[i])))
        else:
            raise UsageError(
                f"--env.action-scale-of-force: actuator {m.actuator(i).name!r} has no force limit "
                "(forcerange or the joint's actuatorfrcrange); use --env.action-scale"
            )
        gain = float(m.actuator_gainprm[i, 0])
        if gain <= 0:
            raise UsageError(f"--env.action-scale-of-force: actuator {m.actuator(i).name!r} has no position gain")
        scales.append(of_force * limit / gain)
    return scales
