"""Multi-worker training through torchrunx with real CPU worker processes (gloo)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mjfleet.envs.episode_stats import EpisodeStats
from mjfleet.rl.checkpoint.files import list_checkpoints
from mjfleet.train import run
from mjfleet.train.worker import WorkerResult

from .helpers import TOKEN_ENV, assert_no_processes_left, small_train_config
from .instruments import instrument, instrument_env

pytestmark = pytest.mark.slow


def _runs(log_root: Path) -> list[Path]:
    return sorted(p for p in log_root.glob("*/*") if p.is_dir())


@pytest.fixture(scope="module")
def two_worker_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[WorkerResult]]:
    """One 2-worker run shared by the checks below (a launch costs seconds on a 2-core machine).

    It is asked for 16 iterations but ends earlier through ``--stop-when``: one evaluation episode suffices for the
    window, so "length >= 0" holds from the first iteration that ends one (on either rank), and 11 in a row are
    required; both ranks must reach that verdict at the same iteration (from the all-reduced sums), or one would
    wait for the other in a collective.
    """
    log_root = tmp_path_factory.mktemp("logs")
    cfg = small_train_config(
        num_envs=128,
        iterations=16,
        full_update=True,
        steps=32,
        log_root=log_root,
        cpu_workers=2,
        init_at_random_ep_len=True,
        stop_when="length>=0",
        stop_when_iterations=11,
    )
    cfg.agent.save_interval = 6
    cfg.agent.eval_envs, cfg.agent.eval_episodes = 32, 1
    os.environ.pop("TORCHRUNX_LOG_DIR", None)
    with pytest.MonkeyPatch.context() as mp:
        instrument(mp, probes=True)  # digests and per-rank sums in WorkerResult.extras
        return log_root, run(cfg)


def test_two_workers_learn_and_stay_replicated(two_worker_run: tuple[Path, list[WorkerResult]]) -> None:
    _, results = two_worker_run
    assert [r.rank for r in results] == [0, 1]
    probes = [r.extras for r in results]
    assert probes[0]["replica_digest"] == probes[1]["replica_digest"]  # parameters + optimizer, bit-identical
    assert probes[0]["first_rollout_digest"] != probes[1]["first_rollout_digest"]  # seeds differ per rank
    returns = [r.episode["Episode/return"] for r in results[0].records if "Episode/return" in r.episode]
    assert sum(returns[-3:]) / 3 > sum(returns[:3]) / 3 + 0.5, returns
    first = next(r.iteration for r in results[0].records if r.evaluation_episodes)
    assert results[0].final_iteration == results[1].final_iteration == first + 10 < 16
    assert [r.condition_met_at for r in results] == [first + 10] * 2  # both stopped on --stop-when


def test_single_writer_run_directory(two_worker_run: tuple[Path, list[WorkerResult]]) -> None:
    log_root, results = two_worker_run
    runs = _runs(log_root)
    assert len(runs) == 1
    run_dir = runs[0]
    assert sorted(p.name for p in (run_dir / "params").iterdir()) == ["agent.yaml", "env.yaml", "run.yaml"]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert [i for i, _ in list_checkpoints(run_dir)] == [6, results[0].final_iteration]
    logs = sorted(p.name for p in (run_dir / "torchrunx").rglob("*.log"))
    assert "localhost[0].log" in logs and "localhost[1].log" in logs


def test_logged_statistics_are_the_mean_over_all_ranks(two_worker_run: tuple[Path, list[WorkerResult]]) -> None:
    _, results = two_worker_run
    keys = None
    checked = 0
    r0, r1 = results
    local0 = zip(r0.extras["local_sums"], r0.extras["local_counts"], strict=True)  # this rank's, before reduction
    local1 = zip(r1.extras["local_sums"], r1.extras["local_counts"], strict=True)
    for rec0, rec1, (sums0, counts0), (sums1, counts1) in zip(r0.records, r1.records, local0, local1, strict=True):
        assert rec0.episode == rec1.episode  # every rank logs the same reduced numbers
        assert (rec0.evaluation, rec0.evaluation_episodes) == (rec1.evaluation, rec1.evaluation_episodes)
        if keys is None:
            from mjfleet.tasks.registry import get_task

            from .conftest import make_env

            keys = make_env(num_envs=2).stats.keys
            assert get_task("cartpole-balance")
        sums = [a + b for a, b in zip(sums0, sums1, strict=True)]
        counts = [a + b for a, b in zip(counts0, counts1, strict=True)]
        import torch

        expected = EpisodeStats.means(keys, torch.tensor(sums), torch.tensor(counts))
        assert rec0.episode == pytest.approx(expected)
        rank0_only = EpisodeStats.means(keys, torch.tensor(sums0), torch.tensor(counts0))
        if counts1[0] > 0 and rank0_only.get("Episode/return") != expected.get("Episode/return"):
            checked += 1
    assert checked > 0, "rank 1's episodes never changed the logged means"


def test_resume_two_workers_continues_and_stays_replicated(
    two_worker_run: tuple[Path, list[WorkerResult]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instrument(monkeypatch, probes=True)
    # The same launch checks where worker logs go: $TORCHRUNX_LOG_DIR beats --torchrunx-log-dir.
    env_dir, flag_dir = tmp_path / "from_env", tmp_path / "from_flag"
    monkeypatch.setenv("TORCHRUNX_LOG_DIR", str(env_dir))
    log_root, first = two_worker_run
    run_dir = _runs(log_root)[0]
    cfg = small_train_config(
        num_envs=128,
        iterations=2,
        steps=32,
        log_root=tmp_path / "logs",
        cpu_workers=2,
        resume=run_dir,
        torchrunx_log_dir=str(flag_dir),
    )
    results = run(cfg)
    stopped = first[0].final_iteration
    assert [r.iteration for r in results[0].records] == [stopped + 1, stopped + 2]
    assert results[0].extras["replica_digest"] == results[1].extras["replica_digest"]
    new_run = _runs(tmp_path / "logs")[0]
    assert [i for i, _ in list_checkpoints(new_run)] == [stopped + 1, stopped + 2]
    assert list(env_dir.rglob("localhost[[]1[]].log"))
    assert not flag_dir.exists()
    assert not (new_run / "torchrunx").exists()


def test_failing_worker_stops_the_run_quickly_and_names_the_rank(tmp_path: Path) -> None:
    token = f"fault-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, **instrument_env(fault="raise@1:2"), TOKEN_ENV: token}
    env.pop("TORCHRUNX_LOG_DIR", None)
    cmd = [sys.executable, "-m", "mjfleet.cli.train", "cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "2"]
    cmd += ["--env.num-envs", "32", "--agent.num-steps-per-env", "8", "--agent.max-iterations", "50"]
    cmd += ["--log-root", str(tmp_path)]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    said = " ".join(proc.stderr.split())
    # The headline names the last iteration rank 0 logged (the fault came after rank 1's second) and the rank.
    assert re.search(
        r"failed at iteration \d+ of 50: worker rank 1 \(localhost, local rank 1\) failed: InjectedFaultError:"
        r" injected fault on rank 1",
        said,
    ), said
    run_dir = _runs(tmp_path)[0]
    assert str(run_dir / "torchrunx") in proc.stderr.replace("\n", "").replace(" ", "") or "localhost[1].log" in (
        proc.stderr
    )
    assert elapsed < 60 + 30, f"took {elapsed:.0f}s"  # 30 s of start-up and compilation on a slow machine
    assert_no_processes_left(token, wait_s=1.0, context="worker processes were left behind")
