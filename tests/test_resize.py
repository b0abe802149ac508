"""Resuming a checkpoint on another number of workers: the per-rank restore rule, real 1 -> 2 -> 1 resumes,
and restarts that relaunch every host."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from mjfleet.cluster.hosts import HostError
from mjfleet.envs.env import MjEnv
from mjfleet.launch.launcher import LaunchPlan, WorkerFailure
from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.rl.checkpoint.rank_state import capture_rank_state, restore_rank_state, restore_shared_state
from mjfleet.rl.evaluation.simulation import SeparateEvaluation
from mjfleet.rl.runner import Runner
from mjfleet.runs.start import StartPoint
from mjfleet.runtime.context import DistributedContext
from mjfleet.tasks.locomotion.task import LocomotionTask
from mjfleet.train import run, supervisor
from mjfleet.train.config import TrainConfig
from mjfleet.train.worker import train_worker

from .helpers import make_run_dir, small_train_config
from .instruments import instrument
from .test_locomotion import make_loco_env

# --- the rule, on a stand-in environment ----------------------------------------------------------------------------


class _CurriculumTask:
    """A task with per-environment curriculum levels, like the rough-terrain locomotion tasks."""

    def __init__(self, num_envs: int) -> None:
        self.levels = torch.zeros(num_envs, dtype=torch.long)

    def state_dict(self) -> dict[str, Any]:
        return {"terrain_levels": self.levels.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.levels.copy_(state["terrain_levels"])


class _Env:
    """What :mod:`mjfleet.rl.checkpoint.rank_state` reads and writes of an :class:`MjEnv`."""

    def __init__(self, seed: int, num_envs: int = 4) -> None:
        self.device = torch.device("cpu")
        self.generator = torch.Generator().manual_seed(seed)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.common_step_counter = 0
        self.task = _CurriculumTask(num_envs)

    def reset_all(self) -> None:  # the worlds follow the restored task state (nothing to place here)
        pass


def _saved_rank(rank: int, num_envs: int = 4, evaluation_level: int | None = None) -> dict[str, Any]:
    """Rank ``rank`` of a run that trained for a while: advanced RNGs, counters and curriculum levels (with
    ``evaluation_level``: also 2 evaluation environments of their own simulation at that level)."""
    evaluation = None
    if evaluation_level is not None:
        evaluation = _Env(seed=100 + rank, num_envs=2)
        evaluation.task.levels.fill_(evaluation_level)
    torch.manual_seed(1000 + rank)
    env = _Env(seed=rank, num_envs=num_envs)
    torch.rand(7, generator=env.generator)
    env.episode_length_buf.copy_(torch.arange(num_envs) + 10 * rank)
    env.common_step_counter = 480
    env.task.levels.copy_(torch.full((num_envs,), rank + 1))
    return capture_rank_state(cast(MjEnv, env), rank, cast(MjEnv | None, evaluation))


def _fresh(rank: int, num_envs: int = 4) -> _Env:
    torch.manual_seed(rank)  # as seed_everything(seed + rank) would
    return _Env(seed=rank, num_envs=num_envs)


def _restore(env: _Env, states: list[dict[str, Any]], rank: int, world_size: int) -> bool:
    return restore_rank_state(cast(MjEnv, env), states, rank, world_size)


def test_two_to_one_rank_0_continues_saved_rank_0() -> None:
    saved = [_saved_rank(0), _saved_rank(1)]
    env = _fresh(0)
    assert _restore(env, saved, rank=0, world_size=1)
    assert torch.equal(env.generator.get_state(), saved[0]["env_generator_state"])
    assert torch.equal(torch.get_rng_state(), saved[0]["torch_rng_state"])
    assert torch.equal(env.episode_length_buf, saved[0]["episode_length_buf"])
    assert env.task.levels.tolist() == [1, 1, 1, 1]
    assert env.common_step_counter == 480


def test_one_to_two_the_new_rank_starts_fresh_but_continues_counter_and_curriculum(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saved = [_saved_rank(0)]
    rank0 = _fresh(0)
    with caplog.at_level(logging.INFO, logger="mjfleet.rl.checkpoint.rank_state"):
        assert _restore(rank0, saved, rank=0, world_size=2)
    assert "written by 1 worker(s), this run has 2" in caplog.text and "ranks 1..1 start fresh" in caplog.text
    assert torch.equal(rank0.generator.get_state(), saved[0]["env_generator_state"])

    rank1 = _fresh(1)
    fresh_generator, fresh_rng = rank1.generator.get_state(), torch.get_rng_state()
    assert not _restore(rank1, saved, rank=1, world_size=2)
    assert torch.equal(rank1.generator.get_state(), fresh_generator), "seed + 1's stream, not a copy of rank 0's"
    assert torch.equal(torch.get_rng_state(), fresh_rng)
    assert rank1.episode_length_buf.tolist() == [0, 0, 0, 0]
    assert rank1.common_step_counter == 480
    assert rank1.task.levels.tolist() == [1, 1, 1, 1], "curriculum levels of saved rank 1 mod 1 = 0"


def test_growing_maps_new_ranks_to_saved_rank_r_mod_n() -> None:
    saved = [_saved_rank(0), _saved_rank(1)]
    for rank in (2, 3):
        env = _fresh(rank)
        assert not _restore(env, saved, rank=rank, world_size=4)
        assert env.task.levels.tolist() == [rank % 2 + 1] * 4


def test_another_num_envs_keeps_rngs_and_starts_episode_state_fresh(caplog: pytest.LogCaptureFixture) -> None:
    saved = [_saved_rank(0, num_envs=4), _saved_rank(1, num_envs=4)]
    env = _fresh(1, num_envs=6)
    with caplog.at_level(logging.INFO, logger="mjfleet.rl.checkpoint.rank_state"):
        assert not _restore(env, saved, rank=1, world_size=2)
    assert torch.equal(env.generator.get_state(), saved[1]["env_generator_state"])
    assert env.episode_length_buf.tolist() == [0] * 6
    assert env.task.levels.tolist() == [0] * 6
    assert env.common_step_counter == 480
    assert "task state of saved rank 1 does not fit this run (terrain_levels)" in caplog.text
    assert "episode counters start fresh" in caplog.text


def test_the_evaluation_simulation_continues_its_curriculum_levels_by_the_same_rule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The CPU's evaluation environments (a simulation of their own, 2 here) keep the levels they had reached:
    before, a continued run evaluated on the first levels again for as long as the curriculum took to climb back."""
    saved = [_saved_rank(0, evaluation_level=3), _saved_rank(1, evaluation_level=2)]
    for rank, world_size, levels in ((1, 2, [2, 2]), (3, 4, [2, 2]), (0, 1, [3, 3])):
        env, evaluation = _fresh(rank), _Env(seed=rank, num_envs=2)
        fresh_generator = evaluation.generator.get_state()
        restore_rank_state(cast(MjEnv, env), saved, rank, world_size, cast(MjEnv, evaluation))
        assert evaluation.task.levels.tolist() == levels, f"rank {rank} of {world_size}"
        assert torch.equal(evaluation.generator.get_state(), fresh_generator), "its own streams start afresh"
        assert evaluation.episode_length_buf.tolist() == [0, 0]

    other = _Env(seed=0, num_envs=3)  # another --agent.eval-envs
    with caplog.at_level(logging.INFO, logger="mjfleet.rl.checkpoint.rank_state"):
        restore_rank_state(cast(MjEnv, _fresh(0)), saved, 0, 2, cast(MjEnv, other))
    assert other.task.levels.tolist() == [0, 0, 0]
    assert "task state of saved rank 0's evaluation does not fit this run (terrain_levels)" in caplog.text

    without = [_saved_rank(0)]  # a checkpoint from before evaluation task states were saved
    evaluation = _Env(seed=0, num_envs=2)
    assert restore_rank_state(cast(MjEnv, _fresh(0)), without, 0, 1, cast(MjEnv, evaluation))
    assert evaluation.task.levels.tolist() == [0, 0]


