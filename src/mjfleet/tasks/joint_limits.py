# pyright: reportAttributeAccessIssue=false
"""Joint ranges as the tasks read them: MuJoCo stores an unlimited joint's range as ``[0, 0]``, which a task must not
clamp a home pose to or penalise every angle against."""

from __future__ import annotations

import mujoco
import numpy as np


def joint_ranges(m: mujoco.MjModel, joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper limits of ``joints`` (joint ids), ``-inf``/``inf`` where a joint is unlimited."""
    limited = m.jnt_limited[joints].astype(bool)
    return np.where(limited, m.jnt_range[joints, 0], -np.inf), np.where(limited, m.jnt_range[joints, 1], np.inf)


def soft_ranges(low: np.ndarray, high: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The middle ``fraction`` of each range (a joint-limit penalty's soft limits); unlimited joints stay unlimited."""
    finite = np.isfinite(low) & np.isfinite(high)
    with np.errstate(invalid="ignore"):  # inf - inf of the unlimited ones, replaced below
        mid, half = (low + high) / 2, (high - low) / 2
        return np.where(finite, mid - half * fraction, -np.inf), np.where(finite, mid + half * fraction, np.inf)
