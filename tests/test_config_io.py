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
from mjfleet.errors import UsageError
from mjfleet.runs.fingerprint import recorded_values
from mjfleet.tasks.registry import all_tasks, get_task
from mjfleet.train.config import TrainConfig


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


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"sizes": "3 4"}, "sizes is '3 4', not tuple[int, ...]"),
        ({"sizes": [3, "4"]}, "sizes is [3, '4'], not tuple[int, ...]"),
        ({"inner": {"span": [0.5]}}, "inner.span is [0.5], not tuple[float, float] | None"),
        ({"inner": {"mode": "c"}}, "inner.mode is 'c', not one of 'a', 'b'"),
        ({"inner": 3}, "inner is 3, not Inner"),
        ({"name": 5}, "name is 5, not str"),
        ({"out": 1.5}, "out is 1.5, not Path | None"),
    ],
)
def test_a_value_its_field_does_not_admit_is_refused_naming_the_file_and_setting(
    values: dict[str, Any], said: str
) -> None:
    with pytest.raises(UsageError) as caught:
        update_dataclass(Outer(), values, "run/params/env.yaml")
    assert str(caught.value) == f"run/params/env.yaml: {said}"


@dataclass
class Numbers:
    count: int = 1
    scale: float = 1.0
    flag: bool = False


def test_integers_are_floats_but_booleans_are_neither() -> None:
    assert update_dataclass(Numbers(), {"scale": 2}).scale == 2
    for name in ("count", "scale"):
        with pytest.raises(UsageError, match=f"{name} is True"):
            update_dataclass(Numbers(), {name: True})
    with pytest.raises(UsageError, match="flag is 1, not bool"):
        update_dataclass(Numbers(), {"flag": 1})


@pytest.mark.parametrize("task_id", sorted(all_tasks()))
def test_every_tasks_settings_written_to_yaml_read_back_without_complaint(task_id: str) -> None:
    spec = get_task(task_id)
    for group, default in (("env", spec.env_cfg()), ("agent", spec.agent_cfg())):
        assert update_dataclass(default, _as_written(default)) == default
        update_dataclass(default, recorded_values({}, group))  # a run from before every ADDED setting
    config = TrainConfig(env=spec.env_cfg(), agent=spec.agent_cfg(), task=task_id)
    run_values = {k: v for k, v in _as_written(config).items() if k not in ("env", "agent", "stop_when")}
    assert update_dataclass(config, run_values) == config
