# pyright: reportAttributeAccessIssue=false
"""Whether a robot's MJCF has everything its record names, checked before anything is created.

A file that lacks one (e.g. mjlab's copy of Menagerie's Go1: no ``home`` keyframe, no actuators) would otherwise fail
deep inside the task with MuJoCo's ``KeyError``, after the run directory exists; here it is one
:class:`~mjfleet.errors.UsageError` line naming what is missing, why the record needs it, and what the file has.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

import mujoco

from mjfleet.errors import UsageError, mujoco_message
from mjfleet.tasks.locomotion.robots import RobotSpec

CONTROL_RATE_HZ = 50.0
"""The control rate the tasks' settings are tuned for (``locomotion_sim``: 5 ms physics steps, 4 per control step)."""

logger = logging.getLogger(__name__)
_said_rates: set[tuple[str, float]] = set()


def say_control_rate(robot: RobotSpec, file_dt: float, control_dt: float) -> None:
    """Warn (once per robot and rate) when a record without ``timestep`` leaves the file's physics step
    (``file_dt``), and that step makes a control rate (one over ``control_dt``) other than the one the tasks'
    settings are tuned for (MuJoCo's default step, 2 ms, makes 125 Hz: a discount, an action-rate penalty and a
    rollout that span other times than the defaults were measured with)."""
    rate = 1.0 / control_dt
    if robot.timestep > 0 or math.isclose(rate, CONTROL_RATE_HZ) or math.isclose(file_dt, 0.005):
        return
    if (robot.name, rate) in _said_rates:
        return
    _said_rates.add((robot.name, rate))
    steps = round(control_dt / file_dt)
    fitting = 1.0 / (CONTROL_RATE_HZ * file_dt)
    other = f" or --env.sim.decimation {round(fitting)}" if math.isclose(fitting, round(fitting)) else ""
    logger.warning(
        "robot %r: the record sets no timestep, so the file's physics step (%g ms) with %d physics steps per"
        " control step makes %g Hz control, not the %g Hz the task's settings are tuned for; set timestep=0.005"
        " in its record%s (docs/your_robot.md)",
        robot.name,
        file_dt * 1000,
        steps,
        rate,
        CONTROL_RATE_HZ,
        other,
    )


MAX_LISTED = 4
"""Problems named in the message; the rest are counted."""

CANNOT_COMPILE = "MuJoCo cannot compile it"
"""How a robot file that does not compile is said (MuJoCo's own message follows in parentheses)."""

_DRIVEN = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
"""Joint types an actuator can drive (MuJoCo's enums compared as ints: numpy arrays hold their values)."""


def check_robot_file(robot: RobotSpec, path: Path, label: str) -> None:
    """Raise a one-line :class:`UsageError` starting with ``label`` (e.g. ``--env.robot <value>``) when the MJCF at
    ``path`` cannot be loaded or lacks what ``robot`` needs."""
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except Exception as e:  # MuJoCo reports parse errors as ValueError or its own error types
        raise UsageError(f"{label}: MuJoCo cannot load {path} ({mujoco_message(e)})") from e
    check_robot_spec(robot, spec, label if str(path) in label else f"{label} ({path})")


def check_robot_spec(robot: RobotSpec, spec: mujoco.MjSpec, label: str) -> None:
    """:func:`check_robot_file` for a parsed file (``spec`` is compiled once, not changed)."""
    problems = robot_problems(robot, spec)
    if problems and problems[0].startswith(CANNOT_COMPILE):  # the file itself is broken, not short of names
        raise UsageError(f"{label}: {problems[0]}")
    if problems:
        more = f"; and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise UsageError(
            f"{label} lacks what robot record {robot.name!r} needs: {'; '.join(problems[:MAX_LISTED])}{more}"
        )


