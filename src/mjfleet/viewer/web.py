# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""``play --viewer web``: an interactive 3D view of the running policy in the browser (viser), headless-friendly.

The server binds ``host:port`` (by default ``127.0.0.1``: this machine only, since the page has no authentication
and drives the policy) and logs the URL with how to reach it; the page shows one environment at a time and has
controls to pause, step, pick the environment, steer velocity commands, and read the reward terms live.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import mujoco
import numpy as np
import viser

from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.render.video import GHOST_RGBA
from mjfleet.rl.evaluation.episodes import Policy
from mjfleet.viewer.geometry import GeomMesh, geom_meshes
from mjfleet.viewer.session import ViewerSession

logger = logging.getLogger(__name__)

GUI_REFRESH_S = 0.2
"""How often the text readouts (reward terms, step counters) are re-sent to the browser."""

COMMAND_STEPS = 40
"""Slider resolution: steps across each command's range."""


def _rgb(rgba: tuple[float, float, float, float]) -> tuple[int, int, int]:
    return int(rgba[0] * 255), int(rgba[1] * 255), int(rgba[2] * 255)


def _shapes(model: mujoco.MjModel) -> np.ndarray:
    """Per geom, what its mesh is made of that randomization changes per environment: size, placement, colour."""
    return np.concatenate([model.geom_size, model.geom_pos, model.geom_quat, model.geom_rgba], axis=1)


class WebScene:
    """The model's geoms in a viser scene: static geoms once, one frame per moving body updated each draw."""

    def __init__(self, server: viser.ViserServer, session: ViewerSession) -> None:
        self.server = server
        self.session = session
        self.root = server.scene.add_frame("/world", show_axes=False)
        model = session.model
        meshes = geom_meshes(model)  # built once: a robot's meshes take a while
        self.bodies = sorted({m.body for m in meshes if m.body != 0})
        self._frames = {b: server.scene.add_frame(f"/world/body{b}", show_axes=False) for b in self.bodies}
        self._meshes: dict[int, Any] = {}
        """Per drawn geom, its mesh's scene handle."""
        self._shapes = _shapes(model)
        self._add_meshes(meshes)
        self._ghost_data: mujoco.MjData | None = None
        self._ghost_frames: dict[int, Any] = {}
        """A task with a reference (``ghost_qpos``): its pose drawn translucent, the moving bodies once more."""
        if session.env.task.ghost_qpos(session.env, session.env_index) is not None:
            self._add_ghost(meshes)
        self.follow = bool(model.njnt) and int(model.jnt_type[0]) == mujoco.mjtJoint.mjJNT_FREE
        """Keep the shown environment's root body above the scene origin (the camera follows it); on for floating
        bases."""
        self.draw()
        self._place_camera()

    def _replace_meshes(self, geoms: list[int]) -> None:
        """The meshes of ``geoms`` as the shown environment's model has them, in place of those drawn so far."""
        for geom in geoms:
            if (handle := self._meshes.pop(geom, None)) is not None:
                handle.remove()
        self._add_meshes(geom_meshes(self.session.model, geoms))

    def _add_meshes(self, meshes: Iterable[GeomMesh]) -> None:
        for mesh in meshes:
            parent = "/world" if mesh.body == 0 else f"/world/body{mesh.body}"
            self._meshes[mesh.geom] = self.server.scene.add_mesh_simple(
                f"{parent}/geom{mesh.geom}",  # ids: unique even where names are missing
                mesh.vertices,
                mesh.faces,
                color=_rgb(mesh.rgba),
                opacity=None if mesh.rgba[3] >= 1.0 else mesh.rgba[3],
                side="double",
            )

    def _add_ghost(self, meshes: Iterable[GeomMesh]) -> None:
        self._ghost_data = mujoco.MjData(self.session.model)
        for body in self.bodies:
            self._ghost_frames[body] = self.server.scene.add_frame(f"/world/ghost{body}", show_axes=False)
        for mesh in meshes:
            if mesh.body != 0:
                self.server.scene.add_mesh_simple(
                    f"/world/ghost{mesh.body}/geom{mesh.geom}",
                    mesh.vertices,
                    mesh.faces,
                    color=_rgb((float(GHOST_RGBA[0]), float(GHOST_RGBA[1]), float(GHOST_RGBA[2]), 1.0)),
                    opacity=float(GHOST_RGBA[3]),
                    side="double",
                )

    def _ghost_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The shown environment's reference pose as body positions and orientations, or None."""
        session, data = self.session, self._ghost_data
        pose = session.env.task.ghost_qpos(session.env, session.env_index) if data is not None else None
        if pose is None or data is None:
            return None
        data.qpos[:] = pose
        mujoco.mj_kinematics(session.model, data)
        return data.xpos.copy(), data.xquat.copy()

    def _place_camera(self) -> None:
        pos, _ = self.session.body_poses()
        moving = pos[self.bodies] if self.bodies else np.zeros((1, 3))
        if self.follow:
            moving = moving - np.array([moving[0, 0], moving[0, 1], 0.0])
        center = moving.mean(axis=0)
        reach = max(1.0, float(np.linalg.norm(moving - center, axis=-1).max()) * 3.0)
        self.server.initial_camera.look_at = tuple(center)
        self.server.initial_camera.position = tuple(center + np.array([0.6, -1.6, 0.6]) * reach)
        self.server.initial_camera.up = (0.0, 0.0, 1.0)

    @property
    def node_names(self) -> list[str]:
        """Scene node names of the moving bodies."""
        return [f"/world/body{b}" for b in self.bodies]

    def draw(self) -> None:
        """Move the body frames to the shown environment's poses; the meshes again where its geoms differ from those
        drawn (another environment shown, a reset that drew a randomized size)."""
        shapes = _shapes(self.session.model)
        changed = np.flatnonzero((shapes != self._shapes).any(axis=1))
        if changed.size:  # only those geoms: a robot's meshes are megabytes to every browser
            self._shapes = shapes
            self._replace_meshes([int(g) for g in changed])
        pos, quat = self.session.body_poses()
        anchor = pos[self.bodies[0]] if self.follow and self.bodies else np.zeros(3)
        ghost = self._ghost_poses()
        with self.server.atomic():
            self.root.position = (-float(anchor[0]), -float(anchor[1]), 0.0)
            for body, frame in self._frames.items():
                frame.position = pos[body]
                frame.wxyz = quat[body]
            if ghost is not None:
                for body, frame in self._ghost_frames.items():
                    frame.position, frame.wxyz = ghost[0][body], ghost[1][body]


