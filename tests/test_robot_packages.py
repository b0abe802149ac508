"""Robots and tasks from installed packages: the example package goes through the same path as the built-ins, every
task's runs land in its own experiment folder, and a broken package is one line that leaves the other tasks alone.

The broken packages are fake distributions (a module and a ``.dist-info`` folder with its entry point) written to a
temporary folder on ``sys.path``; the registry is loaded again with them installed.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import distribution
from pathlib import Path

import pytest

from mjfleet.cli import list_tasks, play, train
from mjfleet.tasks import builtin, registry
from mjfleet.tasks.locomotion import presets
from mjfleet.tasks.locomotion.robots import BUILTIN_ROBOTS, GO1
from mjfleet.tasks.manipulation.arms import BUILTIN_ARMS
from mjfleet.tasks.spec import TaskSpec

from .helpers import run_main

EXAMPLE = Path(__file__).parents[1] / "examples" / "trotter"
TROTTER_TASKS = ("trotter-velocity-flat", "trotter-velocity-rough")


def _example_module() -> object:
    """The example package's task module, installed into the test environment by ``uv sync`` (group ``examples``)."""
    try:
        import mjfleet_trotter.tasks as module
    except ImportError:  # pragma: no cover - a setup error, reported as such
        pytest.fail("mjfleet-trotter is not installed: run `uv sync` (its default groups install examples/trotter)")
    return module


# --- the example package -------------------------------------------------------------------------------------------
def test_the_example_package_adds_its_robot_and_tasks_through_its_entry_point() -> None:
    _example_module()
    (ep,) = [e for e in distribution("mjfleet-trotter").entry_points if e.group == registry.ENTRY_POINT_GROUP]
    assert ep.value == "mjfleet_trotter.tasks:tasks"
    tasks = registry.all_tasks()
    for task_id in TROTTER_TASKS:
        assert registry.package_of(task_id) == "mjfleet-trotter"
        assert tasks[task_id].env_cfg().robot == "trotter"  # type: ignore[attr-defined]
    assert registry.robot_package("trotter") == "mjfleet-trotter"
    assert registry.all_robots()["trotter"].path == EXAMPLE / "src" / "mjfleet_trotter" / "trotter.xml"
    # The built-in robots are registered by the built-in source, the same way.
    assert {r.name: registry.robot_package(r.name) for r in BUILTIN_ROBOTS} == {
        r.name: "mjfleet" for r in BUILTIN_ROBOTS
    }
    assert registry.broken_packages() == {}


def test_list_tasks_names_the_package_of_its_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    list_tasks.main([])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    for task_id in TROTTER_TASKS:
        assert rows[task_id].endswith("[package mjfleet-trotter]")
    assert "[package" not in rows["go1-velocity-flat"]


def test_the_example_uses_only_the_public_api() -> None:
    source = EXAMPLE / "src" / "mjfleet_trotter" / "tasks.py"
    modules = {
        node.module
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mjfleet")
    }
    assert modules == {"mjfleet.tasks.legged"}


# --- experiment folders --------------------------------------------------------------------------------------------
def test_every_task_writes_its_runs_under_its_own_id() -> None:
    tasks = registry.all_tasks()
    names = {task_id: spec.agent_cfg().experiment_name for task_id, spec in tasks.items()}
    assert names == {task_id: task_id.replace("-", "_") for task_id in tasks}
    for spec in tasks.values():
        if spec.cpu_agent_cfg is not None:
            assert spec.cpu_agent_cfg().experiment_name == names[spec.id]


