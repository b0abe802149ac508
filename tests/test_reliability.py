"""Long runs survive faults: real 2-worker CPU (gloo) runs that lose a worker, hang, or are interrupted.

Each test starts real launcher/agent/worker processes (tens of seconds each on a loaded 2-core machine), so the
configurations are tiny and each scenario is run once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from mjfleet.launch.launcher import WorkerFailure
from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.train import run

from .helpers import ONE_PASS_UPDATE, TOKEN_ENV, assert_no_processes_left, small_train_config
from .instruments import FAULT_ENV, instrument

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses process groups"),
]

TINY = ["--env.num-envs", "32", "--agent.num-steps-per-env", "8", *ONE_PASS_UPDATE]


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    """Tag every process a test starts, to prove none outlive it."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_ENV, value)
    monkeypatch.delenv("TORCHRUNX_LOG_DIR", raising=False)
    monkeypatch.delenv(FAULT_ENV, raising=False)
    return value


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_killed_worker_is_restarted_from_the_newest_checkpoint_of_the_same_run(
    tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rank 1 is SIGKILLed (no report, like the OOM killer) after iteration 3; model_2.pt is the newest checkpoint.
    instrument(monkeypatch, probes=True, fault="kill@1:3")
    cfg = small_train_config(num_envs=32, steps=8, iterations=6, log_root=tmp_path, cpu_workers=2, max_restarts=1)
    cfg.agent = dataclasses.replace(cfg.agent, save_interval=2)

    results = run(cfg)

    (run_dir,) = tmp_path.glob("*/*")
    assert [r.final_iteration for r in results] == [6, 6]  # the requested final iteration, not 2 + 6
    assert [r.iteration for r in results[0].records] == [3, 4, 5, 6]  # the restart ran only what was left
    assert results[0].extras["replica_digest"] == results[1].extras["replica_digest"]
    assert [i for i, _ in list_checkpoints(run_dir)] == [2, 4, 6]
    assert load_checkpoint(run_dir / "model_6.pt")["iter"] == 6
    (entry,) = (run_dir / "restarts.log").read_text().splitlines()
    assert "restart=1/1 rank=1 resume_iteration=2" in entry and f"checkpoint={run_dir / 'model_2.pt'}" in entry
    assert "died" in entry
    assert_no_processes_left(token)


def _log_time(log: Path, needle: str) -> float:
    for line in log.read_text().splitlines():
        if needle in line:
            return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    raise AssertionError(f"{needle!r} not in {log}")


@pytest.mark.parametrize("fault", ["hang", "freeze"])
def test_hung_worker_aborts_the_run_within_the_timeout_and_is_named(
    tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """``freeze``: SIGSTOPped, the rank could not answer torch's SIGTERM, which waits 30 s before its SIGKILL."""
    timeout_s = 8
    instrument(monkeypatch, fault=f"{fault}@1:2")  # rank 1 stops participating after iteration 2
    cfg = small_train_config(
        num_envs=32, steps=8, iterations=50, log_root=tmp_path, cpu_workers=2, collective_timeout_s=timeout_s
    )

    with pytest.raises(WorkerFailure) as info:
        run(cfg)
    aborted = time.time()

    failure = info.value
    assert failure.rank == 1 and failure.unresponsive_ranks == (1,)
    first_line = str(failure).splitlines()[0]
    assert "worker rank 1 (localhost, local rank 1) failed: stopped responding (last completed iteration 2" in (
        first_line
    )
    assert f"rank 0 timed out after {timeout_s} s" in first_line
    (rank0_log,) = tmp_path.glob("*/*/torchrunx/*/localhost[[]0[]].log")
    hung_at = _log_time(rank0_log, "it 2/50")
    assert aborted - hung_at < timeout_s + 20, f"aborted {aborted - hung_at:.0f} s after the hang"
    assert_no_processes_left(token)  # the sleeping or stopped rank was killed too


@pytest.mark.parametrize("how", ["ctrl-c", "scheduler"])
def test_ctrl_c_on_the_launcher_checkpoints_and_resume_continues(tmp_path: Path, token: str, how: str) -> None:
    """``ctrl-c``: SIGINT to the terminal's process group (the local agents have a session of their own);
    ``scheduler``: SIGTERM to every process of the launch inside a SLURM allocation, as preemption or scancel sends it
    (the agents and the workers died at once, and the run ended "failed" without the stop's checkpoint)."""
    cmd = [sys.executable, "-m", "mjfleet.cli.train", "cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "2"]
    cmd += [*TINY, "--agent.max-iterations", "100000", "--agent.save-interval", "100000", "--log-root", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, "TORCHRUNX_LOG_DIR")}
    if how == "scheduler":
        env["SLURM_JOB_ID"] = "4242"  # a batch script's own launch (not an srun step: train launches the workers)
    # Its own process group stands in for the terminal's foreground group: Ctrl-C signals every process in it.
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, start_new_session=True
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    stderr: list[str] = []
    deadline = time.monotonic() + 240
    try:
        while not any("it 2/" in line for line in stderr):
            assert time.monotonic() < deadline, "training did not reach iteration 2:\n" + "".join(stderr)
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            assert line is not None, "train exited early:\n" + "".join(stderr)
            stderr.append(line)
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            launch = psutil.Process(proc.pid)
            for each in [launch, *launch.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    each.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    while (line := lines.get(timeout=10)) is not None:
        stderr.append(line)
    output = "".join(stderr)

    signum = signal.SIGINT if how == "ctrl-c" else signal.SIGTERM
    assert proc.returncode == 128 + signum, output
    assert "Traceback" not in output
    (run_dir,) = tmp_path.glob("*/*")
    ((stopped_at, checkpoint),) = list_checkpoints(run_dir)  # only the checkpoint the stop wrote
    assert stopped_at >= 2
    assert f"stopped by {signum.name} at iteration {stopped_at} of " in _flat(output)
    assert f"checkpoint: {checkpoint}" in _flat(output)
    assert f"finish it: train cartpole-balance --finish {run_dir}" in _flat(output)
    assert_no_processes_left(token)

    resumed = run(small_train_config(num_envs=32, steps=8, iterations=2, log_root=tmp_path / "2", resume=run_dir))
    assert [r.iteration for r in resumed[0].records] == [stopped_at + 1, stopped_at + 2]


def test_a_full_disk_in_a_launched_run_exits_3_and_offers_to_finish_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0's disk fills after its first iteration: not restarted (it would fail the same way until space is freed),
    but the run is not over, and its ending says how to finish it, as in one process."""
    from mjfleet.cli import train

    from .helpers import run_main

    instrument(monkeypatch, fault="nospace@0:1")
    argv = ["cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "2", *TINY, "--agent.max-iterations", "4"]
    code, out, err = run_main(train.main, [*argv, "--agent.save-interval", "1", "--log-root", str(tmp_path)])
    assert code == 3, err
    (run_dir,) = tmp_path.glob("*/*")
    said = _flat(out + err)
    assert "cannot write checkpoint" in said and "No space left on device" in said
    assert f"finish it: train cartpole-balance --finish {run_dir}" in said
