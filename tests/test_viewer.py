"""The viewers: geometry of the scene, the shared session (pause, step, environments, held commands, reward terms),
``play --viewer`` parsing, where the web viewer listens, and the web viewer in a real headless Chromium."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import imageio.v3 as iio
import mujoco
import numpy as np
import psutil
import pytest
import torch

from mjfleet.cli import play
from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.rl.evaluation.episodes import Policy, zero_policy
from mjfleet.tasks.cartpole.cartpole import CartpoleTask
from mjfleet.viewer.display import check_display
from mjfleet.viewer.geometry import GeomMesh, geom_meshes
from mjfleet.viewer.session import ViewerSession

from .conftest import make_env
from .helpers import run_main

XVFB = shutil.which("Xvfb")
"""A virtual X display for the native viewer where there is no real one (optional: CI has none)."""

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
"""The distribution's Chromium (CI installs it in ``.ci/run``); Playwright's own browser downloads are not used."""


def test_geoms_become_meshes_with_valid_faces_in_their_body_frames() -> None:
    model = CartpoleTask.__new__(CartpoleTask).build_model()
    meshes = geom_meshes(model)
    assert {m.body for m in meshes} >= {0, 1, 2}  # static rail and floor, cart, pole
    for mesh in meshes:
        assert mesh.vertices.ndim == 2 and mesh.vertices.shape[1] == 3 and len(mesh.faces) > 0
        assert mesh.faces.max() < len(mesh.vertices)
    # The pole capsule spans its full length (two half-lengths plus the two caps) along its axis.
    pole = next(m for m in meshes if m.body == 2 and int(model.geom_type[m.geom]) == 3)
    geom = model.geom(pole.geom)
    radius, half = float(geom.size[0]), float(geom.size[1])
    extent = np.ptp(pole.vertices, axis=0).max()
    assert extent == pytest.approx(2 * (half + radius), rel=1e-3)


def test_a_geoms_own_colour_wins_over_its_materials_as_in_mujoco() -> None:
    model = mujoco.MjModel.from_xml_string(
        """<mujoco><asset><material name="green" rgba="0 1 0 1"/></asset><worldbody>
        <geom name="own" type="box" size=".1 .1 .1" material="green" rgba="1 0 0 1"/>
        <geom name="material" type="box" size=".1 .1 .1" material="green"/>
        <geom name="hidden" type="box" size=".1 .1 .1" material="green" rgba="1 1 1 0"/>
        </worldbody></mujoco>"""
    )
    colours = {m.name: m.rgba for m in geom_meshes(model)}
    assert colours == {"own": (1.0, 0.0, 0.0, 1.0), "material": (0.0, 1.0, 0.0, 1.0)}  # the hidden one is not drawn


def test_native_viewer_needs_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    from mjfleet.viewer import display

    with pytest.raises(UsageError, match="needs a display"):
        check_display({}, "linux")
    monkeypatch.setattr(display, "x11_opens", lambda name: name == ":0")  # an X server answers at :0 only
    check_display({"DISPLAY": ":0"}, "linux")
    check_display({}, "darwin")
    # Set but dead (an SSH session without X forwarding): MuJoCo's GLFW failed in C, exit code 1.
    with pytest.raises(UsageError, match=r"cannot open the display DISPLAY=:99 \(no X server answers there"):
        check_display({"DISPLAY": ":99"}, "linux")
    # Outside a Wayland session GLFW opens X11 whatever WAYLAND_DISPLAY says (a stale one hid a dead DISPLAY).
    with pytest.raises(UsageError, match="DISPLAY=:99"):
        check_display({"DISPLAY": ":99", "WAYLAND_DISPLAY": "wayland-9"}, "linux")
    with pytest.raises(UsageError, match="needs a display"):
        check_display({"WAYLAND_DISPLAY": "wayland-9"}, "linux")


def test_a_wayland_session_needs_its_compositors_socket(tmp_path: Path) -> None:
    session = {"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland", "XDG_RUNTIME_DIR": str(tmp_path)}
    with pytest.raises(UsageError, match=f"WAYLAND_DISPLAY=wayland-0 \\(no compositor socket at {tmp_path}/wayland-0"):
        check_display(session, "linux")
    with socket.socket(socket.AF_UNIX) as compositor:
        compositor.bind(str(tmp_path / "wayland-0"))
        check_display(session, "linux")


def test_a_display_that_does_not_answer_in_time_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DISPLAY on a host that drops packets held play for the connection's own timeout (minutes)."""
    import types

    from mjfleet.viewer import display

    def never_answers(name: bytes) -> int:
        time.sleep(30)
        return 1

    lib = types.SimpleNamespace(XOpenDisplay=never_answers, XCloseDisplay=lambda handle: None)
    monkeypatch.setattr(display.ctypes, "CDLL", lambda name: lib)
    started = time.monotonic()
    assert display.x11_opens("remote:0", timeout_s=0.2) is False
    assert time.monotonic() - started < 5