def test_a_task_reusing_another_tasks_agent_config_gets_its_own_folder() -> None:
    humanoid = registry.get_task("humanoid-velocity-flat")
    # What the in-tree recipe did for a new humanoid: the humanoid's PPO settings, on another robot.
    h1 = TaskSpec("h1-velocity-flat", "H1.", humanoid.task_class, humanoid.env_cfg, presets.humanoid_flat_agent)
    assert h1.agent_cfg().experiment_name == "h1_velocity_flat"
    assert humanoid.agent_cfg().experiment_name == "humanoid_velocity_flat"
    assert dataclasses.replace(h1.agent_cfg(), experiment_name="") == dataclasses.replace(
        humanoid.agent_cfg(), experiment_name=""
    )
    # The task may say otherwise; a copy under another id follows the new id; equal declarations compare equal.
    shared = dataclasses.replace(h1, id="h1-stand", cpu_agent_cfg=presets.humanoid_flat_cpu_agent, experiment_name="h1")
    assert shared.agent_cfg().experiment_name == shared.agent_defaults(on_cpu=True).experiment_name == "h1"
    assert dataclasses.replace(h1, id="h1-walk").agent_cfg().experiment_name == "h1_walk"
    assert h1 == TaskSpec("h1-velocity-flat", "H1.", humanoid.task_class, humanoid.env_cfg, presets.humanoid_flat_agent)
    # The command line's defaults are the task's.
    assert train.parse_args(["trotter-velocity-flat"]).agent.experiment_name == "trotter_velocity_flat"


def test_builtin_source_returns_the_robots_before_the_tasks() -> None:
    items = builtin.tasks()
    records = len(BUILTIN_ROBOTS) + len(BUILTIN_ARMS)
    assert items[:records] == [*BUILTIN_ROBOTS, *BUILTIN_ARMS]
    assert all(isinstance(i, TaskSpec) for i in items[records:])


# --- broken packages -----------------------------------------------------------------------------------------------
GO1_XML = str(GO1.path)


def _limp_package(robot: str, deviation: str = "()", returned: str = "[ROBOT, TASK]") -> str:
    """A package of one robot record ``limp`` (``robot``: its source and base body) and its task ``limp-walk``."""
    return f"""
        from mjfleet.tasks.legged import LOCOMOTION_TASK, RobotSpec, TaskSpec, locomotion_agent, locomotion_sim
        from mjfleet.tasks.legged import quadruped_flat_config
        ROBOT = RobotSpec(name="limp", {robot}, feet=("FR_foot", "FL_foot"),
                          undesired_contacts=(), terminal_contacts=("trunk",), deviation_joints={deviation})
        def flat():
            return quadruped_flat_config(ROBOT, locomotion_sim(16, 64))
        def agent():
            return locomotion_agent(10, (32,))
        TASK = TaskSpec("limp-walk", "Limps.", LOCOMOTION_TASK, flat, agent)
        def tasks():
            return {returned}
        """