def robot_problems(robot: RobotSpec, spec: mujoco.MjSpec) -> list[str]:
    """What the file lacks for ``robot``, one phrase each (empty: the task can be built from it)."""
    try:
        m = spec.compile()
    except Exception as e:  # e.g. a mesh file that is not there
        said = mujoco_message(e)
        if "invalid ctrl size" in said:  # MuJoCo's words say nothing of where the count comes from
            said += f" (a keyframe's ctrl has one value per actuator; the file has {len(spec.actuators)} actuators)"
        elif "opening file" in said and spec.modelfiledir:  # nor of where a relative mesh path was looked for
            said += f" (looked for under {Path(spec.modelfiledir) / spec.meshdir})"
        return [f"{CANNOT_COMPILE} ({said})"]
    bodies = _names(m, mujoco.mjtObj.mjOBJ_BODY, m.nbody)
    joints = [
        name or f"#{j} (unnamed, in body {bodies[int(m.jnt_bodyid[j])]!r}: name it)"
        for j, name in enumerate(_names(m, mujoco.mjtObj.mjOBJ_JOINT, m.njnt))
    ]
    # The record's own mistakes first: the checks below match its patterns and read its zones' kinds.
    problems = _record_problems(robot)
    if problems:
        return problems

    # The base: the task reads its pose and velocity from the first qpos and qvel entries, the free joint's.
    if robot.base_body not in bodies:
        problems.append(_missing("body", robot.base_body, "the base", bodies))
    elif not (
        m.njnt and int(m.jnt_type[0]) == mujoco.mjtJoint.mjJNT_FREE and m.jnt_bodyid[0] == m.body(robot.base_body).id
    ):
        free = m.njnt and int(m.jnt_type[0]) == mujoco.mjtJoint.mjJNT_FREE
        where = f"; the file's first joint floats body {bodies[int(m.jnt_bodyid[0])]!r}" if free else ""
        problems.append(
            f"body {robot.base_body!r} has no free joint as the file's first joint (the floating base{where})"
        )

    # The ground: contact zones count contacts with the world body's geoms, so a file's own floor must be one of them.
    floor = next((g for g in range(m.ngeom) if m.geom(g).name == "floor"), None)
    if floor is not None and int(m.geom_bodyid[floor]) != 0:
        problems.append(
            f"its geom 'floor' is in body {bodies[int(m.geom_bodyid[floor])]!r}, not in the worldbody (the contact"
            " zones count the ground's contacts with the world body's geoms only)"
        )

    # The task lays its own ground (a plane, or a heightfield on rough terrain) in place of the geom named `floor`:
    # a ground of another name would stay beside it, a plane through the rough terrain's pits and steps.
    plane = int(mujoco.mjtGeom.mjGEOM_PLANE)
    grounds = [
        m.geom(g).name or f"#{g}"
        for g in range(m.ngeom)
        if int(m.geom_bodyid[g]) == 0 and int(m.geom_type[g]) == plane and m.geom(g).name != "floor"
    ]
    if grounds:
        problems.append(
            f"its ground plane {_listed(grounds)} is not named 'floor' (the task replaces the plane named floor with"
            " its own ground, a heightfield on rough terrain, and would keep this one beside it): name it floor"
        )

    for name in robot.watched():
        problem = _zone_problem(m, robot, name, bodies)
        if problem:
            problems.append(problem)

    # The actions: position targets of the record's servos, or of the file's own position actuators.
    driven = [j for j in range(m.njnt) if int(m.jnt_type[j]) in _DRIVEN]
    if robot.servos:
        unmatched = [joints[j] for j in driven if not any(re.fullmatch(s.joints, joints[j]) for s in robot.servos)]
        if unmatched:
            many = len(unmatched) > 1
            problems.append(
                f"joint{'s' if many else ''} {_listed(unmatched)} {'match' if many else 'matches'} no servo of the"
                " record (it drives every hinge and slide joint)"
            )
        # A servo's control range is its joint's range (MuJoCo's inheritrange): a joint without one cannot have it.
        unlimited = [joints[j] for j in driven if not m.jnt_limited[j]]
        if unlimited:
            many = len(unlimited) > 1
            problems.append(
                f"joint{'s' if many else ''} {_listed(unlimited)} {'have' if many else 'has'} no range, which a servo"
                " of the record takes as its control range (give each a range in the file)"
            )
        for s in robot.servos:
            if not (s.kp > 0 and s.effort > 0 and s.kd >= 0 and s.armature >= 0):
                problems.append(
                    f"servo {s.joints!r} has kp {s.kp}, kd {s.kd}, effort {s.effort}, armature {s.armature}"
                    " (kp and effort must be positive, kd and armature not negative)"
                )
        actuated = {joints[j] for j in driven}
    else:
        problems += _actuator_problems(m, joints)
        on_joints = m.actuator_trntype == int(mujoco.mjtTrn.mjTRN_JOINT)
        actuated = {joints[int(j)] for j in m.actuator_trnid[on_joints, 0]}

    for joint in robot.deviation_joints:
        if joint not in joints:
            problems.append(_missing("joint", joint, "the joint_deviation reward", [joints[j] for j in driven]))
        elif joint not in actuated and m.nu:  # no actuator at all is said once, above
            problems.append(f"joint {joint!r} has no actuator (the joint_deviation reward needs it driven)")

    # The initial pose: the record's own, or the file's `home` keyframe (with the servo targets as its ctrl).
    if robot.home:
        problems += _home_problems(m, robot, {joints[j]: j for j in driven})
    else:
        keys = [k.name for k in spec.keys]
        if "home" not in keys:
            has = f"keyframes {_listed(keys)}" if keys else "none"
            problems.append(
                f"no keyframe 'home' (the record takes the initial pose from it; the file has {has}): give the"
                " record a home=((joint pattern, angle), ...)"
            )
        elif not robot.servos and m.nu and len(spec.key("home").ctrl) == 0:
            problems.append("keyframe 'home' has no ctrl (the record takes the servo targets of the pose from it)")
        else:
            problems += _keyframe_problems(m, joints, driven, ctrl=not robot.servos)
    return problems


