"""The ``train`` command's full configuration (task configs plus how and where to run) and its checks.

:func:`validate` is the one set of checks every entry point applies: the ``train`` and ``bench`` commands and the
Python API (:func:`mjfleet.train.prepare` calls it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import ipaddress
import math
import netrc
import os
import re
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tyro

from mjfleet.envs.config import EnvConfig, check_env
from mjfleet.errors import UsageError
from mjfleet.paths import absolute_path
from mjfleet.render.size import check_video_size
from mjfleet.rl.config import AgentConfig, FastTd3Config
from mjfleet.rl.evaluation.stop_condition import StopWhen, as_condition
from mjfleet.rl.learners.registry import check_learner_class, learner_entry, learner_names
from mjfleet.runs.source import is_wandb_ref
from mjfleet.runtime.devices import GpuIds

MAX_CPU_WORKERS = 1024
MAX_WORKERS_PER_GPU = 64
MAX_RESTARTS = 1000
MAX_COLLECTIVE_TIMEOUT_S = 7 * 24 * 3600.0
MAX_AGENT_TIMEOUT_S = 3600
MAX_INT = 2**31 - 1
"""Integer settings end up in int32 buffers, Warp launches and array shapes; larger values are typos."""
MAX_ROLLOUT = 2**31 - 1
"""Transitions one worker stores per iteration (num_envs * num_steps_per_env) must be indexable."""
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass
class TrainConfig:
    """Everything `train <task>` accepts."""

    env: EnvConfig
    """Environment settings of the task."""
    agent: AgentConfig
    """Learner (PPO, SAC, TD3) and training-loop settings of the task."""
    task: tyro.conf.Suppress[str] = ""
    """Task id (the command's first argument, so no `--task` flag)."""
    seed: int = 42
    """Random seed; worker k uses seed + k (its global rank)."""
    gpu_ids: GpuIds = "auto"
    """GPUs to train on, as indices relative to CUDA_VISIBLE_DEVICES: `0`, `0 1`, `[0,1]`, `all`, or
    `None` for the CPU. `auto`: GPU 0 if CUDA is available, else the CPU. Several GPUs = one worker each. The
    launcher chooses for every host: one that sees no GPU and is none of the hosts needs `None`."""
    cpu_workers: int = 1
    """With `--gpu-ids None`: number of CPU worker processes (gloo); each simulates `env.num_envs` worlds."""
    workers_per_gpu: int = 1
    """Workers sharing each selected GPU, each simulating `env.num_envs` worlds: small tasks do not fill a large
    GPU. Above 1 the workers' collectives use gloo (NCCL refuses two ranks on one GPU)."""
    launcher: Literal["auto", "torchrunx"] = "auto"
    """`auto`: in-process for one worker, torchrunx for more. `torchrunx`: always launch workers."""
    hostnames: tuple[str, ...] = ()
    """Hosts for multi-node training through torchrunx (SSH); none = this machine only. `slurm`: the nodes of the
    SLURM job this runs in (an error outside one); `auto`: those nodes inside a SLURM job, else this machine."""
    workers_per_host: int | None = None
    """Workers per host in multi-node mode (default: the number of selected GPUs, or `cpu_workers`)."""
    ssh_config: Path | None = None
    """OpenSSH client config used to reach remote hosts (user, port, key, `HostName`); default `~/.ssh/config`.
    Key-based login only: nothing ever prompts for a password."""
    launcher_address: str | None = None
    """Address of this machine that remote hosts call back to (default: `$MJFLEET_LAUNCHER_ADDRESS`, else the
    address of the interface that routes to the first remote host). Loopback addresses are refused."""
    agent_timeout_s: int = 60
    """Multi-node: every host's torchrunx agent must start and join within this many seconds, or the run fails
    naming the hosts."""
    torchrunx_log_dir: str | None = None
    """Per-worker log files (default `<run_dir>/torchrunx`; `""` disables them; TORCHRUNX_LOG_DIR wins)."""
    log_root: Path = Path("logs/rsl_rl")
    """Runs are written under `<log_root>/<experiment_name>/<timestamp>[_<run_name>]`."""
    resume: Path | None = None
    """Start a new run from the weights, optimizer state and iteration count of this checkpoint file, of the newest
    checkpoint of this run directory, or of a checkpoint of a W&B run:
    `wandb:<entity>/<project>/<run>[:<model_<it>.pt or iteration>]` (newest when omitted). The new run trains
    `--agent.max-iterations` more iterations in a directory of its own; `--finish` continues a run in place."""
    finish: Path | None = None
    """Finish the run in this directory in place: continue it from its newest checkpoint to the iteration it was
    started for, with the settings it was started with (read from the run; flags given here may change how and
    where it runs, not what it trains). What an interrupted run prints to finish it."""
    init_at_random_ep_len: bool = True
    """Start episodes at random times so time-outs are spread over iterations."""
    replica_check_interval: int = 50
    """Multi-worker runs compare a digest of parameters and optimizer state across workers this often."""
    collective_timeout_s: float = 600.0
    """A collective operation that does not complete within this many seconds aborts the run, naming the ranks
    that stopped responding (a hung or stopped worker)."""
    max_restarts: int = 0
    """After a worker dies (crash, signal, OOM kill, hang), relaunch every worker from the newest checkpoint of
    the same run directory up to this many times, finishing at the originally requested iteration. Bad input
    and NaN training are never retried. With a value above 0 even a single worker runs as a launched process."""
    stop_when: StopWhen | None = None
    """End training early once a statistic of the evaluation episodes (the deterministic policy that `play` runs,
    on the job's `--agent.eval-envs` evaluation environments; logged as `Eval/...`) meets a condition:
    `success>=0.9`, `return>20`, `length>=900` or any logged `Metrics/<name>`, e.g.
    `Metrics/lin_vel_error<0.2` (its mean over the most recent `--agent.eval-episodes` of every worker). The
    training episodes, with the policy's action noise, are logged as `Episode/...` and `Metrics/...`; with
    `--agent.eval-envs 0` the condition reads those. A checkpoint is written at that iteration; exit code 0."""
    stop_when_iterations: int | None = None
    """Iterations in a row the `--stop-when` condition must hold, counting those in which an episode it reads ended
    (the others neither hold nor break the row). Default: 1 on the evaluation episodes, whose statistics already
    average the most recent `--agent.eval-episodes` of them; 10 on the training episodes (`--agent.eval-envs 0`),
    whose means are of one iteration's episodes."""
    video_interval: int = 0
    """Every this many iterations rank 0 records a clip of environment 0 during the rollout into
    `<run_dir>/videos/iter_<it>.mp4` and the logger (TensorBoard, W&B). 0: no videos."""
    video_length: int = 200
    """Control steps per training clip (a clip may run on into the next iterations' rollouts)."""
    video_width: int = 320
    """Width of training clips in pixels."""
    video_height: int = 240
    """Height of training clips in pixels."""
    run_id: str | None = None
    """Names the job this run belongs to: a start whose run id already has a run under the experiment continues it
    from its newest checkpoint to the iteration it was started for (a restarted or requeued job); one with other
    training settings (task, env, agent, seed, --resume) is refused. Default: the SLURM job (srun) or torchrun's run
    id when one of them started this process, where a start with other settings is another run; otherwise every
    start is a new run."""
    distributed: tyro.conf.FlagConversionOff[bool] = False
    """Accepted for recipes written for mjlab (`torchrun ... train <task> --distributed True`); mjfleet reads a
    launcher's ranks from its environment (RANK, WORLD_SIZE, ... or srun's) with or without it."""
    rendezvous_timeout_s: float = 45.0
    """Started by torchrun or srun: seconds a rank waits for rank 0's rendezvous address (MASTER_ADDR) to answer
    before giving up with an error (raise it where ranks may start minutes apart, e.g. Kubernetes pods)."""
    dry_run: bool = False
    """Validate everything (arguments, devices, checkpoint to resume, log root), print the launch plan and exit
    without creating a run directory or starting workers."""


def validate(cfg: TrainConfig) -> None:
    """Reject values that would fail later with a :class:`UsageError` of one line, naming the flag."""
    positive = {
        "--env.num-envs": cfg.env.num_envs,
        "--env.sim.decimation": cfg.env.sim.decimation,
        "--agent.max-iterations": cfg.agent.max_iterations,
        "--agent.num-steps-per-env": cfg.agent.num_steps_per_env,
        "--agent.save-interval": cfg.agent.save_interval,
        "--agent.algorithm.num-learning-epochs": cfg.agent.algorithm.num_learning_epochs,
        "--agent.algorithm.num-mini-batches": cfg.agent.algorithm.num_mini_batches,
        "--cpu-workers": cfg.cpu_workers,
        "--workers-per-gpu": cfg.workers_per_gpu,
        "--replica-check-interval": cfg.replica_check_interval,
        "--video-length": cfg.video_length,
    }
    for flag, value in positive.items():
        if value < 1:
            raise UsageError(f"{flag} must be at least 1 (got {value})")
    for flag, dims in (
        ("--agent.policy.actor-hidden-dims", cfg.agent.policy.actor_hidden_dims),
        ("--agent.policy.critic-hidden-dims", cfg.agent.policy.critic_hidden_dims),
    ):
        if not dims:
            raise UsageError(f"{flag} names no layer: the network needs at least one (e.g. {flag} 256 128)")
        if any(d < 1 for d in dims):
            raise UsageError(f"{flag}: every layer needs at least 1 unit (got {' '.join(map(str, dims))})")
    check_env(cfg.env)
    a = cfg.agent.algorithm
    if not a.learning_rate > 0:
        raise UsageError(f"--agent.algorithm.learning-rate must be positive (got {a.learning_rate})")
    for flag, value in (("--agent.algorithm.gamma", a.gamma), ("--agent.algorithm.lam", a.lam)):
        if not 0 <= value <= 1:
            raise UsageError(f"{flag} must be between 0 and 1 (got {value})")
    for flag, value in (
        ("--agent.algorithm.clip-param", a.clip_param),
        ("--agent.algorithm.desired-kl", a.desired_kl),
        ("--agent.algorithm.max-grad-norm", a.max_grad_norm),
        ("--agent.policy.init-std", cfg.agent.policy.init_std),
    ):
        if not value > 0:
            raise UsageError(f"{flag} must be positive (got {value})")
    for flag, value in (
        ("--agent.algorithm.value-loss-coef", a.value_loss_coef),
        ("--agent.algorithm.entropy-coef", a.entropy_coef),
    ):
        if not value >= 0:
            raise UsageError(f"{flag} must not be negative (got {value})")
    if not 0 < cfg.collective_timeout_s <= MAX_COLLECTIVE_TIMEOUT_S:
        raise UsageError(
            f"--collective-timeout-s must be positive and at most {MAX_COLLECTIVE_TIMEOUT_S:.0f} s"
            f" (got {cfg.collective_timeout_s})"
        )
    if cfg.agent.logger == "wandb" and importlib.util.find_spec("wandb") is None:
        # Checked here, not at the first metrics write: that is in every worker, after the run directory exists.
        raise UsageError("--agent.logger wandb: this Python cannot import wandb (install it, or log to tensorboard)")
    if cfg.agent.logger == "wandb" and not wandb_can_log(os.environ):
        raise UsageError(
            "--agent.logger wandb: no W&B API key here (run `wandb login`, or set WANDB_API_KEY; WANDB_MODE=offline"
            " logs without an account)"
        )
    if cfg.stop_when is not None:
        cfg.stop_when = as_condition(cfg.stop_when)  # text from Python is parsed here, once; tyro parsed the CLI's
    cfg.agent.evaluation_envs(cfg.env.num_envs)  # refuses --agent.eval-envs/--agent.eval-episodes out of range
    if cfg.stop_when_iterations is not None and cfg.stop_when_iterations < 1:
        raise UsageError(f"--stop-when-iterations must be at least 1 (got {cfg.stop_when_iterations})")
    if cfg.video_interval < 0:
        raise UsageError(f"--video-interval must be 0 (no videos) or positive (got {cfg.video_interval})")
    check_video_size(cfg.video_width, cfg.video_height)
    if cfg.cpu_workers > MAX_CPU_WORKERS:
        raise UsageError(f"--cpu-workers must be at most {MAX_CPU_WORKERS} (got {cfg.cpu_workers})")
    if cfg.workers_per_gpu > MAX_WORKERS_PER_GPU:
        raise UsageError(f"--workers-per-gpu must be at most {MAX_WORKERS_PER_GPU} (got {cfg.workers_per_gpu})")
    if not 0 <= cfg.max_restarts <= MAX_RESTARTS:
        raise UsageError(f"--max-restarts must be between 0 and {MAX_RESTARTS} (got {cfg.max_restarts})")
    batch = cfg.env.num_envs * cfg.agent.num_steps_per_env
    reads_algorithm = cfg.agent.learner in learner_names() and learner_entry(cfg.agent.learner).settings == "algorithm"
    if reads_algorithm and batch < cfg.agent.algorithm.num_mini_batches:
        raise UsageError(
            f"--env.num-envs x --agent.num-steps-per-env ({batch}) is smaller than --agent.algorithm.num-mini-batches"
            f" ({cfg.agent.algorithm.num_mini_batches})"
        )
    if batch > MAX_ROLLOUT:
        raise UsageError(
            f"--env.num-envs x --agent.num-steps-per-env ({batch}) is too large for one worker's rollout"
            f" (at most {MAX_ROLLOUT:,})"
        )
    if cfg.workers_per_host is not None and cfg.workers_per_host < 1:
        raise UsageError(f"--workers-per-host must be at least 1 (got {cfg.workers_per_host})")
    # NumPy seeds must fit in 32 bits, and worker k uses seed + k.
    if not 0 <= cfg.seed <= 2**32 - 1 - MAX_CPU_WORKERS:
        raise UsageError(f"--seed must be between 0 and {2**32 - 1 - MAX_CPU_WORKERS} (got {cfg.seed})")
    _check_name("--agent.experiment-name", cfg.agent.experiment_name, required=True)
    _check_name("--agent.run-name", cfg.agent.run_name, required=False)
    if cfg.run_id is not None:
        _check_name("--run-id", cfg.run_id, required=True)
    if not 0 < cfg.rendezvous_timeout_s <= MAX_AGENT_TIMEOUT_S:
        raise UsageError(
            f"--rendezvous-timeout-s must be positive and at most {MAX_AGENT_TIMEOUT_S}"
            f" (got {cfg.rendezvous_timeout_s})"
        )
    for flag, path in (("--log-root", cfg.log_root), ("--resume", cfg.resume), ("--finish", cfg.finish)):
        if path is not None and ("\x00" in str(path) or not str(path).strip()):
            raise UsageError(f"{flag} {str(path)!r} is not a usable path")
    if cfg.resume is not None and not is_wandb_ref(cfg.resume):
        # Recorded as typed, the same checkpoint by another spelling trained "other settings" under one --run-id,
        # and the run's record of it was another folder's path for --finish and for remote ranks.
        cfg.resume = absolute_path(cfg.resume, "--resume")
    if cfg.finish is not None:  # `--finish .` from inside the run: a path whose parents are empty
        cfg.finish = absolute_path(cfg.finish, "--finish")
    if cfg.torchrunx_log_dir is not None and "\x00" in cfg.torchrunx_log_dir:
        raise UsageError("--torchrunx-log-dir contains a NUL character")
    if any(not h.strip() or "\x00" in h for h in cfg.hostnames):
        raise UsageError("--hostnames: host names must not be empty")
    keywords = [h for h in cfg.hostnames if h.lower() in ("slurm", "auto")]
    if keywords and len(cfg.hostnames) > 1:
        raise UsageError(f"--hostnames {keywords[0]} stands for a whole list of hosts: give it alone")
    _check_remote_options(cfg)
    _check_off_policy(cfg)
    _check_numbers(cfg)  # last: the specific checks above word their messages better


def _check_remote_options(cfg: TrainConfig) -> None:
    if not 1 <= cfg.agent_timeout_s <= MAX_AGENT_TIMEOUT_S:
        raise UsageError(f"--agent-timeout-s must be between 1 and {MAX_AGENT_TIMEOUT_S} (got {cfg.agent_timeout_s})")
    if cfg.ssh_config is not None and not cfg.ssh_config.expanduser().is_file():
        raise UsageError(f"--ssh-config {cfg.ssh_config} is not a file")
    address = cfg.launcher_address
    if address is not None:
        if not address.strip() or "\x00" in address or any(c.isspace() for c in address):
            raise UsageError(f"--launcher-address {address!r} is not a host name or address")
        with contextlib.suppress(ValueError):  # a name is resolved (and checked) when the launch starts
            if ipaddress.ip_address(address).is_loopback:
                raise UsageError(
                    f"--launcher-address {address} is a loopback address that other hosts cannot reach; give an"
                    " address of this machine on the network the hosts share"
                )


def wandb_can_log(environ: Mapping[str, str]) -> bool:
    """Whether a W&B run could start here as far as can be told without W&B: offline or disabled, an API key in the
    environment, or a ``wandb login`` entry in the netrc file for W&B's host (where the file cannot be read, yes)."""
    if environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun") or environ.get("WANDB_API_KEY"):
        return True
    host = urllib.parse.urlparse(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    path = Path(environ.get("NETRC") or Path(environ.get("HOME") or Path.home()) / ".netrc")
    try:
        return netrc.netrc(str(path)).authenticators(host) is not None
    except FileNotFoundError:
        return False
    except (OSError, netrc.NetrcParseError):
        return True  # W&B may read it where this cannot: its own error says more


def _importable(module: str) -> bool:
    """Whether ``module`` can be found (``pkg.sub`` without ``pkg`` installed too: find_spec raises there)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _check_off_policy(cfg: TrainConfig) -> None:
    """skrl's SAC and TD3 settings (checked whichever the learner: a value out of range is a typo either way)."""
    if cfg.agent.learner not in learner_names():
        raise UsageError(f"--agent.learner must be one of {', '.join(learner_names())} (got {cfg.agent.learner!r})")
    missing = [m for m in learner_entry(cfg.agent.learner).requires if not _importable(m)]
    if missing:  # found when the learner is built: after the run directory and the simulation exist
        raise UsageError(
            f"--agent.learner {cfg.agent.learner} imports {', '.join(missing)}, which this Python ({sys.executable})"
            f" cannot import: uv sync, or pip install the package that provides {' and '.join(missing)}"
        )
    check_learner_class(learner_entry(cfg.agent.learner))
    for group, c in (("sac", cfg.agent.sac), ("td3", cfg.agent.td3), ("fast_td3", cfg.agent.fast_td3)):
        flag = f"--agent.{group.replace('_', '-')}"
        for name, value in (
            ("buffer-per-env", c.buffer_per_env),
            ("batch-size", c.batch_size),
            ("gradient-steps", c.gradient_steps),
        ):
            if value < 1:
                raise UsageError(f"{flag}.{name} must be at least 1 (got {value})")
        for name, value in (("random-steps", c.random_steps), ("learning-starts", c.learning_starts)):
            if value < 0:
                raise UsageError(f"{flag}.{name} must not be negative (got {value})")
        for name, value in (("learning-rate", c.learning_rate), ("action-limit", c.action_limit)):
            if not value > 0:
                raise UsageError(f"{flag}.{name} must be positive (got {value})")
        if not 0 <= c.gamma <= 1:
            raise UsageError(f"{flag}.gamma must be between 0 and 1 (got {c.gamma})")
        if not 0 < c.polyak <= 1:
            raise UsageError(f"{flag}.polyak must be above 0 and at most 1 (got {c.polyak})")
        if c.reward_scale is not None and not c.reward_scale > 0:
            raise UsageError(f"{flag}.reward-scale must be positive (got {c.reward_scale})")
        if not c.grad_norm_clip >= 0:
            raise UsageError(f"{flag}.grad-norm-clip must not be negative (got {c.grad_norm_clip})")
        if cfg.env.num_envs * c.buffer_per_env > MAX_ROLLOUT:
            raise UsageError(
                f"--env.num-envs * {flag}.buffer-per-env ({cfg.env.num_envs * c.buffer_per_env}) is too large for"
                " one worker's replay buffer"
            )
        buffer = cfg.env.num_envs * c.buffer_per_env
        entry = learner_entry(cfg.agent.learner)
        builds = entry.off_policy and entry.settings == group  # (a group no learner of the run reads builds nothing)
        if builds and c.batch_size > buffer:
            raise UsageError(
                f"{flag}.batch-size {c.batch_size} is larger than the replay buffer it samples from (--env.num-envs *"
                f" {flag}.buffer-per-env: {buffer})"
            )
    sac, td3 = cfg.agent.sac, cfg.agent.td3
    if not sac.initial_entropy > 0:
        raise UsageError(f"--agent.sac.initial-entropy must be positive (got {sac.initial_entropy})")
    noises = (("exploration-noise", td3.exploration_noise), ("smooth-noise", td3.smooth_noise))
    _check_td3("--agent.td3", (*noises, ("smooth-clip", td3.smooth_clip)), td3.policy_delay)
    _check_fast_td3(cfg.agent.fast_td3)


def _check_td3(flag: str, non_negative: tuple[tuple[str, float], ...], policy_delay: int) -> None:
    """What both TD3s' settings share: noises (and the like) not negative, a policy delay of at least 1."""
    for name, value in non_negative:
        if not value >= 0:
            raise UsageError(f"{flag}.{name} must not be negative (got {value})")
    if policy_delay < 1:
        raise UsageError(f"{flag}.policy-delay must be at least 1 (got {policy_delay})")


def _check_fast_td3(c: FastTd3Config) -> None:
    flag = "--agent.fast-td3"
    non_negative = (("noise-min", c.noise_min), ("smooth-noise", c.smooth_noise), ("smooth-clip", c.smooth_clip))
    _check_td3(flag, (*non_negative, ("weight-decay", c.weight_decay)), c.policy_delay)
    if not c.noise_max >= c.noise_min:
        raise UsageError(f"{flag}.noise-max must be at least {flag}.noise-min ({c.noise_min}; got {c.noise_max})")
    if c.atoms < 2:
        raise UsageError(f"{flag}.atoms must be at least 2 (got {c.atoms})")
    if c.value_limit is not None and not c.value_limit > 0:
        raise UsageError(f"{flag}.value-limit must be positive (got {c.value_limit})")


def _check_numbers(cfg: TrainConfig) -> None:
    """Every float setting must be finite and every integer fit in 32 bits (NaN compares false everywhere)."""
    for flag, value in _leaves(cfg, ""):
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number (got {value})")
        if isinstance(value, int) and flag != "--seed" and not -MAX_INT <= value <= MAX_INT:
            raise UsageError(f"{flag} is out of range (got {value})")


def _leaves(obj: Any, prefix: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        flag = f"{prefix}.{f.name}" if prefix else f"--{f.name}"
        flag = flag.replace("_", "-")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            found += _leaves(value, flag)
        elif isinstance(value, tuple):
            found += [(flag, v) for v in value]
        else:
            found.append((flag, value))
    return found


def _check_name(flag: str, name: str, required: bool) -> None:
    """Experiment and run names become directory names: no separators, no ``..``, nothing hidden."""
    if not name and not required:
        return
    if not _NAME_RE.fullmatch(name) or len(name) > 100:
        raise UsageError(
            f"{flag} {name!r} must be 1-100 characters of letters, digits, '.', '_', '+' or '-',"
            " starting with a letter or digit"
        )
