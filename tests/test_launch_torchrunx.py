"""End-to-end launch tests: real torchrunx agents and CPU (gloo) workers on this machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import cloudpickle
import psutil
import pytest
import torch
import torch.distributed as dist

from mjfleet.launch.launcher import LaunchPlan, WorkerFailure, launch, resolve_worker_log_dir
from mjfleet.launch.worker_entry import write_heartbeat
from mjfleet.runtime.context import DistributedContext, process_group
from mjfleet.runtime.devices import select_devices

from .helpers import TOKEN_ENV, assert_no_processes_left, processes_with_token

# Workers unpickle the test functions; pytest's module name is not importable there.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process handling (prctl, sessions)"),
]

REPO = Path(__file__).resolve().parents[1]


# --- worker functions (run inside launched workers) ----------------------------------------------


def ranks_and_sum(scale: float) -> dict[str, Any]:
    """Join the group, all-reduce ``(rank + 1) * scale`` and report what this worker saw."""
    ctx = DistributedContext.from_env()
    with process_group(ctx):
        value = torch.tensor([(ctx.rank + 1) * scale])
        dist.all_reduce(value)
        print(f"hello from rank {ctx.rank}")
        write_heartbeat(ctx.rank, 7)
        return {
            "rank": ctx.rank,
            "local_rank": ctx.local_rank,
            "node_rank": ctx.node_rank,
            "world_size": ctx.world_size,
            "sum": value.item(),
            "env": {
                k: os.environ.get(k)
                for k in ("MJFLEET_TEST_VAR", "WANDB_MODE", "CUDA_VISIBLE_DEVICES", "MJFLEET_DEVICE_KIND")
            },
        }


def fail_on_rank_one() -> None:
    """Rank 1 raises while rank 0 blocks in a collective that can never complete."""
    ctx = DistributedContext.from_env()
    with process_group(ctx):
        if ctx.rank == 1:
            time.sleep(0.5)
            raise ValueError("rank one exploded")
        dist.all_reduce(torch.ones(1))


def segfault_on_rank_one() -> None:
    """Rank 1 dies from a native crash (no Python exception to report)."""
    ctx = DistributedContext.from_env()
    with process_group(ctx):
        if ctx.rank == 1:
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGSEGV)
        dist.all_reduce(torch.ones(1))


# --- helpers ---------------------------------------------------------------------------------------


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    """Tag every process a test starts, to prove none outlive it."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_ENV, value)
    return value


def cpu_plan(workers: int, **kwargs: Any) -> LaunchPlan:
    selection = select_devices(None, device_count=0, env={})
    return LaunchPlan.from_selection(selection, cpu_workers=workers, **kwargs)


# --- tests -------------------------------------------------------------------------------------------


