"""skrl's learners on several real worker processes (gloo on the CPU): mjfleet's own launcher (``--cpu-workers 2``)
and torchrun. The replicas stay identical (skrl's gradient all-reduce on mjfleet's process group, the synchronised
normalisers, SAC's averaged entropy coefficient), every rank loads a resumed checkpoint, and a checkpoint resumes on
another number of workers."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.train import run
from mjfleet.train.worker import WorkerResult

from .helpers import assert_no_processes_left, launcher_free_env
from .instruments import instrument
from .test_skrl_training import skrl_config

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
AGENT_TIMEOUT_S = 600
"""Generous: on a machine whose cores other work keeps busy, the launcher's agent answers late, and these tests are
about the learners, not about the agent's timeout."""


def _runs(log_root: Path) -> list[Path]:
    return sorted(p for p in log_root.glob("*/*") if p.is_dir())


@pytest.fixture(scope="module", params=["skrl-ppo", "skrl-sac", "fast-td3"])
def two_worker_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[WorkerResult]]:
    """One 2-worker run of each learner, shared by the checks below."""
    log_root = tmp_path_factory.mktemp("logs")
    cfg = skrl_config(request.param, num_envs=64, iterations=3, steps=16, log_root=log_root, cpu_workers=2)
    cfg.agent_timeout_s = AGENT_TIMEOUT_S
    cfg.agent.save_interval = 2
    os.environ.pop("TORCHRUNX_LOG_DIR", None)
    with pytest.MonkeyPatch.context() as mp:
        instrument(mp, probes=True)  # digests in WorkerResult.extras
        return log_root, run(cfg)


def test_two_workers_train_one_run_and_stay_replicated(two_worker_run: tuple[Path, list[WorkerResult]]) -> None:
    log_root, results = two_worker_run
    assert [r.rank for r in results] == [0, 1]
    assert [r.final_iteration for r in results] == [3, 3]
    probes = [r.extras for r in results]
    assert probes[0]["replica_digest"] == probes[1]["replica_digest"]  # weights, normalisers, optimizers: identical
    assert probes[0]["first_rollout_digest"] != probes[1]["first_rollout_digest"]  # each rank its own experience
    for r0, r1 in zip(results[0].records, results[1].records, strict=True):
        assert r0.episode == r1.episode  # every rank logs the episode means over both ranks
    [run_dir] = _runs(log_root)
    assert [i for i, _ in list_checkpoints(run_dir)] == [2, 3]  # rank 0 alone writes
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    worker_logs = "".join(p.read_text() for p in (run_dir / "torchrunx").rglob("*.log"))
    assert "replicas identical on all 2 ranks at iteration 3" in worker_logs


# Loading on every rank is the runner's, whichever the learner: two learners' checkpoints show it (a learner's own
# state comes back whole in tests/test_skrl_training.py's digest check).
@pytest.mark.parametrize("two_worker_run", ["skrl-ppo", "skrl-sac"], indirect=True)
def test_every_rank_loads_the_checkpoint_and_the_run_continues_replicated(
    two_worker_run: tuple[Path, list[WorkerResult]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instrument(monkeypatch, probes=True)
    log_root, _ = two_worker_run
    [run_dir] = _runs(log_root)
    learner = load_checkpoint(run_dir / "model_3.pt")["learner"]
    cfg = skrl_config(learner, num_envs=64, iterations=1, steps=16, log_root=tmp_path, cpu_workers=2, resume=run_dir)
    cfg.agent_timeout_s = AGENT_TIMEOUT_S
    results = run(cfg)
    assert [r.records[0].iteration for r in results] == [4, 4]
    assert results[0].extras["replica_digest"] == results[1].extras["replica_digest"]

    # The same checkpoint on one worker: it takes saved rank 0's state and goes on.
    alone = run(skrl_config(learner, num_envs=64, iterations=1, steps=16, log_root=tmp_path / "one", resume=run_dir))
    assert [r.iteration for r in alone[0].records] == [4]


def test_torchrun_ranks_train_td3_on_the_workers_group(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    argv = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", "--no_python", str(BIN / "train")]
    argv += ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.num-steps-per-env", "16"]
    argv += ["--agent.learner", "skrl-td3", "--agent.td3.batch-size", "64", "--agent.td3.gradient-steps", "4"]
    argv += ["--agent.max-iterations", "3", "--log-root", str(tmp_path / "logs"), "--no-init-at-random-ep-len"]
    done = subprocess.run(argv, env=launcher_free_env(token), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torchrun started 2 ranks on 1 node" in done.stderr
    assert "replicas identical on all 2 ranks at iteration 3" in done.stderr
    assert done.stderr.count("it 3/3") == 1  # rank 0 speaks for the job
    [run_dir] = _runs(tmp_path / "logs")
    assert load_checkpoint(run_dir / "model_3.pt")["learner"] == "skrl-td3"
    assert_no_processes_left(token)