def test_x11_says_when_no_server_answers() -> None:
    from mjfleet.viewer.display import x11_opens

    if x11_opens(":0") is None:
        pytest.skip("libX11 is not installed")
    assert x11_opens(":97") is False  # no X server on display 97 here


def test_the_web_viewer_refuses_an_address_it_cannot_listen_on() -> None:
    """viser tried a thousand ports on it and then waited forever, silently."""
    from mjfleet.viewer.display import check_listen_host

    with pytest.raises(UsageError, match=r"--viewer-host 192\.0\.2\.1: not an address of this machine"):
        check_listen_host("192.0.2.1")  # TEST-NET-1: nobody's
    with pytest.raises(UsageError, match=r"--viewer-host 'no-such-host\.invalid' does not resolve"):
        check_listen_host("no-such-host.invalid")
    check_listen_host("127.0.0.1")
    code, _, err = run_main(
        play.main, ["cartpole-balance", "--agent", "zero", "--viewer", "web", "--viewer-host", "192.0.2.1"]
    )
    assert code == 2 and "Traceback" not in err


def test_a_port_taken_at_the_top_of_the_range_is_one_line() -> None:
    """viser's search for the next free port ran past 65535: a traceback in its thread, and play waited forever."""
    from mjfleet.viewer.web import start_server

    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", 65535))
        except OSError:
            pytest.skip("port 65535 is in use here")
        taken.listen()
        with pytest.raises(UsageError, match=r"--viewer-port 65535: it and every port above it are taken"):
            start_server("127.0.0.1", 65535)


def test_a_sigterm_stops_the_web_viewer_as_ctrl_c_does(caplog: pytest.LogCaptureFixture) -> None:
    """A supervisor's SIGTERM killed play without the summary that Ctrl-C prints."""
    import signal

    from mjfleet.viewer.web import run_web_viewer

    env = make_env(num_envs=1)
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with caplog.at_level(logging.INFO, logger="mjfleet"):
            steps = run_web_viewer(env, zero_policy(env), "127.0.0.1", 0)
    finally:
        timer.cancel()
    assert steps > 0 and "viewer stopped" in caplog.text
    assert signal.getsignal(signal.SIGTERM) is not None  # handed back


def test_play_native_without_display_is_a_one_line_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    code, out, err = run_main(play.main, ["cartpole-balance", "--agent", "zero", "--viewer", "native"])
    assert code == 2 and out == "" and "Traceback" not in err
    assert [line for line in err.splitlines() if line.strip()] == [
        "error: --viewer native needs a display (DISPLAY is not set); use --viewer web on a remote machine"
    ]
    code, _, err = run_main(play.main, ["cartpole-balance", "--agent", "zero", "--viewer-port", "70000"])
    assert code == 2 and "--viewer-port must be between 0 and 65535" in err
    code, _, err = run_main(play.main, ["cartpole-balance", "--agent", "zero", "--viewer", "web", "--video"])
    assert code == 2 and "--video records the episodes play judges; --viewer web has none: leave one out" in err


