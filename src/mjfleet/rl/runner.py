"""rsl_rl's on-policy runner, made to train with any number of CPU or GPU workers and to log all of them."""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rsl_rl.runners import OnPolicyRunner

from mjfleet.envs.env import MjEnv
from mjfleet.envs.episode_stats import EpisodeStats
from mjfleet.launch.context import DistributedContext, init_process_group
from mjfleet.rl.checkpoint import checkpoint_name, load_checkpoint, save_atomic
from mjfleet.rl.config import AgentConfig
from mjfleet.rl.metrics import MetricsWriter

logger = logging.getLogger(__name__)


class ReplicaDivergenceError(RuntimeError):
    """Workers no longer hold identical parameters or optimizer state."""


class NonFiniteTrainingError(RuntimeError):
    """A loss or parameter became NaN or Inf."""


@dataclass
class IterationRecord:
    """What one iteration measured (kept for the caller; the same numbers are logged)."""

    iteration: int
    losses: dict[str, float]
    episode: dict[str, float]
    """Means over every rank's episodes that ended during this iteration."""
    local_sums: list[float]
    """This rank's own per-key sums (in ``env.stats.keys`` order), before the cross-rank reduction."""
    local_counts: list[float]
    """This rank's own per-key episode counts."""
    env_steps_per_s: float
    collect_s: float
    learn_s: float
    sync_s: float


@dataclass
class TrainingHistory:
    """Per-iteration records plus the digest of this rank's first rollout."""

    records: list[IterationRecord] = field(default_factory=list)
    first_rollout_digest: str = ""


IterationHook = Callable[["Runner", int], None]