def test_evaluation_takes_the_step_counter_but_not_the_task_state_or_random_streams() -> None:
    saved = [_saved_rank(0), _saved_rank(1)]
    env = _fresh(5)  # as many environments as the run had: its levels would fit, and are still not taken
    fresh_generator, fresh_rng = env.generator.get_state(), torch.get_rng_state()
    restore_shared_state(cast(MjEnv, env), saved)
    assert env.common_step_counter == 480
    assert env.task.levels.tolist() == [0, 0, 0, 0], "a fresh simulation's levels, as the ONNX file plays"
    assert torch.equal(env.generator.get_state(), fresh_generator), "play's --seed decides its resets"
    assert torch.equal(torch.get_rng_state(), fresh_rng)
    assert env.episode_length_buf.tolist() == [0, 0, 0, 0]


def test_a_generator_state_of_another_device_is_not_applied() -> None:
    saved = [_saved_rank(0)]
    saved[0]["env_generator_state"] = torch.zeros(16, dtype=torch.uint8)  # a CUDA generator's state
    env = _fresh(0)
    before = env.generator.get_state()
    assert _restore(env, saved, rank=0, world_size=1)
    assert torch.equal(env.generator.get_state(), before)


def test_real_curriculum_levels_follow_the_rule() -> None:
    """The rough-terrain task's own ``state_dict`` under the rule: a new rank takes the saved levels, another
    ``num_envs`` keeps its own."""
    saved_env = make_loco_env("go1-velocity-rough", num_envs=4, seed=0)
    saved_task = cast(LocomotionTask, saved_env.task)
    assert saved_task.curriculum is not None
    saved_task.curriculum.levels[:] = torch.tensor([2, 1, 0, 2])
    saved = [capture_rank_state(saved_env, 0)]

    grown = make_loco_env("go1-velocity-rough", num_envs=4, seed=1)
    twin = make_loco_env("go1-velocity-rough", num_envs=4, seed=1)  # seed + 1's stream, placed on those levels
    twin_task = cast(LocomotionTask, twin.task)
    assert twin_task.curriculum is not None
    twin_task.curriculum.levels[:] = torch.tensor([2, 1, 0, 2])
    twin.reset_all()
    assert not restore_rank_state(grown, saved, rank=1, world_size=2)
    grown_task = cast(LocomotionTask, grown.task)
    assert grown_task.curriculum is not None and grown_task.curriculum.levels.tolist() == [2, 1, 0, 2]
    assert torch.equal(grown.generator.get_state(), twin.generator.get_state()), "its own stream, not saved rank 0's"
    # Each robot stands on the tile of its restored level (it stood on its fresh level's, which the curriculum's
    # first judgement then read as walked on the restored one).
    tiles, _ = grown_task.curriculum.spawn(torch.arange(4))
    jitter = grown_task.cfg.terrain.spawn_jitter
    assert (grown.sim.qpos[:, :2] - tiles).abs().max() <= jitter + 1e-5

    wider = make_loco_env("go1-velocity-rough", num_envs=6, seed=0)
    wider_task = cast(LocomotionTask, wider.task)
    assert wider_task.curriculum is not None
    before = wider_task.curriculum.levels.clone()
    assert not restore_rank_state(wider, saved, rank=0, world_size=1)
    assert torch.equal(wider_task.curriculum.levels, before)
    assert torch.equal(wider.generator.get_state(), saved[0]["env_generator_state"])


