"""Each input is resolved once per ``train`` command: one ``--gpu-ids`` parse, one ``--stop-when`` parse, at most one
``scontrol`` run; checking ``--stop-when`` against a task's statistics builds no model."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import mujoco
import pytest

from mjfleet.cli import train
from mjfleet.rl.evaluation.stop_condition import StopCondition
from mjfleet.runtime import devices
from mjfleet.train import prepare

from .helpers import run_main, small_train_config


def _counting_scontrol(bin_dir: Path) -> Path:
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\nprintf "localhost\\n127.0.0.1\\n"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_one_parse_and_one_scontrol_per_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    bin_dir = _counting_scontrol(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-2]")
    calls = {"gpu": 0, "stop": 0}
    parse_gpu_ids, parse_stop = devices.parse_gpu_ids, StopCondition.parse.__func__  # type: ignore[attr-defined]

    def count_gpu(tokens: object) -> object:
        calls["gpu"] += 1
        return parse_gpu_ids(tokens)  # type: ignore[arg-type]

    def count_stop(cls: type[StopCondition], text: str) -> StopCondition:
        calls["stop"] += 1
        return parse_stop(cls, text)

    monkeypatch.setattr(devices, "parse_gpu_ids", count_gpu)
    monkeypatch.setattr(StopCondition, "parse", classmethod(count_stop))
    argv = ["cartpole-balance", "--gpu-ids", "None", "--stop-when", "success>=0.9", "--hostnames", "slurm"]
    code, out, err = run_main(train.main, [*argv, "--log-root", str(tmp_path / "logs"), "--dry-run"])
    assert code == 0, err
    assert "2 workers" in out or "on each of 2 hosts" in out
    assert calls == {"gpu": 1, "stop": 1}
    assert (bin_dir / "calls").read_text().splitlines() == ["show hostnames node[1-2]"]


def test_checking_stop_when_builds_no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("prepare() built a MuJoCo model")

    for builder in ("from_xml_path", "from_xml_string", "from_binary_path"):
        monkeypatch.setattr(mujoco.MjModel, builder, no_model)
    monkeypatch.setattr(mujoco.MjSpec, "compile", no_model)
    for task, condition in (
        ("go1-velocity-rough", "Metrics/terrain_level>3"),
        ("cartpole-balance", "Metrics/pole_up_fraction>0.9"),
    ):
        planned = prepare(small_train_config(task, log_root=tmp_path, stop_when=condition)).cfg.stop_when
        name, value = condition.split(">")
        assert planned == StopCondition(f"Eval_{name}", ">", float(value))  # read on the evaluation episodes


def test_a_run_whose_planned_directory_another_took_meanwhile_takes_the_next_name(tmp_path: Path) -> None:
    """Two members of a sweep planned in the same second, before either created its directory: the second was
    refused ("start again", exit 2, which a requeue policy does not retry)."""
    from mjfleet.errors import UsageError
    from mjfleet.runs.directory import create_run_dir, next_run_dir

    planned = next_run_dir(tmp_path, "sweep")
    assert create_run_dir(planned) == planned  # the first member
    assert create_run_dir(planned, movable=True) == planned.with_name(f"{planned.name}-1")
    with pytest.raises(UsageError, match="taken since it was planned"):  # a launch already logs into the planned path
        create_run_dir(planned)
    # The third member planned the first free name in that second (-1), which the second took since.
    third = planned.with_name(f"{planned.name}-1")
    assert create_run_dir(third, movable=True) == planned.with_name(f"{planned.name}-2")
    # A name whose end only looks like a suffix: a digit that is not ASCII (int() raised on it).
    (tmp_path / "odd" / "run").mkdir(parents=True)
    assert create_run_dir(tmp_path / "odd" / "run-\u00b2", movable=True) == tmp_path / "odd" / "run-\u00b2"


def test_a_launched_run_whose_planned_directory_another_took_meanwhile_takes_the_next_name_and_logs_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job array's members launched in the same second: the later one was refused (exit 2) because its launch plan
    already named worker logs under the planned path."""
    from mjfleet.train import run, supervisor

    prepared = prepare(small_train_config(log_root=tmp_path, cpu_workers=2))
    assert prepared.run is not None and prepared.launch_plan is not None
    planned = prepared.run.run_dir
    assert prepared.launch_plan.log_dir == planned / "torchrunx"
    planned.mkdir(parents=True)  # the other member's
    seen: dict[str, object] = {}

    def launched(cfg: object, run_dir: Path, plan: object, *rest: object) -> list[object]:
        seen.update(run_dir=run_dir, plan=plan)
        return []

    monkeypatch.setattr(supervisor, "supervise", launched)
    run(prepared)
    moved = planned.with_name(f"{planned.name}-1")
    assert seen["run_dir"] == moved and seen["plan"].log_dir == moved / "torchrunx"