class WebControls:
    """The GUI panel: playback, environment index, command sliders, live reward terms."""

    def __init__(self, server: viser.ViserServer, session: ViewerSession, scene: WebScene) -> None:
        self.session = session
        gui = server.gui
        with gui.add_folder("Playback"):
            self.pause = gui.add_checkbox("Pause", initial_value=session.paused)
            self.step = gui.add_button("Step", hint="Advance one control step (while paused)")
            self.env_index = gui.add_slider("Environment", 0, max(session.env.num_envs - 1, 0), 1, 0)
            self.follow = gui.add_checkbox("Follow", initial_value=scene.follow, hint="Keep the robot in the middle")
            self.status = gui.add_markdown("")
        self.pause.on_update(lambda _: setattr(session, "paused", self.pause.value))
        self.step.on_click(lambda _: session.request_step())
        self.env_index.on_update(lambda _: session.show_env(int(self.env_index.value)))
        self.follow.on_update(lambda _: self._set_follow(scene))

        self.commands: dict[str, Any] = {}
        if session.command_ranges:
            with gui.add_folder("Commands"):
                self.hold = gui.add_checkbox("Hold commands", initial_value=True, hint="Off: the task's own draws")
                for name, (low, high) in session.command_ranges.items():
                    step = max((high - low) / COMMAND_STEPS, 1e-3)
                    self.commands[name] = gui.add_slider(name, low, high, step, min(max(0.0, low), high))
            for handle in (self.hold, *self.commands.values()):
                handle.on_update(lambda _: self._apply_commands())
            self._apply_commands()
        with gui.add_folder("Reward terms"):
            self.rewards = gui.add_markdown("")
        self.refresh()

    def _set_follow(self, scene: WebScene) -> None:
        scene.follow = self.follow.value
        self.session.request_redraw()

    def _apply_commands(self) -> None:
        values = {name: float(slider.value) for name, slider in self.commands.items()}
        self.session.hold_commands(values if self.hold.value else None)

    def refresh(self) -> None:
        """Re-send the readouts."""
        s = self.session
        state = "paused" if s.paused else "running"
        _set_content(self.status, f"{state} · step {s.steps} · episode step {s.episode_steps}")
        readout = s.rewards
        rows = [f"| {k} | {readout.rate.get(k, 0.0):+.3f} | {v:+.3f} |" for k, v in readout.episode.items()]
        table = "\n".join(
            [
                "| term | per s | episode |",
                "|---|---:|---:|",
                *rows,
                f"| **total** | | **{readout.total:+.3f}** |",
            ]
        )
        _set_content(self.rewards, table)


def _set_content(handle: Any, content: str) -> None:
    """Send markdown only when it changed (every update re-renders the panel in each browser)."""
    if handle.content != content:
        handle.content = content


DEFAULT_HOST = "127.0.0.1"
"""Where the viewer listens unless told otherwise: this machine only (anyone who reaches the port can watch and
drive the policy; Jupyter and TensorBoard default to the same)."""


