"""Unit tests for --gpu-ids parsing and device selection (simulated GPUs, no CUDA needed)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from mjfleet.errors import UsageError
from mjfleet.launch.launcher import LaunchPlan, resolve_worker_log_dir
from mjfleet.launch.worker_entry import _drop_console_handlers, failure_report
from mjfleet.runtime.context import DistributedContext, egl_device_id
from mjfleet.runtime.devices import DeviceSelection, parse_gpu_ids, select_devices, visible_gpus

MIG_A = "MIG-4f1b2c3d-1111-2222-3333-444455556666"
MIG_B = "MIG-9a8b7c6d-aaaa-bbbb-cccc-ddddeeeeffff"
GPU_UUID = "GPU-0e1f2a3b-4c5d-6e7f-8091-a2b3c4d5e6f7"


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (("0",), (0,)),
        (("0", "1"), (0, 1)),
        (("[0]",), (0,)),
        (("[0, 1]",), (0, 1)),
        (("[0,", "1]"), (0, 1)),
        (("0,1",), (0, 1)),
        ((" 3 ",), (3,)),
        (("2", "0"), (2, 0)),
        (("None",), None),
        (("none",), None),
        (("cpu",), None),
        (("CPU",), None),
        (("all",), "all"),
        (("auto",), "auto"),
        (("AUTO",), "auto"),
    ],
)
def test_parse_gpu_ids_accepts(tokens: tuple[str, ...], expected: object) -> None:
    assert parse_gpu_ids(tokens) == expected


@pytest.mark.parametrize(
    ("tokens", "fragment"),
    [
        ((), "needs a value"),
        (("",), "needs a value"),
        (("[]",), "lists no GPUs"),
        (("-1",), "negative"),
        (("0", "-2"), "negative"),
        (("0", "0"), "more than once"),
        (("[1, 1]",), "more than once"),
        (("x",), "not a GPU index"),
        (("1.5",), "not a GPU index"),
        (("0", "all"), "cannot be combined"),
        (("None", "0"), "cannot be combined"),
    ],
)
def test_parse_gpu_ids_rejects(tokens: tuple[str, ...], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment) as info:
        parse_gpu_ids(tokens)
    assert "\n" not in str(info.value)


def test_visible_gpus_without_cuda_visible_devices() -> None:
    assert visible_gpus({}, 3) == ["0", "1", "2"]
    assert visible_gpus({}, 0) == []


def test_visible_gpus_maps_cuda_visible_devices() -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, 2) == ["2", "3"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": f"{MIG_A},{MIG_B}"}, 2) == [MIG_A, MIG_B]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": GPU_UUID}, 1) == [GPU_UUID]
    # CUDA may expose fewer devices than listed (e.g. an invalid entry); only the count is real.
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "5,7,9"}, 2) == ["5", "7"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, 0) == []


def test_select_auto_with_and_without_cuda() -> None:
    sel = select_devices("auto", device_count=2, env={})
    assert sel == DeviceSelection(kind="cuda", devices=("cuda:0",), cuda_visible_devices="0", labels=("0",))
    assert sel.notice is None

    cpu = select_devices("auto", device_count=0, env={})
    assert cpu.kind == "cpu" and cpu.devices == ("cpu",)
    assert cpu.notice == "CUDA not available; running on the CPU"
    assert cpu.cuda_visible_devices == ""

    hidden = select_devices("auto", device_count=0, env={"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.notice is not None and "CUDA_VISIBLE_DEVICES=''" in hidden.notice


def test_select_cpu_hides_gpus_from_workers() -> None:
    sel = select_devices(None, device_count=4, env={})
    assert sel.kind == "cpu" and sel.devices == ("cpu",) and sel.num_gpus == 0
    assert sel.cuda_visible_devices == ""
    assert sel.describe() == "cpu"


def test_select_all() -> None:
    sel = select_devices("all", device_count=3, env={"CUDA_VISIBLE_DEVICES": "4,5,6"})
    assert sel.devices == ("cuda:0", "cuda:1", "cuda:2")
    assert sel.cuda_visible_devices == "4,5,6"
    assert sel.num_gpus == 3
    with pytest.raises(UsageError, match="no CUDA GPUs are visible"):
        select_devices("all", device_count=0, env={})


def test_select_explicit_ids_are_relative_to_cuda_visible_devices() -> None:
    sel = select_devices((1,), device_count=2, env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert sel.devices == ("cuda:1",)
    assert sel.cuda_visible_devices == "3"
    assert sel.describe() == "cuda:1 (physical 3)"

    reordered = select_devices((2, 0), device_count=3, env={})
    assert reordered.devices == ("cuda:2", "cuda:0")
    # Worker LOCAL_RANK k must see selected GPU k as cuda:k, so order is kept.
    assert reordered.cuda_visible_devices == "2,0"


def test_select_mig_and_gpu_uuids() -> None:
    env = {"CUDA_VISIBLE_DEVICES": f"{MIG_A},{MIG_B}"}
    sel = select_devices((1,), device_count=2, env=env)
    assert sel.cuda_visible_devices == MIG_B
    assert sel.describe() == f"cuda:1 ({MIG_B})"
    both = select_devices("all", device_count=2, env=env)
    assert both.cuda_visible_devices == f"{MIG_A},{MIG_B}"
    uuid = select_devices((0,), device_count=1, env={"CUDA_VISIBLE_DEVICES": GPU_UUID})
    assert uuid.cuda_visible_devices == GPU_UUID


def test_select_out_of_range_lists_visible_gpus() -> None:
    with pytest.raises(UsageError) as info:
        select_devices((3,), device_count=2, env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert str(info.value) == "GPU 3 is out of range; visible GPUs: 0 (physical 2), 1 (physical 3)"
    with pytest.raises(UsageError, match=r"GPUs 2, 5 are out of range; visible GPUs: 0, 1"):
        select_devices((0, 2, 5), device_count=2, env={})
    with pytest.raises(UsageError, match=rf"visible GPUs: 0 \({MIG_A}\)"):
        select_devices((1,), device_count=1, env={"CUDA_VISIBLE_DEVICES": MIG_A})


def test_select_gpu_ids_without_cuda() -> None:
    with pytest.raises(UsageError, match="no CUDA GPUs are visible; use --gpu-ids None"):
        select_devices((0,), device_count=0, env={})
    with pytest.raises(UsageError, match=r"CUDA_VISIBLE_DEVICES='-1'"):
        select_devices((0, 1), device_count=0, env={"CUDA_VISIBLE_DEVICES": "-1"})


def test_select_rejects_duplicates_and_empty() -> None:
    with pytest.raises(UsageError, match="more than once"):
        select_devices((0, 0), device_count=2, env={})
    with pytest.raises(UsageError, match="lists no GPUs"):
        select_devices((), device_count=2, env={})


def test_plan_from_selection() -> None:
    gpus = select_devices((0, 1), device_count=4, env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    plan = LaunchPlan.from_selection(gpus)
    assert (plan.device_kind, plan.workers_per_host, plan.hostnames) == ("cuda", 2, ("localhost",))
    assert plan.cuda_visible_devices == "4,5"
    assert plan.world_size == 2

    cpu = LaunchPlan.from_selection(select_devices(None, device_count=0, env={}), cpu_workers=3)
    assert (cpu.device_kind, cpu.workers_per_host, cpu.cuda_visible_devices) == ("cpu", 3, "")

    two_hosts = LaunchPlan.from_selection(gpus, hostnames=["a", "b"])
    assert two_hosts.world_size == 4
    assert two_hosts.locate(3) == ("b", 1)

    with pytest.raises(UsageError, match="2 CPU workers per host, but GPUs are selected"):
        LaunchPlan.from_selection(gpus, cpu_workers=2)
    with pytest.raises(UsageError, match="at least 1"):
        LaunchPlan.from_selection(select_devices(None, device_count=0, env={}), cpu_workers=0)
    with pytest.raises(UsageError, match="more than once"):
        LaunchPlan(device_kind="cpu", workers_per_host=1, hostnames=("a", "a"))


def test_resolve_worker_log_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert resolve_worker_log_dir(run, None, {}) == run / "torchrunx"
    assert resolve_worker_log_dir(run, "", {}) is None
    assert resolve_worker_log_dir(run, "/x/logs", {}) == Path("/x/logs")
    # The environment beats the flag, including an empty value that turns file logs off.
    assert resolve_worker_log_dir(run, "/x/logs", {"TORCHRUNX_LOG_DIR": "/env/logs"}) == Path("/env/logs")
    assert resolve_worker_log_dir(run, None, {"TORCHRUNX_LOG_DIR": ""}) is None
    assert resolve_worker_log_dir(run, "", {"TORCHRUNX_LOG_DIR": "/env"}) == Path("/env")


def test_context_from_env() -> None:
    single = DistributedContext.from_env("cpu", env={})
    assert single == DistributedContext()
    assert not single.is_distributed and single.is_main

    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}
    ctx = DistributedContext.from_env("cuda", env=env)
    assert (ctx.rank, ctx.local_rank, ctx.world_size, ctx.node_rank) == (3, 1, 4, 1)
    assert ctx.device == "cuda:1" and not ctx.is_main and ctx.is_distributed
    assert ctx.seed(10) == 13
    assert DistributedContext.from_env(env={**env, "MJFLEET_DEVICE_KIND": "cuda"}).device == "cuda:1"
    assert DistributedContext.from_env(env=env).device == "cpu"
    with pytest.raises(UsageError, match="RANK=4 is out of range for WORLD_SIZE=4"):
        DistributedContext.from_env("cpu", env={"RANK": "4", "WORLD_SIZE": "4"})


def test_egl_device_is_the_visible_gpu_index() -> None:
    env = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2", "RANK": "1"}
    assert egl_device_id(DistributedContext.from_env("cuda", env=env)) == "1"
    assert egl_device_id(DistributedContext(device="cuda")) == "0"
    assert egl_device_id(DistributedContext()) is None


def test_failure_report_classifies_peer_loss() -> None:
    try:
        raise ValueError("boom\nsecond line")
    except ValueError as exc:
        report = failure_report(exc)
    assert report["error"] == "ValueError: boom"
    assert report["kind"] == "failure" and not report["peer_failure"]
    assert any("raise ValueError" in line for line in report["traceback"])
    # Which errors are a lost peer: tests/test_rank_watch.py.
    import torch.distributed as dist

    assert failure_report(dist.DistNetworkError("Connection closed by peer"))["peer_failure"]


class _StderrLike(io.StringIO):
    def fileno(self) -> int:
        return 2


def test_worker_drops_console_handlers_that_would_loop(tmp_path: Path) -> None:
    root = logging.getLogger()
    console = logging.StreamHandler(_StderrLike())
    other = logging.StreamHandler(io.StringIO())  # No fileno: not a console, kept.
    to_file = logging.FileHandler(tmp_path / "x.log")
    for handler in (console, other, to_file):
        root.addHandler(handler)
    try:
        _drop_console_handlers()
        assert console not in root.handlers
        assert other in root.handlers and to_file in root.handlers
    finally:
        for handler in (console, other, to_file):
            root.removeHandler(handler)
        to_file.close()


def test_egl_device_follows_each_worker_unless_the_user_chose_one() -> None:
    from mjfleet.runtime.context import set_egl_device

    env: dict[str, str] = {}
    set_egl_device(DistributedContext(device="cuda:0"), env)  # in-process training on GPU 0
    assert env["MUJOCO_EGL_DEVICE_ID"] == "0"
    launched = dict(env)  # a later launch from the same process: workers inherit MUJOCO* and MJFLEET*
    set_egl_device(DistributedContext(device="cuda:1"), launched)
    assert launched["MUJOCO_EGL_DEVICE_ID"] == "1"
    chosen = {"MUJOCO_EGL_DEVICE_ID": "3"}
    set_egl_device(DistributedContext(device="cuda:1"), chosen)
    assert chosen == {"MUJOCO_EGL_DEVICE_ID": "3"}
    cpu: dict[str, str] = {}
    set_egl_device(DistributedContext(), cpu)
    assert cpu == {}


def test_workers_per_host_on_this_machine_alone_launches_them(tmp_path: Path) -> None:
    # --workers-per-host 2 without --hostnames trained one worker in-process, the flag silently ignored.
    from mjfleet.train.api import prepare

    from .helpers import small_train_config

    prepared = prepare(small_train_config(log_root=tmp_path, workers_per_host=2, dry_run=True))
    assert prepared.launch_plan is not None and prepared.launch_plan.workers_per_host == 2
    assert prepare(small_train_config(log_root=tmp_path, dry_run=True)).launch_plan is None


def test_fewer_workers_per_host_than_selected_gpus_on_one_machine_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # --gpu-ids 0 1 --workers-per-host 1 trained one worker in-process on GPU 0; the plan said two GPUs.
    from mjfleet.train import api

    from .helpers import small_train_config

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(api, "local_gpu_count", lambda: 2)
    cfg = small_train_config(log_root=tmp_path, gpu_ids=(0, 1), workers_per_host=1, dry_run=True)
    with pytest.raises(UsageError, match="--workers-per-host 1 would leave GPUs idle: --gpu-ids selects 2 GPUs"):
        api.prepare(cfg)
    plan = api.prepare(small_train_config(log_root=tmp_path, gpu_ids=(0, 1), workers_per_host=2)).launch_plan
    assert plan is not None and plan.workers_per_host == 2
