"""SyncedPPO: exactly rsl_rl's distributed update and results, its gradient sync timed (two real gloo processes)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.distributed as dist
from rsl_rl.algorithms import PPO
from tensordict import TensorDict
from torch.multiprocessing.spawn import spawn

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.rl.learners.rsl_rl import SyncedPPO

NUM_ENVS, STEPS, OBS, ACTIONS = 64, 8, 5, 2
# schedule -> gradient bucket size in MB; 4 kB buckets split these networks' gradients into several all-reduces.
SETTINGS = {"adaptive": 25.0, "fixed": 25.0, "adaptive-buckets": 0.004}


def _agent_cfg(schedule: str) -> dict[str, Any]:
    agent = AgentConfig(
        num_steps_per_env=STEPS,
        policy=PolicyConfig(actor_hidden_dims=(32, 32), critic_hidden_dims=(32, 32)),
        # A small target KL makes the adaptive schedule move the learning rate within a few mini-batches.
        algorithm=dataclasses.replace(AlgorithmConfig(), schedule=schedule, desired_kl=0.001, learning_rate=3e-3),  # type: ignore[arg-type]
    )
    return agent.to_rsl_rl()


def _observations(generator: torch.Generator) -> TensorDict:
    obs = torch.randn(NUM_ENVS, OBS, generator=generator)
    return TensorDict({"policy": obs, "critic": obs}, batch_size=[NUM_ENVS])


def _train(algorithm: type[PPO], schedule: str, rank: int, updates: int, bucket_mb: float) -> PPO:
    """Build PPO with identical weights on every rank, then learn from rank-specific rollouts."""
    cfg = _agent_cfg(schedule)
    cfg["algorithm"].update(class_name=algorithm, grad_reduce_bucket_mb=bucket_mb)
    cfg["multi_gpu"] = {"global_rank": rank, "local_rank": rank, "world_size": 2}
    data = torch.Generator().manual_seed(100 + rank)
    torch.manual_seed(0)
    obs = _observations(data)
    alg = algorithm.construct_algorithm(obs, SimpleNamespace(num_envs=NUM_ENVS, num_actions=ACTIONS), cfg, "cpu")  # type: ignore[arg-type]
    for _ in range(updates):
        for _ in range(STEPS):
            alg.act(obs)
            obs = _observations(data)
            rewards = torch.randn(NUM_ENVS, generator=data)
            dones = torch.rand(NUM_ENVS, generator=data) < 0.1
            alg.process_env_step(obs, rewards, dones, {})
        alg.compute_returns(obs)
        torch.manual_seed(1)  # same mini-batch permutation and action noise for both implementations
        alg.update()
    return alg


def _worker(rank: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    calls: list[str] = []
    for name in ("all_reduce", "broadcast"):
        original = getattr(dist, name)

        def counted(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        setattr(dist, name, counted)
    results = {}
    for algorithm in (PPO, SyncedPPO):
        for schedule, bucket_mb in SETTINGS.items():
            calls.clear()
            alg = _train(algorithm, schedule.removesuffix("-buckets"), rank, updates=2, bucket_mb=bucket_mb)
            results[(algorithm.__name__, schedule)] = {
                "state": {k: v for k, v in alg.save().items() if k != "optimizer_state_dict"},
                "optimizer": alg.optimizer.state_dict(),
                "learning_rate": alg.learning_rate,
                "calls": list(calls),
                "sync_s": alg.clock.seconds if hasattr(alg, "clock") else None,
            }
    torch.save(results, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[Any, Any]]:
    tmp = tmp_path_factory.mktemp("ppo_sync")
    spawn(_worker, args=(str(tmp / "store"), str(tmp)), nprocs=2)
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(2)]


def _flat(tree: Any) -> list[Any]:
    if isinstance(tree, dict):
        return [x for k in sorted(tree, key=str) for x in [k, *_flat(tree[k])]]
    if isinstance(tree, list | tuple):
        return [x for v in tree for x in _flat(v)]
    return [tree]


def _identical(a: Any, b: Any) -> bool:
    fa, fb = _flat(a), _flat(b)
    return len(fa) == len(fb) and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(fa, fb, strict=True)
    )


@pytest.mark.slow
@pytest.mark.parametrize("schedule", list(SETTINGS))
def test_synced_ppo_matches_rsl_rl_bit_for_bit(results: list[dict[Any, Any]], schedule: str) -> None:
    for rank in range(2):
        stock, synced = results[rank][("PPO", schedule)], results[rank][("SyncedPPO", schedule)]
        assert _identical(stock["state"], synced["state"])
        assert _identical(stock["optimizer"], synced["optimizer"])
        assert stock["learning_rate"] == synced["learning_rate"]
    # The ranks saw different rollouts but hold the same replica.
    assert _identical(results[0][("SyncedPPO", schedule)]["state"], results[1][("SyncedPPO", schedule)]["state"])


@pytest.mark.slow
def test_adaptive_schedule_moves_the_learning_rate(results: list[dict[Any, Any]]) -> None:
    assert results[0][("SyncedPPO", "adaptive")]["learning_rate"] != pytest.approx(3e-3)


@pytest.mark.slow
def test_the_same_collectives_as_rsl_rl(results: list[dict[Any, Any]]) -> None:
    mini_batches = 2 * AlgorithmConfig().num_learning_epochs * AlgorithmConfig().num_mini_batches
    for schedule in SETTINGS:
        assert results[0][("SyncedPPO", schedule)]["calls"] == results[0][("PPO", schedule)]["calls"]
    # The adaptive schedule as rsl_rl runs it: the KL all-reduce and the learning rate broadcast in every mini-batch.
    adaptive = results[0][("SyncedPPO", "adaptive")]["calls"]
    assert adaptive.count("broadcast") == mini_batches and adaptive.count("all_reduce") >= 2 * mini_batches


def test_the_gradient_sync_is_timed(results: list[dict[Any, Any]]) -> None:
    assert all(results[r][("SyncedPPO", schedule)]["sync_s"] > 0 for r in range(2) for schedule in SETTINGS)