class Runner(OnPolicyRunner):
    """``OnPolicyRunner`` with a distributed context instead of rsl_rl's NCCL-only setup.

    - One process group: initialised here (gloo on CPU, nccl on CUDA) unless one exists already.
    - Every rank loads a resumed checkpoint, so optimizer state and learning rate stay replicated.
    - Episode statistics are reduced over all ranks (sums and counts) before rank 0 logs them.
    - Every ``replica_check_interval`` iterations and at the end, ranks compare a digest of parameters and
      optimizer state and stop with :class:`ReplicaDivergenceError` if they differ.
    - Only rank 0 writes checkpoints (atomically), TensorBoard/W&B and the console progress line.
    """

    env: MjEnv

    def __init__(
        self,
        env: MjEnv,
        agent_cfg: AgentConfig,
        ctx: DistributedContext,
        run_dir: Path | None,
        replica_check_interval: int = 50,
        logged_config: dict[str, Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.agent_cfg = agent_cfg
        self.run_dir = run_dir
        self.replica_check_interval = replica_check_interval
        self.hooks: list[IterationHook] = []
        self.history = TrainingHistory()
        self._sync_s = 0.0
        # rsl_rl prints model summaries with bare print; keep them in the debug log instead.
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            super().__init__(env, agent_cfg.to_rsl_rl(), log_dir=None, device=ctx.device)
        logger.debug(captured.getvalue())
        self._time_gradient_sync()
        self.writer: MetricsWriter | None = None
        if ctx.is_main and run_dir is not None:
            self.writer = MetricsWriter(
                run_dir, agent_cfg.logger == "wandb", agent_cfg.wandb_project, config=logged_config
            )
        self._last_episode: dict[str, float] = {}

    # --- distributed setup -------------------------------------------------------------------------------------
    def _configure_multi_gpu(self) -> None:
        ctx = self.ctx
        self.gpu_world_size = ctx.world_size
        self.gpu_global_rank = ctx.rank
        self.gpu_local_rank = ctx.local_rank
        self.is_distributed = ctx.world_size > 1
        if not self.is_distributed:
            self.cfg["multi_gpu"] = None
            return
        self.cfg["multi_gpu"] = {"global_rank": ctx.rank, "local_rank": ctx.local_rank, "world_size": ctx.world_size}
        init_process_group(ctx)

    def _time_gradient_sync(self) -> None:
        """Wrap PPO's per-mini-batch gradient all-reduce to measure its share of the iteration."""
        reduce = self.alg.reduce_parameters

        def timed_reduce() -> None:
            start = time.perf_counter()
            reduce()
            self._sync_s += time.perf_counter() - start

        self.alg.reduce_parameters = timed_reduce  # type: ignore[method-assign]

    # --- training ----------------------------------------------------------------------------------------------
    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """Run ``num_learning_iterations`` iterations after the last completed one."""
        env, alg = self.env, self.alg
        if init_at_random_ep_len:
            env.episode_length_buf = torch.randint(
                0, int(env.max_episode_length), (env.num_envs,), device=env.device, generator=env.generator
            )
        obs = env.get_observations().to(self.device)
        alg.train_mode()
        if self.is_distributed:
            alg.broadcast_parameters()
        env.stats.pop()  # statistics of episodes cut by the random start do not belong to iteration 1

        start = self.current_learning_iteration
        total = start + num_learning_iterations
        steps_per_iteration = self.cfg["num_steps_per_env"] * env.num_envs * self.gpu_world_size
        for it in range(start + 1, total + 1):
            t0 = time.perf_counter()
            with torch.inference_mode():
                for _ in range(self.cfg["num_steps_per_env"]):
                    actions = alg.act(obs)
                    obs, rewards, dones, extras = env.step(actions.to(env.device))
                    obs, rewards, dones = obs.to(self.device), rewards.to(self.device), dones.to(self.device)
                    alg.process_env_step(obs, rewards, dones, extras)
                if not self.history.first_rollout_digest:
                    self.history.first_rollout_digest = _digest([alg.storage.observations["policy"]])
                alg.compute_returns(obs)
            t1 = time.perf_counter()
            self._sync_s = 0.0
            losses = alg.update()
            t2 = time.perf_counter()
            self.current_learning_iteration = it
            self._check_finite(it, losses)

            sums, counts = self.env.stats.pop()
            record = IterationRecord(
                iteration=it,
                losses=losses,
                episode=self._reduce_episode_stats(sums, counts),
                local_sums=sums.tolist(),
                local_counts=counts.tolist(),
                env_steps_per_s=steps_per_iteration / (t2 - t0),
                collect_s=t1 - t0,
                learn_s=t2 - t1,
                sync_s=self._sync_s,
            )
            self.history.records.append(record)
            self._log(record, total, steps_per_iteration)
            if it % self.cfg["save_interval"] == 0 or it == total:
                self.save_checkpoint()
            if self.is_distributed and (it % self.replica_check_interval == 0 or it == total):
                self.check_replicas()
            for hook in self.hooks:
                hook(self, it)
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def _check_finite(self, it: int, losses: dict[str, float]) -> None:
        for name, value in losses.items():
            if not math.isfinite(value):
                raise NonFiniteTrainingError(f"{name} loss is {value} at iteration {it}; the last checkpoint is kept")
        for name, p in self.alg.get_policy().named_parameters():
            if not torch.isfinite(p).all():
                raise NonFiniteTrainingError(f"actor parameter {name} is not finite at iteration {it}")

    def _reduce_episode_stats(self, sums: torch.Tensor, counts: torch.Tensor) -> dict[str, float]:
        if self.is_distributed:
            packed = torch.stack((sums, counts)).to(self.device)
            dist.all_reduce(packed, op=dist.ReduceOp.SUM)
            sums, counts = packed[0], packed[1]
        return EpisodeStats.means(self.env.stats.keys, sums, counts)

    def _log(self, r: IterationRecord, total: int, steps_per_iteration: int) -> None:
        if not self.ctx.is_main:
            return
        self._last_episode.update(r.episode)
        scalars = {f"Loss/{k}": v for k, v in r.losses.items()}
        scalars["Loss/learning_rate"] = self.alg.learning_rate
        scalars["Policy/mean_std"] = float(self.alg.get_policy().output_std.detach().mean())
        scalars.update(
            {
                "Perf/env_steps_per_s": r.env_steps_per_s,
                "Perf/collection_time": r.collect_s,
                "Perf/learning_time": r.learn_s,
                "Perf/gradient_sync_time": r.sync_s,
                "Perf/total_env_steps": float(r.iteration * steps_per_iteration),
            }
        )
        scalars.update(r.episode)
        if "Episode/return" in r.episode:
            scalars["Train/mean_reward"] = r.episode["Episode/return"]
            scalars["Train/mean_episode_length"] = r.episode["Episode/length"]
        if self.writer is not None:
            self.writer.add_scalars(scalars, r.iteration)
        ep = self._last_episode
        logger.info(
            "it %d/%d | %s steps/s | return %s | length %s | success %s | value %.4f | surrogate %.4f | lr %.2e",
            r.iteration,
            total,
            f"{r.env_steps_per_s:,.0f}",
            _fmt(ep.get("Episode/return")),
            _fmt(ep.get("Episode/length"), ".1f"),
            _fmt(ep.get("Episode/success"), ".2f"),
            r.losses.get("value", float("nan")),
            r.losses.get("surrogate", float("nan")),
            self.alg.learning_rate,
        )

    # --- checkpoints -------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path | None:
        """Rank 0 writes ``model_<iteration>.pt`` into the run directory; other ranks write nothing."""
        if not self.ctx.is_main or self.run_dir is None:
            return None
        path = self.run_dir / checkpoint_name(self.current_learning_iteration)
        self.save(str(path))
        return path

    def save(self, path: str, infos: dict[str, Any] | None = None) -> None:
        """Write the full training state atomically (models, optimizer, learning rate, iteration, RNG)."""
        payload = self.alg.save()
        payload.update(
            {
                "iter": self.current_learning_iteration,
                "infos": infos,
                "learning_rate": self.alg.learning_rate,
                "world_size": self.gpu_world_size,
                "torch_rng_state": torch.get_rng_state(),
                "env_generator_state": self.env.generator.get_state(),
            }
        )
        save_atomic(payload, Path(path))

    def load(
        self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None
    ) -> dict:
        """Load a checkpoint on this rank (every rank calls this on resume)."""
        data = load_checkpoint(Path(path), map_location=map_location or self.device)
        self.alg.load(data, load_cfg, strict)
        self.current_learning_iteration = int(data["iter"])
        if "learning_rate" in data:
            self.alg.learning_rate = float(data["learning_rate"])
            for group in self.alg.optimizer.param_groups:
                group["lr"] = self.alg.learning_rate
        return data.get("infos") or {}

    # --- replication -------------------------------------------------------------------------------------------
    def replica_digest(self) -> str:
        """Digest of parameters, normaliser statistics, optimizer state and learning rate."""
        tensors: list[torch.Tensor] = []
        for model in (self.alg.actor, self.alg.critic):
            tensors += list(model.state_dict().values())
        for state in self.alg.optimizer.state_dict()["state"].values():
            tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
        tensors.append(torch.tensor([self.alg.learning_rate], dtype=torch.float64))
        return _digest(tensors)

    def check_replicas(self) -> None:
        """Stop with :class:`ReplicaDivergenceError` unless every rank holds the same digest."""
        digest = self.replica_digest()
        gathered: list[str] = [""] * self.gpu_world_size
        dist.all_gather_object(gathered, digest)
        differing = [rank for rank, d in enumerate(gathered) if d != gathered[0]]
        if differing:
            raise ReplicaDivergenceError(
                f"ranks {differing} diverged from rank 0 at iteration {self.current_learning_iteration}"
            )


def _digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)