BROKEN = {
    "import": (
        "import mjfleet_no_such_module\ndef tasks():\n    return []\n",
        "limp-walk",
        "cannot import mjfleet_fake_limp:tasks (ModuleNotFoundError: No module named 'mjfleet_no_such_module')",
    ),
    "returns": (
        "def tasks():\n    return {'id': 'limp-walk'}\n",
        "limp-walk",
        "mjfleet_fake_limp:tasks returned a dict, not TaskSpecs, RobotSpecs and ArmSpecs (or a list of them)",
    ),
    "builtin-id": (
        """
        from mjfleet.tasks.registry import get_task
        from mjfleet.tasks.spec import TaskSpec
        def tasks():
            go1 = get_task("go1-velocity-flat")
            mine = TaskSpec("limp-walk", "Mine.", go1.task_class, go1.env_cfg, go1.agent_cfg)
            return [mine, TaskSpec("go1-velocity-flat", "Mine too.", go1.task_class, go1.env_cfg, go1.agent_cfg)]
        """,
        "limp-walk",
        "task id 'go1-velocity-flat' is taken by package 'mjfleet'",
    ),
    "robot-file": (
        _limp_package(f"source={GO1_XML!r}, base_body='chassis'", deviation="('FR_abduct',)"),
        "limp-walk",
        f"robot 'limp' ({GO1_XML}) lacks what robot record 'limp' needs: no body 'chassis' (the base;",
    ),
    "record-not-returned": (
        _limp_package(f"source={GO1_XML!r}, base_body='trunk'", returned="[TASK]"),
        "limp-walk",
        "task 'limp-walk' trains robot record 'limp', which no installed package returns (return it from the source",
    ),
    "record-shape": (
        _limp_package(f"source={GO1_XML!r}, base_body='trunk', home=(('.*_calf_joint', -1.4))"),
        "limp-walk",
        "cannot import mjfleet_fake_limp:tasks (TypeError: robot record 'limp': home must be (pattern, angle) pairs,"
        " not one pair ('.*_calf_joint', -1.4) (a tuple of one needs a trailing comma",
    ),
    "relative-source": (
        _limp_package("source='limp.xml', base_body='trunk'"),
        "limp-walk",
        "robot 'limp': no such MJCF file limp.xml (relative: looked for from ",
    ),
    "settings-raise": (
        """
        from mjfleet.tasks.legged import LOCOMOTION_TASK, TaskSpec, locomotion_agent, locomotion_sim
        def flat():
            return locomotion_sim(16, 64, foo=1)
        def agent():
            return locomotion_agent(10, (32,))
        def tasks():
            return [TaskSpec("limp-walk", "Limps.", LOCOMOTION_TASK, flat, agent)]
        """,
        "limp-walk",
        "task 'limp-walk': its environment settings (flat) raised TypeError: ",
    ),
}
"""Case -> (the package's module, a task id it declares or would declare, the problem its line names)."""


def _install_fake(root: Path, module: str) -> None:
    """A distribution ``mjfleet-fake-limp`` whose ``mjfleet.tasks`` entry point is ``mjfleet_fake_limp:tasks``."""
    (root / "mjfleet_fake_limp.py").write_text(textwrap.dedent(module))
    dist = root / "mjfleet_fake_limp-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mjfleet-fake-limp\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mjfleet.tasks]\nlimp = mjfleet_fake_limp:tasks\n")