def binds_all_interfaces(host: str) -> bool:
    """Whether ``host`` is a wildcard address: the server is reachable from every machine that can reach this one."""
    return host in ("", "0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # an IPv6 literal in a URL


def display_url(host: str, port: int) -> str:
    """The URL to open: the machine's name when bound to every interface (reachable from other hosts)."""
    shown = socket.gethostname() if binds_all_interfaces(host) else host
    return f"http://{_url_host(shown)}:{port}"


def where_to_look(host: str, port: int) -> tuple[int, str]:
    """The log level and line that announce the viewer: its URL and how to reach it from another machine (an SSH
    port forward when it listens on this machine only); a warning when it listens on every interface."""
    url = display_url(host, port)
    if binds_all_interfaces(host):
        return logging.WARNING, (
            f"viewer at {url} listens on every interface ({host or 'all'}) without authentication: anyone who can"
            " reach this machine can watch and drive the policy; listen on 127.0.0.1 (the default) and use an SSH port"
            " forward instead (Ctrl-C to stop)"
        )
    if is_loopback(host):
        target = "localhost" if host in ("localhost", "127.0.0.1") else _url_host(host)
        return logging.INFO, (
            f"viewer at {url} (this machine only; from another one: ssh -L {port}:{target}:{port}"
            f" {socket.gethostname()}, then open http://localhost:{port}; Ctrl-C to stop)"
        )
    return logging.INFO, f"viewer at {url} (Ctrl-C to stop)"


def start_server(host: str, port: int) -> viser.ViserServer:
    """A viser server listening on ``host:port`` (the next free port when ``port`` is taken; 0: any free one)."""
    free = port if port == 0 else _free_port(host, port)
    with contextlib.redirect_stdout(io.StringIO()):  # viser's banner; the URL is logged instead
        return viser.ViserServer(host=host, port=free, verbose=False)


def _free_port(host: str, port: int) -> int:
    """``port``, or the first free one above it on ``host``; :class:`UsageError` where none is (viser's own search ran
    past 65535, died in its server thread with a traceback, and left ``play`` waiting forever)."""
    family = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]
    for candidate in range(port, 65536):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds: TIME_WAIT is free
            try:
                probe.bind((host, candidate))
            except OSError:
                continue
            return candidate
    raise UsageError(f"--viewer-port {port}: it and every port above it are taken on {host} (0: any free port)")


def stop_server(server: viser.ViserServer) -> None:
    """Stop ``server`` (quietly: viser prints a line)."""
    with contextlib.redirect_stdout(io.StringIO()):
        server.stop()


class WebViewer:
    """A viser server showing ``session``; :meth:`run` steps and draws until stopped."""

    def __init__(
        self,
        env: MjEnv,
        policy: Policy,
        host: str = DEFAULT_HOST,
        port: int = 8080,
        paused: bool = False,
        plain_lighting: bool = False,
    ) -> None:
        """``paused``: start paused. ``plain_lighting``: no shadows and no environment map, which keeps software
        WebGL (a browser without a GPU) responsive."""
        self.session = ViewerSession(env, policy)
        self.session.paused = paused
        self.server = start_server(host, port)
        if plain_lighting:
            self.server.scene.configure_default_lights(enabled=True, cast_shadow=False)
            self.server.scene.configure_environment_map(None)
        self.scene = WebScene(self.server, self.session)
        self.controls = WebControls(self.server, self.session, self.scene)
        self.host = host
        """The address the server listens on."""
        self.port = self.server.get_port()
        """The port it listens on (another than the one asked for when that was taken)."""
        self.url = display_url(host, self.port)
        """Where the page is served."""

    def run(self, stop: threading.Event | None = None, realtime: bool = True) -> int:
        """Step and draw until ``stop`` is set or Ctrl-C; at most one control step per ``step_dt`` with ``realtime``.
        Returns the steps taken."""
        dt = self.session.env.step_dt
        last_refresh = 0.0
        try:
            while stop is None or not stop.is_set():
                started = time.perf_counter()
                if self.session.tick():
                    self.scene.draw()
                if started - last_refresh >= GUI_REFRESH_S:
                    self.controls.refresh()
                    last_refresh = started
                idle = dt if self.session.paused else dt - (time.perf_counter() - started)
                if realtime or self.session.paused:
                    time.sleep(max(idle, 0.0))
        except KeyboardInterrupt:
            logger.info("viewer stopped")
        return self.session.steps

    def close(self) -> None:
        """Stop the server."""
        stop_server(self.server)


def run_web_viewer(env: MjEnv, policy: Policy, host: str, port: int) -> int:
    """Serve the viewer, log where to look (:func:`where_to_look`), run until Ctrl-C or SIGTERM; returns the steps
    taken."""
    viewer = WebViewer(env, policy, host, port)
    level, line = where_to_look(viewer.host, viewer.port)
    logger.log(level, "%s", line)
    try:
        with _terminate_as_interrupt():
            return viewer.run()
    finally:
        viewer.close()


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """A SIGTERM (a supervisor, ``timeout``, a scheduler) stops the viewer as Ctrl-C does, its summary printed (it
    killed the process without one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
