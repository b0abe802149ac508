# pyright: reportAttributeAccessIssue=false
"""The training contact model: what each setting changes in the compiled model, where it applies, and that the
evaluation and ``play`` judge on the robot file as shipped."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import pytest
import yaml

from mjfleet.errors import UsageError
from mjfleet.sim.config import ContactModel, SimConfig, as_shipped
from mjfleet.sim.contacts import with_contact_model
from mjfleet.sim.factory import create_simulation

FIXTURE = Path(__file__).with_name("fixtures") / "menagerie"

# A robot of three bodies in one tree (free base, two hinged links), a cube and the floor.
XML = """
<mujoco>
  <option cone="elliptic" impratio="100"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="base" pos="0 0 .5"><freejoint/><geom name="base" size=".1" condim="6"/>
      <body name="link1" pos=".15 0 0"><joint name="j1" type="hinge" frictionloss="0.2"/><geom name="link1" size=".1"/>
        <body name="link2" pos="-.15 0 0"><joint name="j2" type="hinge" frictionloss="0.2"/>
          <geom name="link2" size=".1" condim="4"/>
        </body>
      </body>
    </body>
    <body name="cube" pos="0 0 .2"><freejoint/><geom name="cube" type="box" size=".05 .05 .05"/></body>
  </worldbody>
