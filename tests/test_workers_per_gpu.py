"""``--workers-per-gpu N``: N workers share each selected GPU (plan, devices, backend, checks), with fake GPU counts.

Nothing is launched here; the real two-workers-on-one-GPU run is in ``tests/gpu/`` (``pytest -m gpu``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mjfleet.cli import train
from mjfleet.errors import UsageError
from mjfleet.launch.launcher import LaunchPlan, _worker_env
from mjfleet.runtime.context import WORKERS_PER_DEVICE_ENV, DistributedContext, egl_device_id
from mjfleet.runtime.devices import select_devices
from mjfleet.train import api, prepare
from mjfleet.train.own_launcher import describe_plan

from .helpers import run_main, small_train_config


def _gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Pretend this machine has ``count`` GPUs."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(api, "local_gpu_count", lambda: count)


def _worker_envs(world: int, per_device: int) -> list[dict[str, str]]:
    return [
        {
            "RANK": str(r),
            "LOCAL_RANK": str(r),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "MJFLEET_DEVICE_KIND": "cuda",
            WORKERS_PER_DEVICE_ENV: str(per_device),
        }
        for r in range(world)
    ]


def test_plan_puts_n_workers_on_each_gpu(tmp_path: Path) -> None:
    two = select_devices((0, 1), device_count=2, env={"CUDA_VISIBLE_DEVICES": "4,5"})
    plan = LaunchPlan.from_selection(two, workers_per_gpu=3)
    assert (plan.workers_per_host, plan.world_size, plan.workers_per_device) == (6, 6, 3)
    assert plan.cuda_visible_devices == "4,5"
    env = _worker_env(plan, tmp_path, None)
    assert env[WORKERS_PER_DEVICE_ENV] == "3" and env["CUDA_VISIBLE_DEVICES"] == "4,5"
    # Consecutive local ranks share a GPU, so a host's GPUs fill one after the other.
    contexts = [DistributedContext.from_env(env=e) for e in _worker_envs(6, 3)]
    assert [c.device for c in contexts] == ["cuda:0"] * 3 + ["cuda:1"] * 3
    assert {c.backend for c in contexts} == {"gloo"}
    assert [egl_device_id(c) for c in contexts] == ["0"] * 3 + ["1"] * 3
    # One worker per GPU keeps NCCL, and says so to the workers (an inherited variable must not leak in).
    single = LaunchPlan.from_selection(two)
    assert _worker_env(single, tmp_path, None)[WORKERS_PER_DEVICE_ENV] == "1"
    assert [c.backend for c in (DistributedContext.from_env(env=e) for e in _worker_envs(2, 1))] == ["nccl"] * 2
    assert DistributedContext.from_env("cpu", env=_worker_envs(2, 2)[1]).backend == "gloo"
    assert WORKERS_PER_DEVICE_ENV not in _worker_env(
        LaunchPlan.from_selection(select_devices(None, device_count=0, env={})), tmp_path, None
    )


def test_plan_rejects_impossible_sharing() -> None:
    one = select_devices((0,), device_count=1, env={})
    cpu = select_devices(None, device_count=1, env={})
    with pytest.raises(UsageError, match="only 1 GPUs x 2 workers each"):
        LaunchPlan(device_kind="cuda", workers_per_host=3, cuda_visible_devices="0", workers_per_device=2)
    with pytest.raises(UsageError, match="needs GPUs"):
        LaunchPlan.from_selection(cpu, workers_per_gpu=2)
    with pytest.raises(UsageError, match="at least 1"):
        LaunchPlan.from_selection(one, workers_per_gpu=0)
    with pytest.raises(RuntimeError, match="at least 1"):
        DistributedContext.from_env(env={**_worker_envs(1, 1)[0], WORKERS_PER_DEVICE_ENV: "0"})


def test_prepare_and_dry_run_show_the_shared_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _gpus(monkeypatch, 1)
    cfg = small_train_config(num_envs=8, steps=4, log_root=tmp_path / "logs", gpu_ids=(0,), workers_per_gpu=2)
    prepared = prepare(cfg)
    assert prepared.launch_plan is not None, "two workers on one GPU are launched"
    assert (prepared.launch_plan.world_size, prepared.launch_plan.workers_per_device) == (2, 2)
    assert describe_plan(cfg, prepared.launch_plan, prepared.selection) == (
        "launch plan: 2 workers (cuda:0; 2 workers per GPU, gloo collectives), 8 envs per worker,"
        " 64 env-steps per iteration in total"
    )
    argv = ["cartpole-balance", "--gpu-ids", "0", "--workers-per-gpu", "2", "--env.num-envs", "8"]
    code, out, err = run_main(train.main, [*argv, "--log-root", str(tmp_path / "logs"), "--dry-run"])
    assert code == 0, err
    assert "2 workers per GPU, gloo collectives" in " ".join(out.split())
    assert not (tmp_path / "logs").exists(), "--dry-run creates nothing"
    # One worker per GPU stays in-process, as before.
    assert prepare(small_train_config(log_root=tmp_path / "logs", gpu_ids=(0,))).launch_plan is None


@pytest.mark.parametrize(
    ("gpus", "argv", "message"),
    [
        (1, ["--gpu-ids", "0", "--workers-per-gpu", "0"], "--workers-per-gpu must be at least 1 (got 0)"),
        (1, ["--gpu-ids", "0", "--workers-per-gpu", "65"], "--workers-per-gpu must be at most 64 (got 65)"),
        (1, ["--gpu-ids", "None", "--workers-per-gpu", "2"], "--workers-per-gpu 2 needs GPUs, but --gpu-ids None"),
        (0, ["--gpu-ids", "auto", "--workers-per-gpu", "2"], "needs GPUs, but this run trains on the CPU (CUDA not"),
        (1, ["--gpu-ids", "0", "--workers-per-gpu", "2", "--cpu-workers", "2"], "--cpu-workers applies to CPU"),
    ],
)
def test_bad_workers_per_gpu_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: int, argv: list[str], message: str
) -> None:
    _gpus(monkeypatch, gpus)
    code, _, err = run_main(train.main, ["cartpole-balance", *argv, "--log-root", str(tmp_path), "--dry-run"])
    assert code == 2 and err.count("\n") == 1, err
    assert message in err


@pytest.mark.parametrize(
    ("workers", "per_gpu", "first_gpu", "expected"),
    [(1, 1, 2, (2,)), (2, 1, 2, (2, 3)), (2, 2, 1, (1,)), (4, 2, 0, (0, 1))],
)
def test_bench_training_rows_start_at_the_measured_gpu(
    workers: int, per_gpu: int, first_gpu: int, expected: tuple[int, ...]
) -> None:
    from mjfleet.cli.bench import BenchConfig, _train_config

    cfg = BenchConfig(gpu_ids=(first_gpu,), workers_per_gpu=per_gpu)
    row = _train_config("cartpole-balance", cfg, "cuda", workers, True, "warp", first_gpu)
    assert row.gpu_ids == expected and row.workers_per_gpu == min(workers, per_gpu)
