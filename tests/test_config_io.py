"""``play`` rebuilds a run's env and agent settings from its ``params/*.yaml`` onto the task's own configs."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from mjfleet.config_io import load_yaml, update_dataclass
from mjfleet.tasks.registry import get_task


def _as_written(instance: Any) -> dict[str, Any]:
    """What a run's params/*.yaml reads back as: plain YAML, tuples as lists, paths as strings."""
    return yaml.safe_load(yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(instance), default=str))))


@dataclass
class Inner:
    span: tuple[float, float] | None = None
    mode: Literal["a", "b"] = "a"


@dataclass
class TaskInner(Inner):
    extra: int = 7


@dataclass
class Outer:
    sizes: tuple[int, ...] = (1, 2)
    out: Path | None = None
    inner: Inner = field(default_factory=Inner)
    name: str = "x"


def test_values_land_on_the_instance_with_the_types_its_fields_declare() -> None:
    task = Outer(name="task's own", inner=TaskInner(extra=9))
    got = update_dataclass(
        task,
        {"sizes": [3, 4, 5], "out": "runs/a", "inner": {"span": [0.5, 1.5], "mode": "b"}, "gone": 1},
    )
    assert got == Outer((3, 4, 5), Path("runs/a"), TaskInner((0.5, 1.5), "b", 9), "task's own")
    assert isinstance(got.inner, TaskInner) and isinstance(got.inner.span, tuple)  # tuple | None takes a tuple
    assert task == Outer(name="task's own", inner=TaskInner(extra=9))  # a copy: the task's config is unchanged
    assert update_dataclass(Outer(out=Path("x")), {"out": None}).out is None


@pytest.mark.parametrize(("task_id", "section"), [("go1-velocity-rough", "env"), ("cartpole-balance", "agent")])
def test_a_run_written_to_yaml_reads_back_equal(task_id: str, section: str) -> None:
    spec = get_task(task_id)
    default: Any = spec.env_cfg() if section == "env" else spec.agent_cfg()
    if section == "env":
        randomization = dataclasses.replace(default.randomization, friction=None, kp_scale=(0.7, 1.3))
        trained = dataclasses.replace(default, num_envs=3, randomization=randomization)
    else:
        algorithm = dataclasses.replace(default.algorithm, schedule="fixed")
        trained = dataclasses.replace(default, max_iterations=9, algorithm=algorithm)
    assert update_dataclass(default, _as_written(trained)) == trained


def test_load_yaml_of_a_missing_or_non_mapping_file_is_empty(tmp_path: Path) -> None:
    assert load_yaml(tmp_path / "absent.yaml") == {}
    (tmp_path / "list.yaml").write_text("- 1\n")
    assert load_yaml(tmp_path / "list.yaml") == {}