def test_a_real_run_saves_and_continues_its_evaluation_levels(tmp_path: Path) -> None:
    """A rough-terrain run on the CPU evaluates in a simulation of its own; its checkpoint carries that simulation's
    curriculum levels and a continued run's evaluation takes them."""
    cfg = small_train_config("go1-velocity-rough", num_envs=32, steps=4, iterations=1, log_root=tmp_path)
    cfg.agent = dataclasses.replace(cfg.agent, eval_envs=8, eval_steps_per_step=4)  # 2 environments stepped 4 times
    run_dir = make_run_dir(tmp_path, "levels")
    train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    path = run_dir / "model_1.pt"
    data = load_checkpoint(path)
    (state,) = data["rank_states"]
    assert state["task_state"]["terrain_levels"].shape == (32,)
    assert state["evaluation_task_state"]["terrain_levels"].shape == (2,)

    state["evaluation_task_state"]["terrain_levels"] = torch.tensor([2, 1])  # as if they had climbed
    torch.save(data, path)
    env = make_loco_env("go1-velocity-rough", num_envs=32, seed=0)
    eval_env = make_loco_env("go1-velocity-rough", num_envs=2, seed=1)
    runner = Runner(
        env, cfg.agent, DistributedContext(device="cpu"), None, evaluation=SeparateEvaluation(eval_env, 4, "cpu")
    )
    runner.load(str(path))
    eval_task = cast(LocomotionTask, eval_env.task)
    assert eval_task.curriculum is not None and eval_task.curriculum.levels.tolist() == [2, 1]


# --- real resumes with another number of workers --------------------------------------------------------------------


def _newest_run(log_root: Path) -> Path:
    (run_dir,) = [p for p in log_root.glob("*/*") if p.is_dir()]
    return run_dir