def test_play_with_a_viewer_hands_env_and_policy_to_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mjfleet.viewer.run

    calls = []

    def fake_viewer(kind: str, env: MjEnv, policy: Policy, host: str, port: int) -> int:
        calls.append((kind, env.num_envs, policy(env.get_observations()).shape, host, port))
        return 7

    monkeypatch.setattr(mjfleet.viewer.run, "run_viewer", fake_viewer)
    argv = ["cartpole-balance", "--agent", "zero", "--gpu-ids", "None", "--env.num-envs", "3", "--viewer", "web"]
    play.main([*argv, "--viewer-host", "127.0.0.1", "--viewer-port", "0"])
    assert calls == [("web", 3, (3, 1), "127.0.0.1", 0)]
    summary = json.loads(capsys.readouterr().out)
    assert summary == {"task": "cartpole-balance", "agent": "zero", "viewer": "web", "steps": 7}


def _listening_addresses(port: int) -> set[str]:
    """Addresses this process listens on at ``port``."""
    connections = psutil.Process().net_connections(kind="inet")
    return {c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


@pytest.mark.parametrize(
    ("extra", "address", "level"),
    [([], "127.0.0.1", logging.INFO), (["--viewer-host", "0.0.0.0"], "0.0.0.0", logging.WARNING)],
    ids=["default", "all-interfaces-asked"],
)
def test_play_web_viewer_listens_on_this_machine_only_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    extra: list[str],
    address: str,
    level: int,
) -> None:
    # The real server, started by play's own path; only the stepping loop is replaced, by a look at the socket.
    from mjfleet.viewer import web

    assert play.PlayConfig.viewer_host == web.DEFAULT_HOST == "127.0.0.1"
    seen: list[set[str]] = []

    def look(viewer: web.WebViewer, stop: threading.Event | None = None, realtime: bool = True) -> int:
        seen.append(_listening_addresses(viewer.port))
        return 0

    monkeypatch.setattr(web.WebViewer, "run", look)
    web_logger = logging.getLogger(web.__name__)
    web_logger.addHandler(caplog.handler)  # play configures the root logger's handlers itself
    try:
        argv = ["cartpole-balance", "--agent", "zero", "--gpu-ids", "None", "--env.num-envs", "1", "--viewer", "web"]
        code, _, err = run_main(play.main, [*argv, "--viewer-port", "0", *extra])
    finally:
        web_logger.removeHandler(caplog.handler)
    assert code == 0, err
    assert seen == [{address}]
    (record,) = [r for r in caplog.records if r.name == web.__name__]
    assert record.levelno == level
    assert ("listens on every interface" in record.getMessage()) == (level == logging.WARNING)


def test_the_viewer_log_line_says_how_to_reach_it_and_warns_when_open_to_every_machine() -> None:
    from mjfleet.viewer.web import where_to_look

    here = socket.gethostname()
    level, line = where_to_look("127.0.0.1", 8081)
    assert level == logging.INFO
    assert line.startswith("viewer at http://127.0.0.1:8081 (this machine only;")
    assert f"ssh -L 8081:localhost:8081 {here}, then open http://localhost:8081" in line
    assert f"ssh -L 8080:[::1]:8080 {here}" in where_to_look("::1", 8080)[1]
    for everywhere in ("0.0.0.0", "::"):
        level, line = where_to_look(everywhere, 8080)
        assert level == logging.WARNING
        assert line.startswith(f"viewer at http://{here}:8080 listens on every interface ({everywhere})")
        assert "anyone who can reach this machine can watch and drive the policy" in line
        assert "SSH port forward" in line
    # An address the user picked on purpose (one network): no warning, no forward needed.
    assert where_to_look("192.0.2.7", 8080) == (logging.INFO, "viewer at http://192.0.2.7:8080 (Ctrl-C to stop)")


