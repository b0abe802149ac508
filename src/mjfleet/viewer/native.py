# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""``play --viewer native``: MuJoCo's own viewer window on the running policy (needs a display).

Keys: space pauses, the right arrow steps once while paused, ``[`` and ``]`` show the previous and next environment.
A task with a reference (motion tracking) has it drawn as a translucent ghost over the robot.
"""

from __future__ import annotations

import logging
import threading
import time

import mujoco

from mjfleet.envs.env import MjEnv
from mjfleet.render.video import add_ghost
from mjfleet.rl.evaluation.episodes import Policy
from mjfleet.viewer.display import check_display
from mjfleet.viewer.session import ViewerSession

logger = logging.getLogger(__name__)

KEY_SPACE, KEY_RIGHT, KEY_LEFT_BRACKET, KEY_RIGHT_BRACKET = 32, 262, 91, 93
"""GLFW key codes of the viewer's keys."""


def draw_ghost(session: ViewerSession, scratch: mujoco.MjData, scene: mujoco.MjvScene) -> None:
    """The shown environment's reference pose (the task's ``ghost_qpos``), translucent, as the scene's only user
    geoms; none for a task without one."""
    scene.ngeom = 0
    pose = session.env.task.ghost_qpos(session.env, session.env_index)
    if pose is not None:
        add_ghost(session.model, scratch, pose, scene)


def run_native_viewer(env: MjEnv, policy: Policy, stop: threading.Event | None = None) -> int:
    """Show the policy in MuJoCo's viewer until its window closes, ``stop`` is set or Ctrl-C; returns the steps
    taken."""
    check_display()
    import mujoco.viewer

    session = ViewerSession(env, policy)
    shift = [0]  # environments to move by; applied under the viewer's lock (keys arrive on its UI thread)

    def on_key(key: int) -> None:
        if key == KEY_SPACE:
            session.paused = not session.paused
        elif key == KEY_RIGHT:
            session.request_step()
        elif key in (KEY_LEFT_BRACKET, KEY_RIGHT_BRACKET):
            shift[0] += 1 if key == KEY_RIGHT_BRACKET else -1

    model = session.model
    ghost = mujoco.MjData(model)
    dt = env.step_dt
    threads_before = set(threading.enumerate())
    try:
        with mujoco.viewer.launch_passive(model, session.data, key_callback=on_key) as window:
            logger.info("viewer open: space pauses, right arrow steps, [ ] switch environments")
            while window.is_running() and not (stop is not None and stop.is_set()):
                started = time.perf_counter()
                with window.lock():
                    if shift[0]:
                        session.show_env((session.env_index + shift[0]) % env.num_envs)
                        shift[0] = 0
                    session.tick()
                    mujoco.mj_forward(model, session.data)  # contacts and sensors for the viewer's overlays
                    draw_ghost(session, ghost, window.user_scn)
                window.sync()
                time.sleep(max(dt - (time.perf_counter() - started), 0.0))
    except KeyboardInterrupt:
        logger.info("viewer stopped")
    # The window's render thread winds down after close; at exit, GLFW's atexit terminate would wait for it forever.
    for thread in set(threading.enumerate()) - threads_before:
        if thread.daemon:
            thread.join(timeout=30)
    return session.steps
