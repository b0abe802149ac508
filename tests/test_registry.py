"""Task registry: built-ins, suggestions for typos, third-party tasks through the entry-point group."""

from __future__ import annotations

import math
import re
import runpy
import sys
from pathlib import Path

import pytest

from mjfleet.envs.task import Task
from mjfleet.errors import UsageError
from mjfleet.runtime.context import DistributedContext
from mjfleet.tasks import builtin, registry
from mjfleet.tasks.locomotion.robots import RobotSpec
from mjfleet.tasks.manipulation.arms import ArmSpec
from mjfleet.tasks.spec import TaskSpec
from mjfleet.train.api import prepare
from mjfleet.train.worker import train_worker

from .helpers import installed_distribution, small_train_config

EXAMPLE = Path(__file__).parents[1] / "examples" / "custom_task.py"


def test_builtin_tasks_have_kebab_case_ids_and_complete_configs() -> None:
    tasks = registry.all_tasks()
    assert {"cartpole-balance", "cartpole-swingup"} <= set(tasks)
    for task_id, spec in tasks.items():
        assert task_id == task_id.lower() and " " not in task_id and "_" not in task_id
        assert spec.description and "\n" not in spec.description
        assert spec.env_cfg().num_envs > 1  # never the num_envs=1 trap
        assert spec.agent_cfg().max_iterations > 0
        assert issubclass(spec.load_task_class(), Task)  # "module:Class" paths resolve


def test_builtin_tasks_are_a_source_like_a_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    assert registry.BUILTIN_SOURCE.value == "mjfleet.tasks.builtin:tasks"
    assert registry.BUILTIN_SOURCE.load() is builtin.tasks
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_ROBOTS", {})
    monkeypatch.setattr(registry, "_ARMS", {})
    builtin.tasks()  # only returns specs: registering is the registry's job
    assert registry._REGISTRY == {} and registry._ROBOTS == {} and registry._ARMS == {}
    registry._register_source(registry.BUILTIN_SOURCE)
    items = builtin.tasks()
    assert set(registry._REGISTRY) == {i.id for i in items if isinstance(i, TaskSpec)}
    assert set(registry._ROBOTS) == {i.name for i in items if isinstance(i, RobotSpec)}
    assert set(registry._ARMS) == {i.name for i in items if isinstance(i, ArmSpec)} == {"yam"}
    registry._register_source(registry.BUILTIN_SOURCE)  # equal specs again: no duplicate-id error


def test_unknown_id_suggests_closest() -> None:
    with pytest.raises(UsageError, match="did you mean cartpole-swingup"):
        registry.get_task("cartpole-swingpu")


def _install_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, spec_args: str, group: str = "mjfleet.tasks"
) -> None:
    """A package ``module`` on the path whose entry point in ``group`` returns one ``TaskSpec(<spec_args>)``
    (``base`` is cartpole-balance's spec), and a registry that loads the entry points again."""
    (tmp_path / f"{module}.py").write_text(
        "from mjfleet.tasks.registry import TaskSpec, get_task\n"
        "def specs():\n"
        "    base = get_task('cartpole-balance')\n"
        f"    return [TaskSpec({spec_args})]\n"
    )
    installed_distribution(tmp_path, module.replace("_", "-"), group, {"demo": f"{module}:specs"})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def test_entry_point_plugin_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = "'demo-plugin-balance', 'A plugin task.', base.task_class, base.env_cfg, base.agent_cfg"
    _install_plugin(tmp_path, monkeypatch, "mjfleet_demo_plugin", args)
    try:
        assert registry.get_task("demo-plugin-balance").description == "A plugin task."
    finally:
        sys.modules.pop("mjfleet_demo_plugin", None)


