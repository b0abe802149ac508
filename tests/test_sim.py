# pyright: reportAttributeAccessIssue=false
"""Simulation core on both backends: graph replay equals eager launches (Warp), per-world reset and model fields,
zero-copy views, divergence detection, and the two backends agreeing on a trajectory."""

from __future__ import annotations

import subprocess
import sys

import mujoco
import pytest
import torch

from mjfleet.sim.config import Backend, resolve_backend
from mjfleet.sim.factory import create_simulation
from mjfleet.sim.simulation import SimConfig, Simulation
from mjfleet.sim.warp_backend import WarpSimulation
from mjfleet.tasks.cartpole.cartpole import MODEL_PATH

BACKENDS = ("warp", "mujoco")


def _sim(use_graph: bool = True, num_worlds: int = 8, backend: Backend = "warp", **kwargs: object) -> Simulation:
    model = mujoco.MjModel.from_xml_path(str(MODEL_PATH))
    cfg = SimConfig(decimation=3, use_graph=use_graph, backend=backend)
    return create_simulation(model, num_worlds, "cpu", cfg, **kwargs)  # type: ignore[arg-type]


def _drive(sim: Simulation, steps: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    sim.qpos[:, 1] = torch.linspace(-0.5, 0.5, sim.num_worlds)
    trajectory = []
    for _ in range(steps):
        sim.ctrl[:] = torch.rand(sim.num_worlds, 1, generator=gen) * 2 - 1
        sim.step()
        trajectory.append(torch.cat((sim.qpos, sim.qvel), dim=-1).clone())
    return torch.stack(trajectory)


def test_graph_replay_is_bit_identical_to_eager() -> None:
    graph_sim, eager_sim = _sim(use_graph=True), _sim(use_graph=False)
    graph_traj, eager_traj = _drive(graph_sim, 20), _drive(eager_sim, 20)
    assert graph_sim.graph_active and not eager_sim.graph_active
    assert torch.equal(graph_traj, eager_traj)
    assert not torch.equal(graph_traj[0], graph_traj[-1])  # the state really moved


@pytest.mark.parametrize("backend", BACKENDS)
def test_decimation_advances_time_by_control_dt(backend: Backend) -> None:
    sim = _sim(backend=backend)
    for _ in range(4):
        sim.step()
    torch.testing.assert_close(sim.time, torch.full((8,), 4 * sim.control_dt))
    assert sim.control_dt == 3 * sim.physics_dt


def test_views_share_memory_with_warp() -> None:
    sim = _sim(use_graph=False)
    assert isinstance(sim, WarpSimulation)
    sim.qpos[2, 1] = 0.25
    assert sim.view("qpos").data_ptr() == sim.qpos.data_ptr()
    assert float(sim.data.qpos.numpy()[2, 1]) == 0.25


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_worlds_touches_only_listed_worlds(backend: Backend) -> None:
    sim = _sim(backend=backend)
    _drive(sim, 5)
    before_q, before_v, before_t = sim.qpos.clone(), sim.qvel.clone(), sim.time.clone()
    ids = torch.tensor([1, 5])
    sim.reset_worlds(ids, qpos=torch.tensor([0.1, 0.2]), qvel=torch.zeros(2))
    others = torch.tensor([i for i in range(8) if i not in (1, 5)])
    assert torch.equal(sim.qpos[others], before_q[others])
    assert torch.equal(sim.qvel[others], before_v[others])
    assert torch.equal(sim.time[others], before_t[others])
    torch.testing.assert_close(sim.qpos[ids], torch.tensor([[0.1, 0.2], [0.1, 0.2]]))
    assert torch.all(sim.qvel[ids] == 0) and torch.all(sim.time[ids] == 0) and torch.all(sim.ctrl[ids] == 0)


DELAYED = """<mujoco><option timestep="0.01"/><worldbody><body><joint name="h" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 -.5" size=".05"/></body></worldbody>
<actuator><motor joint="h" delay="0.03" nsample="4"/></actuator>
<sensor><jointpos joint="h" delay="0.03" nsample="4"/></sensor></mujoco>"""
"""A motor and a sensor that act 30 ms late: their history buffers are state of the world."""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reset_world_forgets_its_delayed_controls_and_readings(backend: Backend) -> None:
    # The history buffers kept the last episode's controls, which went on driving the reset world.
    model = mujoco.MjModel.from_xml_string(DELAYED)
    sim = create_simulation(model, 2, "cpu", SimConfig(backend=backend, decimation=2))
    for _ in range(10):
        sim.ctrl[:] = 5.0
        sim.step()
    sim.reset_worlds(torch.tensor([0]))
    sim.forward()
    assert float(sim.sensordata[0, 0]) == 0.0 and abs(float(sim.sensordata[1, 0])) > 0.05
    sim.step()
    assert float(sim.qpos[0, 0]) == 0.0  # no control left in the queue: it stays where the reset put it
    assert abs(float(sim.qpos[1, 0])) > 0.1


PLASTIC = """<mujoco><option timestep="0.01" gravity="0 0 0"/><worldbody><body>
<joint name="h" type="hinge" axis="0 1 0" stiffness="20" springyield="0.05" damping="1"/>
<geom type="capsule" fromto="0 0 0 0 0 -.5" size=".05"/></body></worldbody><actuator><motor joint="h"/></actuator>
</mujoco>"""
"""A hinge whose spring yields: pushed far enough, it keeps the angle it was bent to (plastic state)."""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reset_world_forgets_how_its_joints_were_bent(backend: Backend) -> None:
    model = mujoco.MjModel.from_xml_string(PLASTIC)
    assert model.nplastic == 1
    sim = create_simulation(model, 2, "cpu", SimConfig(backend=backend, decimation=2))
    for _ in range(100):
        sim.ctrl[:] = 10.0
        sim.step()
    sim.ctrl[:] = 0.0
    sim.reset_worlds(torch.tensor([0]))
    for _ in range(50):
        sim.step()
    assert abs(float(sim.qpos[0, 0])) < 0.01  # its spring's rest is the model's again
    assert float(sim.qpos[1, 0]) > 1.0  # bent, it stays bent


def test_warp_forward_of_some_worlds_leaves_what_the_others_read() -> None:
    # Warp recomputes every world: the others' derived fields moved from their last substep's to their state's, so
    # a running world's observation depended on whether another one reset (MuJoCo C's do not move).
    sims = [_sim(backend=backend, num_worlds=4) for backend in BACKENDS]
    for sim in sims:
        _drive(sim, 3)
        before = sim.view("xpos").clone()
        sim.reset_worlds(torch.tensor([0]))
        sim.forward(torch.tensor([0]))
        assert torch.equal(sim.view("xpos")[1:], before[1:])
        assert not torch.equal(sim.view("xpos")[0], before[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_nonfinite_worlds_are_detected(backend: Backend) -> None:
    sim = _sim(use_graph=False, backend=backend)
    sim.qvel[3, 0] = float("nan")
    sim.qpos[6, 1] = float("inf")
    assert sim.nonfinite_worlds().nonzero().flatten().tolist() == [3, 6]
    # After a step too (MuJoCo C resets a diverged world itself and counts a warning), until the world is reset.
    sim.step()
    assert sim.nonfinite_worlds().nonzero().flatten().tolist() == [3, 6]
    sim.reset_worlds(torch.tensor([3, 6]))
    sim.step()
    assert not sim.nonfinite_worlds().any()


def test_auto_backend_is_mujoco_on_the_cpu_and_warp_on_cuda() -> None:
    assert resolve_backend(SimConfig(), "cpu") == "mujoco"
    assert resolve_backend(SimConfig(), "cuda:0") == "warp"
    assert resolve_backend(SimConfig(backend="warp"), "cpu") == "warp"
    assert _sim(backend="auto").backend == "mujoco"


def test_backends_agree_on_a_trajectory() -> None:
    """Warp (float32) and MuJoCo C (float64) take the same 30 control steps of the cart-pole, to 1e-3."""
    warp_traj, c_traj = _drive(_sim(backend="warp"), 30), _drive(_sim(backend="mujoco"), 30)
    torch.testing.assert_close(c_traj, warp_traj, atol=1e-3, rtol=1e-3)
    assert not torch.equal(c_traj[0], c_traj[-1])


def test_mujoco_views_are_float32_and_reach_the_physics() -> None:
    sim = _sim(backend="mujoco")
    assert sim.qpos.dtype == torch.float32 and sim.view("qpos") is sim.qpos
    pole = sim.mj_model.body("pole").id
    before = sim.xpos[:, pole].clone()
    sim.qpos[2, 0] = 0.25  # the cart of world 2
    sim.forward(torch.tensor([2]))  # derived quantities of world 2 only follow its new state
    torch.testing.assert_close(sim.xpos[2, pole, 0] - before[2, 0], torch.tensor(0.25))
    assert torch.equal(sim.xpos[[0, 1, 3], pole], before[[0, 1, 3]])
    sim.step()
    assert float(sim.time[2]) == pytest.approx(sim.control_dt) and float(sim.qpos[2, 0]) == pytest.approx(0.25)


def test_mujoco_per_world_model_fields_change_only_their_worlds() -> None:
    sim = _sim(backend="mujoco", batched_model_fields=("actuator_gainprm",))
    gain = sim.model_field("actuator_gainprm")
    assert gain.shape[0] == 8
    gain[4, 0, 0] *= 0.0  # world 4's motor does nothing
    sim.model_fields_changed(torch.tensor([4]))
    sim.ctrl[:] = 1.0
    for _ in range(3):
        sim.step()
    assert float(sim.qvel[4, 0]) == 0.0 and float(sim.qvel[0, 0]) != 0.0
    torch.testing.assert_close(sim.qvel[1:4], sim.qvel[0].expand(3, -1))
    with pytest.raises(KeyError, match="not batched"):
        sim.model_field("geom_friction")


def test_warp_refuses_a_model_field_it_shares_between_worlds_as_mujoco_c_does() -> None:
    """Warp keeps an unbatched field once for every world (leading dimension 1): a row written would be out of range,
    or every world's at once."""
    sim = _sim(backend="warp", batched_model_fields=("actuator_gainprm",))
    assert sim.model_field("actuator_gainprm").shape[0] == 8
    with pytest.raises(KeyError, match="not batched; name it in the task's batched_model_fields"):
        sim.model_field("geom_friction")


def _warp_init_stderr(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return result.stderr


@pytest.mark.slow
def test_cpu_runs_start_warp_without_the_no_driver_warning() -> None:
    plain = _warp_init_stderr("import warp as wp; wp.init(); print('other', file=__import__('sys').stderr)")
    if "NVIDIA CUDA driver" not in plain:
        pytest.skip("this machine has a CUDA driver, so Warp prints no such warning")
    quiet = _warp_init_stderr(
        "import sys; from mjfleet.sim.warp_runtime import init_warp; init_warp('cpu'); print('other', file=sys.stderr)"
    )
    assert "NVIDIA CUDA driver" not in quiet and "other" in quiet
    # A CUDA device asks for the driver, so the warning stays.
    assert "NVIDIA CUDA driver" in _warp_init_stderr(
        "from mjfleet.sim.warp_runtime import init_warp; init_warp('cuda:0')"
    )


def test_a_world_that_diverges_again_in_a_later_episode_is_reported_again() -> None:
    """MuJoCo C resets a diverged world itself and counts a warning; the count must not hide the next one."""
    from mjfleet.sim.mujoco_backend import MujocoSimulation

    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>"
    )
    sim = MujocoSimulation(model, 2, "cpu", SimConfig(decimation=1))
    for _ in range(2):
        sim.qvel[0, 0] = float("nan")
        sim.step()
        assert sim.nonfinite_worlds().tolist() == [True, False]
        sim.reset_worlds(torch.tensor([0]))
        sim.step()
        assert sim.nonfinite_worlds().tolist() == [False, False]


def test_contact_forces_are_computed_when_read_though_no_sensor_is() -> None:
    """The substeps skip the sensor pass nobody reads; the forces it computes (``cfrc_ext``) count as read."""
    from mjfleet.sim.mujoco_backend import MujocoSimulation

    xml = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
      <body pos="0 0 .1"><freejoint/><geom size=".1"/><site name="s"/></body></worldbody>
      <sensor><accelerometer site="s"/></sensor></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    forces = []
    for every in (False, True):
        sim = MujocoSimulation(model, 1, "cpu", SimConfig(decimation=2, sensors_every_substep=every))
        view = sim.view("cfrc_ext")
        for _ in range(5):
            sim.step()
        forces.append(float(view[0, 1, 5]))
    assert forces[0] == pytest.approx(forces[1]) and forces[0] > 10.0  # the ball's weight on the floor