def test_session_pauses_steps_switches_environments_and_reads_reward_terms() -> None:
    env = make_env("cartpole-balance", num_envs=2)
    session = ViewerSession(env, zero_policy(env))
    assert session.command_ranges == {}
    assert session.tick() and session.steps == 1
    assert set(session.rewards.episode) == set(env.reward_weights)
    # Per-second rates times the control step are the step's weighted terms of the shown environment.
    for name, rate in session.rewards.rate.items():
        assert rate * env.step_dt == pytest.approx(float(env.reward_terms[name][0]), rel=1e-5)
    session.paused = True
    assert not session.tick() and session.steps == 1
    session.request_step()
    assert session.tick() and not session.tick() and session.steps == 2
    qpos = env.sim.qpos[1].numpy()
    session.show_env(1)
    assert session.tick() and session.steps == 2  # paused: drawn, not stepped
    assert np.allclose(session.data.qpos, qpos) and set(session.rewards.episode.values()) == {0.0}
    with pytest.raises(ValueError, match="outside"):
        session.show_env(2)
    with pytest.raises(KeyError):
        session.hold_commands({"lin_vel_x": 1.0})


def test_the_session_draws_the_shown_environments_own_randomized_model() -> None:
    from .test_video_file import world_one_randomized

    env = world_one_randomized()
    shared = env.sim.mj_model.geom_friction.copy()
    session = ViewerSession(env, zero_policy(env))
    assert np.allclose(session.model.geom_friction, env.sim.model_field("geom_friction")[0].numpy())
    session.show_env(1)
    session.tick()
    assert np.allclose(session.model.geom_friction, 0.123)  # world 1's, not the shared model's
    assert np.array_equal(env.sim.mj_model.geom_friction, shared)


def test_held_velocity_commands_survive_resampling_and_resets_until_released() -> None:
    env = make_env("go1-velocity-flat", num_envs=2)
    task = env.task
    session = ViewerSession(env, zero_policy(env))
    assert set(session.command_ranges) == {"lin_vel_x", "lin_vel_y", "yaw_rate"}
    session.hold_commands({"lin_vel_x": 0.5, "yaw_rate": -0.25})
    task.commands.time_left.zero_()  # due for a draw at this step
    session.tick()
    with torch.inference_mode():
        env.reset_all()  # resets draw fresh commands; the session holds them again before the next step
    session.tick()
    assert torch.allclose(task.commands.command[:, 0], torch.tensor(0.5))
    assert torch.allclose(task.commands.command[:, 2], torch.tensor(-0.25))
    session.hold_commands(None)
    session.tick()  # released: every timer ran out, so this step drew new commands
    assert not torch.allclose(task.commands.command[:, 0], torch.tensor(0.5))