@pytest.mark.parametrize("group", ["mjfleet.task", "mjfleet_tasks", "mjflet.tasks"])
def test_a_package_in_a_misspelt_entry_point_group_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: str
) -> None:
    # Its tasks were missing without a word: an unknown task, and list-tasks as if the package were not installed.
    args = "'demo-misgrouped', 'A task.', base.task_class, base.env_cfg, base.agent_cfg"
    _install_plugin(tmp_path, monkeypatch, "mjfleet_demo_misgrouped", args, group)
    monkeypatch.setattr(registry, "_BROKEN", {})
    problem = f"its entry point 'demo' is in the group {group!r}, which mjfleet does not read"
    read = "(it reads 'mjfleet.tasks' and 'mjfleet.learners')"
    assert registry.broken_packages() == {"mjfleet-demo-misgrouped": f"{problem} {read}"}
    with pytest.raises(UsageError, match=re.escape(f"package 'mjfleet-demo-misgrouped': {problem}")):
        registry.get_task("demo-misgrouped")
    assert "cartpole-balance" in registry.all_tasks()  # the rest loads


def test_example_registers_a_task_that_trains() -> None:
    from mjfleet.train import describe, prepare

    example = runpy.run_path(str(EXAMPLE))  # registers; training runs only as __main__
    # What its __main__ trains plans on a machine without a GPU (it asked for GPU "None" and was refused).
    prepared = prepare(example["train_config"]())
    assert "cpu" in describe(prepared) and "cartpole_gentle_balance" in str(prepared.run.run_dir)  # type: ignore[union-attr]
    cfg = small_train_config("cartpole-gentle-balance", num_envs=32, iterations=2, steps=8)
    # The registered task brings the example's own settings, not cartpole-balance's.
    assert cfg.env.rewards.effort == -0.5 and cfg.agent.experiment_name == "cartpole_gentle_balance"  # type: ignore[attr-defined]
    result = train_worker(cfg, None, DistributedContext(device="cpu"))
    assert result.final_iteration == 2
    assert [r.iteration for r in result.records] == [1, 2]
    assert all(r.losses and all(math.isfinite(v) for v in r.losses.values()) for r in result.records)


def test_a_task_modules_missing_dependency_is_its_own_error_even_with_a_prefix_of_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mjfleet_demo_deps_ext imports mjfleet_demo_deps, which is not installed: that error, not "cannot be imported".
    (tmp_path / "mjfleet_demo_deps_ext.py").write_text("import mjfleet_demo_deps\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = registry.get_task("cartpole-balance")
    spec = TaskSpec("demo-deps", "A missing dependency.", "mjfleet_demo_deps_ext:Task", base.env_cfg, base.agent_cfg)
    try:
        with pytest.raises(ModuleNotFoundError, match="mjfleet_demo_deps"):
            spec.load_task_class()
    finally:
        sys.modules.pop("mjfleet_demo_deps_ext", None)


@pytest.mark.parametrize(
    ("task_class", "message"),
    [
        ("mjfleet_demo_tsak:CartpoleTask", "its task class 'mjfleet_demo_tsak:CartpoleTask' cannot be imported"),
        (
            "mjfleet.tasks.cartpole.cartpole:CartpolTask",
            "module 'mjfleet.tasks.cartpole.cartpole' has no 'CartpolTask'",
        ),
        (
            "mjfleet.tasks.cartpole.config:CartpoleConfig",
            "its task class 'mjfleet.tasks.cartpole.config:CartpoleConfig' is the class CartpoleConfig, not a "
            "subclass of mjfleet.envs.task.Task",
        ),
        (
            "mjfleet.tasks.cartpole.cartpole:UP_COS",
            "its task class 'mjfleet.tasks.cartpole.cartpole:UP_COS' is a float, not a subclass",
        ),
    ],
)
def test_a_packages_misspelt_task_class_is_one_line_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task_class: str, message: str
) -> None:
    args = f"'demo-typo', 'A misspelt task.', {task_class!r}, base.env_cfg, base.agent_cfg"
    _install_plugin(tmp_path, monkeypatch, "mjfleet_demo_typo", args)
    try:
        cfg = small_train_config("demo-typo", log_root=tmp_path / "logs")
        with pytest.raises(UsageError, match=re.escape(f"task 'demo-typo': {message}")):
            prepare(cfg)
        assert not (tmp_path / "logs").exists()
    finally:
        sys.modules.pop("mjfleet_demo_typo", None)