def test_two_workers_all_reduce_env_and_logs(tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MJFLEET_TEST_VAR", "hello")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("TORCHRUNX_LOG_DIR", raising=False)
    log_dir = resolve_worker_log_dir(tmp_path / "run", None, os.environ)
    assert log_dir == tmp_path / "run" / "torchrunx"

    results = launch(ranks_and_sum, 2.0, plan=cpu_plan(2, log_dir=log_dir))

    assert [r["rank"] for r in results] == [0, 1]
    assert [r["local_rank"] for r in results] == [0, 1]
    assert all(r["world_size"] == 2 and r["sum"] == 6.0 for r in results)
    for r in results:
        assert r["env"] == {
            "MJFLEET_TEST_VAR": "hello",
            "WANDB_MODE": "offline",
            "CUDA_VISIBLE_DEVICES": "",
            "MJFLEET_DEVICE_KIND": "cpu",
        }
    (run_logs,) = log_dir.iterdir()
    assert sorted(p.name for p in run_logs.iterdir()) == ["localhost.log", "localhost[0].log", "localhost[1].log"]
    assert "hello from rank 1" in (run_logs / "localhost[1].log").read_text()
    assert "hello from rank 0" in (run_logs / "localhost[0].log").read_text()
    # Started and heartbeat reports are bookkeeping for the launcher, not log lines.
    assert not any("mjfleet.launch.reports" in log.read_text() for log in run_logs.iterdir())
    assert processes_with_token(token) == []


def test_two_hosts_without_log_files(tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # torchrunx treats every name for this machine as local, so no SSH is involved.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHRUNX_LOG_DIR", "")
    log_dir = resolve_worker_log_dir(tmp_path / "run", "ignored", os.environ)
    assert log_dir is None

    results = launch(ranks_and_sum, 1.0, plan=cpu_plan(1, hostnames=["localhost", "127.0.0.1"], log_dir=log_dir))

    assert [(r["rank"], r["local_rank"], r["node_rank"]) for r in results] == [(0, 0, 0), (1, 0, 1)]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert list(tmp_path.iterdir()) == []
    assert processes_with_token(token) == []


def test_raising_worker_fails_fast_with_rank_and_log(tmp_path: Path, token: str) -> None:
    plan = cpu_plan(2, log_dir=tmp_path / "logs", worker_timeout_s=600)
    start = time.monotonic()
    with pytest.raises(WorkerFailure) as info:
        launch(fail_on_rank_one, plan=plan)
    elapsed = time.monotonic() - start

    failure = info.value
    assert elapsed < 60
    assert failure.rank == 1
    assert failure.error == "ValueError: rank one exploded"
    first_line = str(failure).splitlines()[0]
    assert first_line.startswith("worker rank 1 (localhost, local rank 1) failed: ValueError: rank one exploded")
    assert failure.log_path is not None and str(failure.log_path) in first_line
    assert failure.log_path.name == "localhost[1].log"
    assert "rank one exploded" in failure.log_path.read_text()
    # The failing frame, named. Not its source line: cloudpickle 3.1.3 (not 3.1.2) gives the code of this test
    # module's function the file name "<dynamic-code>" in the worker, where no source can be found.
    assert any("in fail_on_rank_one" in line for line in failure.details), failure.details
    assert processes_with_token(token) == []


def test_crashing_worker_is_named_by_pid(tmp_path: Path, token: str) -> None:
    with pytest.raises(WorkerFailure) as info:
        launch(segfault_on_rank_one, plan=cpu_plan(2, log_dir=tmp_path / "logs"))
    failure = info.value
    assert failure.rank == 1
    assert "Segmentation fault" in failure.error
    assert any("Segmentation fault" in line for line in failure.details)
    assert processes_with_token(token) == []


LAUNCHER_SCRIPT = textwrap.dedent(
    """
    import logging, os, sys, time
    from pathlib import Path
    from mjfleet.launch.launcher import LaunchPlan, launch

    def work(mode, marker_dir):
        Path(marker_dir, f"rank{os.environ['RANK']}.pid").write_text(str(os.getpid()))
        if mode == "sleep":
            time.sleep(300)
        return int(os.environ["RANK"])

    if __name__ == "__main__":
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
        mode, marker_dir = sys.argv[1], sys.argv[2]
        plan = LaunchPlan(device_kind="cpu", workers_per_host=2, log_dir=None)
        print("RESULT", launch(work, mode, marker_dir, plan=plan), flush=True)
    """
)


def run_launcher_script(tmp_path: Path, mode: str, token: str) -> subprocess.Popen[str]:
    script = tmp_path / "launcher_script.py"
    script.write_text(LAUNCHER_SCRIPT)
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, TOKEN_ENV: token}
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(markers)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_success_leaves_console_clean(tmp_path: Path, token: str) -> None:
    proc = run_launcher_script(tmp_path, "return", token)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert "RESULT [0, 1]" in output
    assert "SignalException" not in output
    assert "Traceback" not in output
    assert "ERROR" not in output
    assert processes_with_token(token) == []


def test_sigterm_stops_every_worker(tmp_path: Path, token: str) -> None:
    proc = run_launcher_script(tmp_path, "sleep", token)
    markers = tmp_path / "markers"
    deadline = time.monotonic() + 45
    while len(list(markers.glob("*.pid"))) < 2:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.2)
    worker_pids = [int(p.read_text()) for p in markers.glob("*.pid")]
    assert all(psutil.pid_exists(pid) for pid in worker_pids)

    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=45)
    assert proc.returncode != 0
    assert "RESULT [" not in output
    assert_no_processes_left(token, context=output)


def test_a_workers_records_reach_the_console_as_an_in_process_runs_would(caplog: pytest.LogCaptureFixture) -> None:
    """torchrunx forwards them under its own name with the worker's logger in front (`mjfleet.rl.runner:it 1/2`,
    printed so), and every library's notes at INFO (OpenGL's on its accelerator module)."""
    import logging

    from mjfleet.launch.worker_logs import _Echo  # pyright: ignore[reportPrivateUsage]

    def forwarded(name: str, level: int, msg: str) -> logging.LogRecord:
        return logging.makeLogRecord(
            {"name": "torchrunx.localhost.0", "levelno": level, "levelname": logging.getLevelName(level),
             "msg": f"{name}:{msg}", "hostname": "localhost", "local_rank": 0}
        )  # fmt: skip

    echo = _Echo()
    # mjfleet's level as the console sets it (another test may have left it otherwise)
    with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="mjfleet"):
        echo.handle(forwarded("mjfleet.rl.runner", logging.INFO, "it 1/2 | 0:00"))
        echo.handle(forwarded("OpenGL.acceleratesupport", logging.INFO, "No OpenGL_accelerate module loaded"))
        echo.handle(forwarded("py.warnings", logging.WARNING, "something to know"))
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("mjfleet.rl.runner", "it 1/2 | 0:00"),
        ("torchrunx.localhost.0", "py.warnings:something to know"),
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mjfleet"):  # as bench sets it: its workers' progress stays off
        echo.handle(forwarded("mjfleet.rl.runner", logging.INFO, "it 2/2 | 0:01"))
    assert not caplog.records