# --- the web viewer in a real browser ------------------------------------------------------------------------------
def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; CI does)")
def test_web_viewer_in_headless_chromium_shows_the_scene_and_a_slider_steers_the_command() -> None:
    # A dev dependency: present under `uv sync`, absent where the suite runs from an offline kit.
    sync_playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").sync_playwright

    from mjfleet.viewer.web import WebViewer

    env = make_env("go1-velocity-flat", num_envs=2)
    # Paused, and plain lighting: the browser renders in software and gets the CPU; the test steps through the
    # page's Step button.
    viewer = WebViewer(env, zero_policy(env), host="127.0.0.1", port=0, paused=True, plain_lighting=True)
    stop = threading.Event()
    loop = threading.Thread(target=viewer.run, args=(stop,), daemon=True)
    loop.start()
    try:
        assert viewer.url.startswith("http://127.0.0.1:")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--enable-unsafe-swiftshader"])
            page = browser.new_page(viewport={"width": 960, "height": 640})
            page.goto(viewer.url)
            page.locator("canvas").first.wait_for(timeout=30_000)
            page.get_by_text("Hold commands").wait_for(timeout=30_000)
            assert len(viewer.server.get_clients()) == 1
            # The scene appears: the robot's bodies are scene nodes, and the canvas shows more than a background.
            assert len(viewer.scene.node_names) > 10
            deadline = time.monotonic() + 20
            colours = 0
            while time.monotonic() < deadline and colours < 50:
                # The middle of the view, where the camera looks at the robot (the panels are at the sides).
                shot = page.screenshot(clip={"x": 330, "y": 170, "width": 300, "height": 300})
                pixels = iio.imread(io.BytesIO(shot))
                colours = len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0))
            assert colours >= 50, f"the middle of the view shows {colours} colours: no scene"

            # Steer: the forward-velocity slider, moved with the keyboard like a person would, then one step.
            before = env.task.commands.command.clone()
            slider = page.get_by_role("slider").nth(1)  # 0: the environment index; 1: lin_vel_x
            slider.focus()
            for _ in range(5):
                page.keyboard.press("ArrowRight")
            expected = 5 * viewer.controls.commands["lin_vel_x"].step  # from 0
            _wait_for(lambda: (viewer.session.held_commands or {}).get("lin_vel_x") == pytest.approx(expected))
            assert viewer.session.steps == 0  # paused: held, not yet applied
            page.get_by_role("button", name="Step").click()
            _wait_for(lambda: viewer.session.steps == 1)
            browser.close()
        command = env.task.commands.command
        assert torch.allclose(command[:, 0], torch.tensor(expected)) and not torch.allclose(command, before)
        assert torch.allclose(command[:, 1:], torch.zeros(2, 2))
    finally:
        stop.set()
        loop.join(timeout=10)
        viewer.close()


NATIVE_SCRIPT = """
import threading
from mjfleet.rl.evaluation.episodes import zero_policy
from mjfleet.viewer.native import run_native_viewer
from tests.conftest import make_env

env = make_env("cartpole-balance", num_envs=2)
stop = threading.Event()
threading.Timer(3.0, stop.set).start()
print("steps", run_native_viewer(env, zero_policy(env), stop))
"""


@pytest.mark.slow
@pytest.mark.skipif(XVFB is None, reason="no Xvfb for a virtual display (apt-get install xvfb)")
def test_native_viewer_steps_the_policy_in_a_window_on_a_virtual_display() -> None:
    display = f":{100 + os.getpid() % 400}"
    assert XVFB is not None
    xvfb = subprocess.Popen([XVFB, display, "-screen", "0", "640x480x24"], stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: Path(f"/tmp/.X11-unix/X{display[1:]}").exists())
        # Its own process: Xlib ends a process whose display goes away, and the window's thread outlives the viewer.
        proc = subprocess.run(
            [sys.executable, "-c", NATIVE_SCRIPT],
            env={**os.environ, "DISPLAY": display},
            cwd=Path(__file__).parents[1],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert int(proc.stdout.split()[-1]) > 0
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=10)


def test_a_paused_session_shows_another_environment_at_once_and_a_switch_mid_step_reads_nothing_stale() -> None:
    env = make_env("cartpole-balance", num_envs=2)
    session = ViewerSession(env, zero_policy(env))
    session.tick()
    session.paused = True
    session.show_env(1)
    assert session.tick() and session.steps == 1  # something to draw, no step taken
    assert np.allclose(session.data.qpos, env.sim.qpos[1].numpy())
    assert not session.tick()
    session.request_redraw()  # a view setting (follow) changed
    assert session.tick() and not session.tick()
    # Environment 0 chosen while a step of environment 1 runs (a GUI thread): the step's terms are not 0's.
    switching = ViewerSession(env, lambda obs: (switching.show_env(0), zero_policy(env)(obs))[1])
    switching.show_env(1)
    switching.tick()
    assert switching.env_index == 0 and switching.episode_steps == 0
    assert set(switching.rewards.episode.values()) == {0.0}