@pytest.mark.slow
def test_resume_on_another_number_of_workers_one_to_two_to_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1 worker -> 2 workers -> 1 worker, each resuming the previous run: one launch covers growing and shrinking."""
    instrument(monkeypatch, probes=True)
    monkeypatch.delenv("TORCHRUNX_LOG_DIR", raising=False)
    common: dict[str, Any] = {"num_envs": 16, "steps": 8, "iterations": 2, "torchrunx_log_dir": ""}
    first = run(small_train_config(log_root=tmp_path / "0", cpu_workers=1, **common))
    assert len(first) == 1
    previous = _newest_run(tmp_path / "0")
    assert len(load_checkpoint(previous / "model_2.pt")["rank_states"]) == 1

    for hop, workers in enumerate((2, 1), start=1):
        resumed = run(small_train_config(log_root=tmp_path / str(hop), cpu_workers=workers, resume=previous, **common))
        final = 2 * (hop + 1)
        assert len(resumed) == workers
        assert all(r.final_iteration == final for r in resumed)
        assert [r.iteration for r in resumed[0].records] == [final - 1, final]
        assert len({r.extras["replica_digest"] for r in resumed}) == 1, "replicas differ after the resume"
        previous = _newest_run(tmp_path / str(hop))
        assert [i for i, _ in list_checkpoints(previous)] == [final - 1, final]
        states = load_checkpoint(previous / f"model_{final}.pt")["rank_states"]
        assert [s["rank"] for s in states] == list(range(workers))
        # Every rank continued the shared step counter: 8 steps per iteration, whatever the number of workers.
        assert [s["common_step_counter"] for s in states] == [8 * final] * workers


# --- restarts across hosts ------------------------------------------------------------------------------------------


def test_a_host_gone_at_a_relaunch_is_a_failed_attempt_and_a_bad_host_at_the_first_launch_is_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = LaunchPlan(device_kind="cpu", workers_per_host=1, hostnames=("node1", "node2"))
    outcomes: list[Exception | None] = [
        WorkerFailure("worker rank 1 failed", rank=1, error="worker process died"),
        HostError("host 'node2' cannot take part: no answer within 10 s"),
        None,
    ]

    def fake_launch(cfg: TrainConfig, run_dir: Path, plan: LaunchPlan, start: StartPoint, stop: object) -> list[str]:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return ["done"]

    monkeypatch.setattr(supervisor, "launch_training", fake_launch)
    cfg = small_train_config(iterations=4, max_restarts=2)
    result = supervisor.supervise(cfg, tmp_path, plan, StartPoint(checkpoint=None, final_iteration=4))
    assert result == ["done"]  # type: ignore[comparison-overlap]
    restarts = (tmp_path / supervisor.RESTART_LOG).read_text().splitlines()
    assert len(restarts) == 2 and "cause=host 'node2' cannot take part" in restarts[1]
    # The restarts used up, the host's error ends the run as a failed one, not as the user's input.
    outcomes[:] = [WorkerFailure("worker rank 1 failed", rank=1, error="worker process died"), HostError("gone")]
    with pytest.raises(WorkerFailure, match="relaunch 1 failed: gone"):
        supervisor.supervise(dataclasses.replace(cfg, max_restarts=1), tmp_path, plan, StartPoint(None, 4))
    outcomes[:] = [HostError("host 'node3' does not resolve")]
    with pytest.raises(HostError):
        supervisor.supervise(cfg, tmp_path, plan, StartPoint(checkpoint=None, final_iteration=4))


def test_a_restart_relaunches_every_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = LaunchPlan(device_kind="cpu", workers_per_host=2, hostnames=("node1", "node2", "node3"))
    attempts: list[tuple[str, ...]] = []

    def fake_launch(cfg: TrainConfig, run_dir: Path, plan: LaunchPlan, start: StartPoint, stop: object) -> list[str]:
        attempts.append(plan.hostnames)
        if len(attempts) < 3:
            rank = 5 if len(attempts) == 1 else 2  # a worker on node3, then one on node2
            raise WorkerFailure(f"worker rank {rank} failed", rank=rank, error="worker process died")
        return ["done"]

    monkeypatch.setattr(supervisor, "launch_training", fake_launch)
    cfg = small_train_config(iterations=4, max_restarts=2)
    result = supervisor.supervise(cfg, tmp_path, plan, StartPoint(checkpoint=None, final_iteration=4))
    assert result == ["done"]  # type: ignore[comparison-overlap]
    assert attempts == [("node1", "node2", "node3")] * 3