@pytest.fixture
def reload_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry loads again (with whatever is on ``sys.path`` then) and is put back afterwards."""
    monkeypatch.setattr(registry, "_loaded", False)
    for table in ("_REGISTRY", "_ROBOTS", "_ARMS", "_PACKAGES", "_BROKEN", "_UNCHECKED", "_MENAGERIE"):
        monkeypatch.setattr(registry, table, {})
    monkeypatch.setattr(registry, "_WARNED", set())
    yield
    sys.modules.pop("mjfleet_fake_limp", None)


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_package_is_one_line_and_leaves_the_other_tasks_alone(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_registry: None
) -> None:
    module, task_id, problem = BROKEN[case]
    (tmp_path / "site").mkdir()
    _install_fake(tmp_path / "site", module)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    line = f"package 'mjfleet-fake-limp': {problem}"

    # train and play first: a robot file is checked when its package's task is looked up.
    logs = tmp_path / "logs"
    for main, argv in (
        (train.main, [task_id, "--gpu-ids", "None", "--log-root", str(logs)]),
        (play.main, [task_id, "--gpu-ids", "None", "--log-root", str(logs)]),
    ):
        code, _, err = run_main(main, argv)
        assert code == 2 and "Traceback" not in err
        (error,) = err.splitlines()
        assert error.startswith("error: ") and line in error
    assert not logs.exists()

    code, out, err = run_main(list_tasks.main, [])
    assert code == 0
    (warning,) = err.splitlines()
    assert warning.startswith(f"warning: {line}") and warning.endswith("; its tasks are not loaded")
    listed = [row.split()[0] for row in out.splitlines()]
    assert "limp-walk" not in listed and {"go1-velocity-flat", *TROTTER_TASKS} <= set(listed)
    # The built-in task of the same id is untouched, and other tasks still train.
    assert registry.package_of("go1-velocity-flat") == "mjfleet"
    assert registry.get_task("go1-velocity-flat").description.startswith("Go1 quadruped")
    code, out, err = run_main(train.main, ["trotter-velocity-flat", "--gpu-ids", "None", "--dry-run"])
    assert code == 0 and "trotter-velocity-flat" in out, err


def test_training_an_id_a_broken_package_declares_too_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_registry: None
) -> None:
    """A package declaring a built-in id is not loaded; training that id trains the built-in task, and says so."""
    (tmp_path / "site").mkdir()
    _install_fake(tmp_path / "site", BROKEN["builtin-id"][0])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    code, out, err = run_main(train.main, ["go1-velocity-flat", "--gpu-ids", "None", "--dry-run"])
    assert code == 0 and "go1-velocity-flat" in out, err
    said = " ".join(err.split())
    assert "WARNING task 'go1-velocity-flat' comes from package 'mjfleet'; package 'mjfleet-fake-limp': task id" in said
    assert "is taken by package 'mjfleet'; its tasks are not loaded (rename its task to train it)" in said
    assert said.count("WARNING") == 1


def test_list_tasks_checks_the_robot_files_of_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_registry: None
) -> None:
    module, task_id, problem = BROKEN["robot-file"]
    _install_fake(tmp_path, module)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert task_id in registry.all_tasks()  # registered, its file not checked yet: loading needs no MuJoCo
    code, out, err = run_main(list_tasks.main, [])
    assert code == 0 and task_id not in out
    assert err.startswith(f"warning: package 'mjfleet-fake-limp': {problem}")
    assert task_id not in registry.all_tasks() and "limp" not in registry.all_robots()


def test_list_tasks_says_how_to_get_a_package_tasks_menagerie_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_registry: None
) -> None:
    """A package task on a Menagerie robot that is not on disk says how to get it, as the built-in ones do."""
    _install_fake(tmp_path, _limp_package("source='menagerie:limp_bot/limp.xml', base_body='trunk'"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path / "menagerie"))
    (tmp_path / "menagerie").mkdir()
    code, out, err = run_main(list_tasks.main, [])
    assert code == 0 and err == ""
    rows = {line.split()[0]: line for line in out.splitlines()}
    hint = "[not on disk: uv run mujoco-menagerie prefetch limp_bot]"
    assert rows["limp-walk"].endswith(f"Limps. {hint} [package mjfleet-fake-limp]")
    assert "not on disk" not in rows["trotter-velocity-flat"]
    (tmp_path / "menagerie" / "limp_bot").mkdir()  # a copy or prefetch that failed: still not on disk
    code, out, _ = run_main(list_tasks.main, [])
    (row,) = [line for line in out.splitlines() if line.startswith("limp-walk ")]
    assert code == 0 and row.endswith(f"Limps. {hint} [package mjfleet-fake-limp]")
    (tmp_path / "menagerie" / "limp_bot" / "limp.xml").write_text("<mujoco/>")
    code, out, _ = run_main(list_tasks.main, [])
    (row,) = [line for line in out.splitlines() if line.startswith("limp-walk ")]
    assert code == 0 and row.endswith("Limps. [package mjfleet-fake-limp]")


def test_an_unknown_id_names_an_unreadable_package_before_the_spelling_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_registry: None
) -> None:
    (tmp_path / "site").mkdir()
    _install_fake(tmp_path / "site", BROKEN["import"][0])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    code, _, err = run_main(train.main, ["limp-walk", "--gpu-ids", "None", "--dry-run"])
    (line,) = err.splitlines()
    assert code == 2 and line.startswith(
        "error: unknown task 'limp-walk'; package 'mjfleet-fake-limp': cannot import mjfleet_fake_limp:tasks"
    )
    assert line.endswith("run list-tasks to see them") or "did you mean" in line.split("ModuleNotFoundError")[1]