</mujoco>
"""

CHEAP = ContactModel(
    applies="cpu", cone="pyramidal", impratio=1.0, max_condim=3, joint_friction=False, self_collisions=False
)


def colliding_pairs(m: mujoco.MjModel) -> set[tuple[str, str]]:
    """Geom pairs whose contype/conaffinity let them collide (MuJoCo's filter, before parent-child exclusion)."""
    pairs = set()
    for i in range(m.ngeom):
        for j in range(i + 1, m.ngeom):
            if m.geom_contype[i] & m.geom_conaffinity[j] or m.geom_contype[j] & m.geom_conaffinity[i]:
                pairs.add((m.geom(i).name, m.geom(j).name))
    return pairs


def test_the_file_model_is_the_model_itself() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    assert with_contact_model(m, ContactModel()) is m
    assert with_contact_model(m, ContactModel(applies="always")) is m  # nothing to change


def test_each_setting_changes_a_copy() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    cheap = with_contact_model(m, CHEAP)
    assert cheap is not m
    assert cheap.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and cheap.opt.impratio == 1.0
    assert list(cheap.geom_condim) == [3, 3, 3, 3, 3] and (cheap.dof_frictionloss == 0).all()
    # The original is untouched.
    assert m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and m.opt.impratio == 100.0
    assert list(m.geom_condim) == [3, 6, 3, 4, 3] and m.dof_frictionloss.max() == pytest.approx(0.2)


def test_no_self_collisions_keeps_every_pair_with_other_bodies() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    before = colliding_pairs(m)
    after = colliding_pairs(with_contact_model(m, ContactModel(self_collisions=False)))
    robot = {"base", "link1", "link2"}
    assert before - after == {(a, b) for a, b in before if a in robot and b in robot}
    assert ("link2", "cube") in after and ("floor", "base") in after and ("floor", "cube") in after


def test_no_self_collisions_in_physics() -> None:
    """Two links of one tree overlap: with self-collisions they touch, without them only the ground and the cube."""
    m = mujoco.MjModel.from_xml_string(XML)
    for contacts, self_contact in ((ContactModel(), True), (ContactModel(self_collisions=False), False)):
        cm = with_contact_model(m, contacts)
        d = mujoco.MjData(cm)
        mujoco.mj_forward(cm, d)
        names = {frozenset((cm.geom(int(c.geom1)).name, cm.geom(int(c.geom2)).name)) for c in d.contact[: d.ncon]}
        assert (frozenset(("base", "link2")) in names) == self_contact


@pytest.mark.parametrize(
    ("applies", "cpu", "gpu"), [("never", False, False), ("cpu", True, False), ("always", True, True)]
)
def test_where_it_applies(applies: str, cpu: bool, gpu: bool) -> None:
    contacts = dataclasses.replace(CHEAP, applies=applies)  # type: ignore[arg-type]
    assert (contacts.active(on_gpu=False), contacts.active(on_gpu=True)) == (cpu, gpu)


def test_the_cpu_simulation_runs_it_and_the_shipped_config_does_not() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    cfg = SimConfig(backend="mujoco", training_contacts=CHEAP)
    trained = create_simulation(m, 2, "cpu", cfg)
    judged = create_simulation(m, 2, "cpu", as_shipped(cfg))
    assert trained.mj_model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    assert judged.mj_model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert CHEAP.describe() == "pyramidal cones, condim <= 3, impratio 1, no joint friction, no self-collisions"


def test_a_longer_timestep_keeps_the_environment_step() -> None:
    """Twice the file's timestep, half the physics steps: an environment step lasts as long, and the model stepped
    is the one the simulation reports (the file's model keeps its timestep)."""
    m = mujoco.MjModel.from_xml_string(XML)
    cfg = SimConfig(backend="mujoco", decimation=4, training_contacts=ContactModel(applies="cpu", timestep_scale=2))
    trained = create_simulation(m, 2, "cpu", cfg)
    judged = create_simulation(m, 2, "cpu", as_shipped(cfg))
    assert (trained.physics_dt, trained.cfg.decimation) == (2 * m.opt.timestep, 2)
    assert (judged.physics_dt, judged.cfg.decimation) == (m.opt.timestep, 4)
    assert trained.control_dt == pytest.approx(judged.control_dt)
    assert m.opt.timestep == mujoco.MjModel.from_xml_string(XML).opt.timestep
    trained.step()
    judged.step()
    assert trained.time.tolist() == pytest.approx([judged.control_dt] * 2)
    assert judged.time.tolist() == pytest.approx([judged.control_dt] * 2)
    assert ContactModel(timestep_scale=2).describe() == "2x the model's timestep"


def test_a_timestep_scale_that_does_not_divide_the_decimation_is_refused() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    cfg = SimConfig(backend="mujoco", decimation=4, training_contacts=ContactModel(applies="cpu", timestep_scale=3))
    with pytest.raises(UsageError, match=r"timestep-scale 3 must divide --env\.sim\.decimation 4"):
        create_simulation(m, 2, "cpu", cfg)


def test_the_evaluation_simulation_runs_the_file_as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from mjfleet.tasks.registry import get_task
    from mjfleet.train.worker import evaluation_config

    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    env = get_task("unitree-go1-velocity-flat").env_cfg()
    assert env.sim.training_contacts.active(on_gpu=False)  # the task's CPU default
    judged = evaluation_config(env, 32)
    assert judged.num_envs == 32 and not judged.sim.training_contacts.active(on_gpu=False)


def test_a_run_records_its_contact_model_says_it_and_play_judges_on_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mjfleet.cli.play import parse_args as play_args
    from mjfleet.cli.train import main as train_main

    from .helpers import run_main

    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    argv = ["unitree-go1-velocity-flat", "--gpu-ids", "None", "--env.num-envs", "16", "--agent.num-steps-per-env", "4"]
    argv += ["--agent.max-iterations", "1", "--agent.eval-envs", "4", "--log-root", str(tmp_path)]
    code, out, err = run_main(train_main, argv)
    assert code == 0, err
    said = " ".join((out + err).split())
    assert "physics: training on cheaper physics than the robot file's (pyramidal cones" in said
    assert "the evaluation runs on the file as shipped" in said
    (run_dir,) = (tmp_path / "unitree_go1_velocity_flat").iterdir()
    recorded = yaml.safe_load((run_dir / "params" / "env.yaml").read_text())["sim"]["training_contacts"]
    assert recorded["applies"] == "cpu" and recorded["cone"] == "pyramidal" and recorded["self_collisions"] is False
    _, cfg, _ = play_args(["unitree-go1-velocity-flat", "--checkpoint", str(run_dir), "--gpu-ids", "None"])
    assert cfg.env.sim.training_contacts.applies == "never"
    told = ["unitree-go1-velocity-flat", "--checkpoint", str(run_dir), "--env.sim.training-contacts.applies", "cpu"]
    _, cfg, _ = play_args(told)
    assert cfg.env.sim.training_contacts.applies == "cpu" and cfg.env.sim.training_contacts.cone == "pyramidal"


@pytest.mark.parametrize("task_id", ["unitree-go1-velocity-flat", "unitree-g1-velocity-flat"])
def test_the_real_robots_train_on_their_contact_model_and_are_judged_on_the_file(task_id: str) -> None:
    """Menagerie's Go1 and G1 (their files under ``MENAGERIE_ROOT``): the CPU training simulation compiles the task's
    cheaper contact model, the evaluation's the file as shipped, and both step without diverging."""
    import torch

    from mjfleet.envs.env import MjEnv
    from mjfleet.tasks.registry import get_task
    from mjfleet.train.worker import evaluation_config

    from .helpers import missing_files

    if why := missing_files(task_id):
        pytest.skip(why)
    spec = get_task(task_id)
    cfg = dataclasses.replace(spec.env_defaults(on_cpu=True), num_envs=4)
    contacts = cfg.sim.training_contacts
    assert contacts.active(on_gpu=False), f"{task_id} trains on its file's contacts on the CPU"
    trained = MjEnv(spec.load_task_class()(cfg), device="cpu", seed=0)
    judged = MjEnv(spec.load_task_class()(evaluation_config(cfg, 4)), device="cpu", seed=0)
    try:
        shipped = judged.sim.mj_model
        model = trained.sim.mj_model
        if contacts.cone == "pyramidal":
            assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
        if not contacts.joint_friction:
            assert shipped.dof_frictionloss.max() > 0 and model.dof_frictionloss.max() == 0
        if contacts.max_condim:
            assert model.geom_condim.max() <= contacts.max_condim
        for env in (trained, judged):
            for _ in range(10):
                obs, reward, _, _ = env.step(torch.zeros(env.num_envs, env.num_actions))
                assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
            assert torch.isfinite(env.sim.qpos).all()
    finally:
        trained.close()
        judged.close()


def test_self_collisions_are_not_taken_out_where_collision_bits_would_widen_another_geoms_filter() -> None:
    """The floor meets one of the robot's geoms and not the other (its own collision bits): one bit for the robot
    would let the floor meet both, so the training contact model refuses in one line."""
    xml = """<mujoco><worldbody>
      <geom name="floor" type="plane" size="5 5 .1" contype="1" conaffinity="1"/>
      <body pos="0 0 .5"><freejoint/><geom size=".1" contype="1" conaffinity="1"/>
        <body pos="0 0 .3"><joint type="hinge"/><geom size=".1" contype="2" conaffinity="2"/></body></body>
    </worldbody></mujoco>"""
    with pytest.raises(UsageError, match="geom floor collides with some of a robot's geoms"):
        with_contact_model(mujoco.MjModel.from_xml_string(xml), ContactModel(self_collisions=False))


def test_a_training_contact_model_that_applies_nowhere_here_is_said(caplog: pytest.LogCaptureFixture) -> None:
    """go1-velocity-flat trains on its file as shipped (``applies never``): changes given without ``applies`` did
    nothing, silently."""
    import logging

    from mjfleet.train.worker import _say_physics

    from .helpers import small_train_config

    cfg = small_train_config("go1-velocity-flat")
    cfg.env.sim.training_contacts.timestep_scale = 2
    with caplog.at_level(logging.WARNING, logger="mjfleet.train"):
        _say_physics(cfg, on_gpu=False, judged_apart=True)
    said = " ".join(caplog.text.split())
    assert "the training contact model given (2x the model's timestep) does not apply here" in said
    assert "(--env.sim.training-contacts.applies never, training on the CPU)" in said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mjfleet.train"):
        _say_physics(small_train_config("go1-velocity-flat"), on_gpu=False, judged_apart=True)  # the task's own
    assert caplog.text == ""