_SLACK = 1e-6
"""Radians a keyframe value may lie past a range bound: ranges written in degrees convert with rounding."""


def _outside(value: float, bounds: Sequence[float]) -> bool:
    """Whether ``value`` lies past the range ``(low, high)`` by more than :data:`_SLACK`."""
    low, high = bounds
    return not low - _SLACK <= value <= high + _SLACK


def _keyframe_problems(m: mujoco.MjModel, joints: list[str], driven: list[int], ctrl: bool) -> list[str]:
    """Angles of the file's ``home`` keyframe outside their joint's range, and (``ctrl``: the file's own actuators)
    servo targets outside their actuator's control range or their joint's: resets start from the pose, and the
    task's default joint positions (what actions are offsets from, and what an ONNX sidecar names) are the targets."""
    key, problems = m.key("home"), []
    for j in driven:
        low, high = m.jnt_range[j]
        angle = float(key.qpos[m.jnt_qposadr[j]])
        if m.jnt_limited[j] and _outside(angle, m.jnt_range[j]):
            problems.append(
                f"keyframe 'home' puts joint {joints[j]!r} at {angle:.9g}, outside its range [{low:.9g}, {high:.9g}]"
            )
    if not ctrl or len(key.ctrl) != m.nu:
        return problems
    for a in range(m.nu):
        target, name = float(key.ctrl[a]), m.actuator(a).name or f"#{a}"
        low, high = m.actuator_ctrlrange[a]
        if m.actuator_ctrllimited[a] and _outside(target, m.actuator_ctrlrange[a]):
            problems.append(
                f"keyframe 'home' aims actuator {name!r} at {target:.9g}, outside its control range"
                f" [{low:.9g}, {high:.9g}]"
            )
            continue
        j = int(m.actuator_trnid[a, 0])
        on_joint = (
            int(m.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT and j in driven and m.actuator_gear[a, 0] == 1
        )
        if on_joint and m.jnt_limited[j] and _outside(target, m.jnt_range[j]):
            low, high = m.jnt_range[j]
            problems.append(
                f"keyframe 'home' aims actuator {name!r} at {target:.9g}, outside the range [{low:.9g}, {high:.9g}]"
                f" of its joint {joints[j]!r}"
            )
    return problems


def _record_problems(robot: RobotSpec) -> list[str]:
    """Patterns that are no regular expression, and zone geom kinds MuJoCo has not."""
    problems = []
    patterns = [(f"servo {s.joints!r}", s.joints) for s in robot.servos]
    patterns += [(f"home pattern {pattern!r}", pattern) for pattern, _ in robot.home]
    for what, pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            problems.append(f"{what} is not a regular expression ({e})")
    for zone in robot.zones:
        if not zone.body and not zone.geom:
            problems.append(f"zone {zone.name!r} names neither a body nor a geom (Zone(name, body=...) or geom=...)")
        unknown = [k for k in zone.kinds if not hasattr(mujoco.mjtGeom, f"mjGEOM_{k.upper()}")]
        if unknown:
            problems.append(
                f"zone {zone.name!r} names geom kind{'s' if len(unknown) > 1 else ''} {_listed(unknown)}, which MuJoCo"
                f" has not (sphere, capsule, box, cylinder, ellipsoid, mesh, ...)"
            )
    return problems


def _home_problems(m: mujoco.MjModel, robot: RobotSpec, driven: dict[str, int]) -> list[str]:
    """Home patterns that match no driven joint (``driven``: name -> id; a misspelling would leave its joints at 0),
    and angles outside the range of a joint they set (they would be clipped)."""
    problems = []
    for pattern, angle in robot.home:
        matched = [j for j in driven if re.fullmatch(pattern, j)]
        if not matched:
            problems.append(
                f"home pattern {pattern!r} matches no hinge or slide joint (closest: {_closest(pattern, list(driven))})"
            )
            continue
        for joint in matched:
            j = driven[joint]
            low, high = m.jnt_range[j]
            if robot.home_entry(joint) == (pattern, angle) and m.jnt_limited[j] and not low <= angle <= high:
                problems.append(f"home angle {angle} of joint {joint!r} is outside its range [{low:g}, {high:g}]")
    return problems


def _closest(name: str, have: list[str]) -> str:
    close = difflib.get_close_matches(name, [h for h in have if h], n=2, cutoff=0.4)
    return _listed(close) if close else f"the file has {_listed(have)}"


def _zone_problem(m: mujoco.MjModel, robot: RobotSpec, name: str, bodies: list[str]) -> str:
    """What zone ``name`` lacks: its geom, or its body and a collision geom there (as ``contacts.zone_geoms`` finds)."""
    zone = robot.zone(name)
    role = f"the contact sensor of zone {name!r}"
    if zone.geom:
        geoms = _names(m, mujoco.mjtObj.mjOBJ_GEOM, m.ngeom)
        if zone.geom not in geoms:
            return _missing("geom", zone.geom, role, geoms)
        g = m.geom(zone.geom).id
        if not (m.geom_contype[g] or m.geom_conaffinity[g]):
            return f"geom {zone.geom!r} collides with nothing (contype and conaffinity 0; {role} would read 0)"
        return ""
    if zone.body not in bodies:
        return _missing("body", zone.body, role, bodies)
    kinds = {int(getattr(mujoco.mjtGeom, f"mjGEOM_{k.upper()}")) for k in zone.kinds}
    body = m.body(zone.body).id
    for g in range(m.ngeom):
        kind = int(m.geom_type[g])
        if robot.primitive_collisions and kind == mujoco.mjtGeom.mjGEOM_MESH:
            kind = int(mujoco.mjtGeom.mjGEOM_CAPSULE)  # what model.fit_primitive_collisions makes of it
        colliding = m.geom_contype[g] or m.geom_conaffinity[g]
        if m.geom_bodyid[g] == body and colliding and (not kinds or kind in kinds):
            return ""
    of_kind = f" of type {'/'.join(zone.kinds)}" if zone.kinds else ""
    return f"body {zone.body!r} has no collision geom{of_kind} ({role} watches them)"


def _actuator_problems(m: mujoco.MjModel, joints: list[str]) -> list[str]:
    """The file's actuators must be position servos on hinge or slide joints (the record keeps them)."""
    why = "the record drives the file's own position actuators"
    if m.nu == 0:
        return [f"no actuators ({why}; the file has none)"]
    names = _names(m, mujoco.mjtObj.mjOBJ_ACTUATOR, m.nu)
    off_joint, not_servo = [], []
    for a in range(m.nu):
        label = names[a] or f"#{a}"
        on_joint = int(m.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT
        if not on_joint or int(m.jnt_type[m.actuator_trnid[a, 0]]) not in _DRIVEN:
            off_joint.append(label)
        # A position servo: force = kp * (ctrl - q) - kv * qdot, i.e. a fixed gain and the bias -kp * q.
        kp = float(m.actuator_gainprm[a, 0])
        if not (
            int(m.actuator_gaintype[a]) == mujoco.mjtGain.mjGAIN_FIXED
            and int(m.actuator_biastype[a]) == mujoco.mjtBias.mjBIAS_AFFINE
            and kp > 0
            and m.actuator_biasprm[a, 1] == -kp
        ):
            not_servo.append(label)
    problems = []
    if off_joint:
        problems.append(f"actuators {_listed(off_joint)} drive no hinge or slide joint ({why})")
    if not_servo:
        problems.append(
            f"actuators {_listed(not_servo)} are not position servos ({why}; e.g. motors): give the record"
            " servos=(Servo(joint pattern, kp, kd, effort), ...) to replace them"
        )
    return problems


def _missing(kind: str, name: str, role: str, have: list[str]) -> str:
    """``no <kind> '<name>' (<role>; <what the file has instead>)``."""
    have = [h for h in have if h]
    by_lower = {h.lower(): h for h in reversed(have)}  # the first of names equal but for case
    close = [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=2)]
    if close:
        instead = f"closest: {_listed(close)}"
    elif have:
        instead = f"the file has {len(have)}: {_listed(have)}"
    else:
        instead = "the file has none"
    return f"no {kind} {name!r} ({role}; {instead})"


def _listed(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _names(m: mujoco.MjModel, kind: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(m, kind, i) or "" for i in range(count)]