def test_the_policy_sees_the_held_command_after_a_reset() -> None:
    env = make_env("go1-velocity-flat", num_envs=2)
    session = ViewerSession(env, zero_policy(env))
    session.hold_commands({"lin_vel_x": 0.5})
    session.tick()
    with torch.inference_mode():
        env.episode_length_buf[0] = env.max_episode_length - 1  # environment 0 times out at the next step
    seen: list[torch.Tensor] = []
    session.policy = lambda obs: (seen.append(obs["policy"][:, 6:9].clone()), zero_policy(env)(obs))[1]
    session.tick()  # the reset inside this step
    session.tick()  # the policy reads the observation built after the reset
    assert float(seen[-1][0, 0]) == 0.5  # the held column; the others are the task's draws


def test_the_policy_sees_a_held_command_at_the_first_step_after_the_slider_moved() -> None:
    env = make_env("go1-velocity-flat", num_envs=2)
    session = ViewerSession(env, zero_policy(env))
    seen: list[torch.Tensor] = []
    session.policy = lambda obs: (seen.append(obs["policy"][:, 6:9].clone()), zero_policy(env)(obs))[1]
    session.hold_commands({"lin_vel_x": 0.9})
    session.tick()  # the observation the policy steps from was built before the command was held
    assert torch.allclose(seen[-1][:, 0], torch.tensor(0.9))


def test_the_web_viewer_draws_the_shown_environments_own_cube_and_sends_nothing_else_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lift's cube size is drawn per environment: the browser kept the first environment's first cube. Another
    environment's cube is the only mesh sent again (every mesh was: the arm's are most of the scene's bytes), and
    the start builds each geom's mesh once (it built them all twice)."""
    from .helpers import missing_files

    if missing_files("yam-lift-cube") is not None:
        pytest.skip(str(missing_files("yam-lift-cube")))
    from mjfleet.viewer import web
    from mjfleet.viewer.web import WebViewer

    built: list[int] = []

    def counted(model: object, geoms: object = None) -> list[GeomMesh]:
        meshes = geom_meshes(model, geoms)  # type: ignore[arg-type]
        built.extend(m.geom for m in meshes)
        return meshes

    monkeypatch.setattr(web, "geom_meshes", counted)
    env = make_env("yam-lift-cube", num_envs=3)
    cube = env.task._cube_geom  # type: ignore[attr-defined]

    def drawn(viewer: WebViewer) -> float:
        (handle,) = [h for h in viewer.scene._meshes.values() if h.name.endswith(f"/geom{cube}")]
        return float(np.abs(handle.vertices).max())

    viewer = WebViewer(env, zero_policy(env), host="127.0.0.1", port=0, paused=True)
    try:
        assert sorted(built) == sorted(set(built)) and cube in built
        sizes = env.sim.model_field("geom_size")[:, cube, 0].tolist()  # drawn by the session's reset
        assert len(set(sizes)) == 3
        assert drawn(viewer) == pytest.approx(sizes[0], rel=1e-4)
        before = dict(viewer.scene._meshes)
        viewer.session.show_env(2)
        viewer.session.tick()
        viewer.scene.draw()
        assert drawn(viewer) == pytest.approx(sizes[2], rel=1e-4)
        after = viewer.scene._meshes
        assert after.keys() == before.keys() and len(before) > 1
        assert [g for g in after if after[g] is not before[g]] == [cube]
    finally:
        viewer.close()


def test_a_host_is_usable_where_any_of_its_addresses_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name listed first as an IPv6 address a container cannot bind (``localhost`` as ``::1`` without IPv6): the
    server listens on its IPv4 one, so the check must not refuse it."""
    from mjfleet.viewer import display

    unusable = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.1", 0))  # nobody's address
    usable = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))
    monkeypatch.setattr(display.socket, "getaddrinfo", lambda *args, **kwargs: [unusable, usable])
    display.check_listen_host("localhost")
    monkeypatch.setattr(display.socket, "getaddrinfo", lambda *args, **kwargs: [unusable])
    with pytest.raises(UsageError, match="not an address of this machine"):
        display.check_listen_host("localhost")
