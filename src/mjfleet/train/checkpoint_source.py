"""What ``--checkpoint`` / ``--resume`` may name, turned into a local file, and the policy ``play`` runs from it.

Accepted: a ``model_<it>.pt`` checkpoint, a run directory (its newest checkpoint), an experiment directory (its
newest run, :func:`mjfleet.rl.checkpoint.newest_run`), an exported ``.onnx`` policy (``play`` only), or
``wandb:<entity>/<project>/<run>[:<file>]`` (see :mod:`mjfleet.train.wandb_source`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint import load_checkpoint, resolve_checkpoint

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.config import AgentConfig
    from mjfleet.rl.evaluate import Policy


def is_onnx(path: Path) -> bool:
    """Whether ``path`` names an exported ONNX policy rather than a training checkpoint."""
    return path.suffix == ".onnx"


def resolve_play_checkpoint(path: Path) -> Path:
    """The local file ``play`` loads: an ONNX policy as given, else a validated training checkpoint."""
    if is_onnx(path):
        if not path.is_file():
            raise UsageError(f"ONNX policy {path} does not exist")
        return path
    checkpoint = resolve_checkpoint(path)
    load_checkpoint(checkpoint)
    return checkpoint


def local_checkpoint(text: str, log_root: Path) -> Path:
    """``--checkpoint`` as a local path: a ``wandb:`` reference is downloaded under ``<log_root>/.wandb_downloads``
    (with the run's ``params/``, so its settings are read from beside it like a local run's)."""
    from mjfleet.train.wandb_source import DOWNLOAD_DIR, fetch, is_wandb_ref

    return fetch(text, log_root / DOWNLOAD_DIR) if is_wandb_ref(text) else Path(text)


def load_policy(checkpoint: Path, env: MjEnv, agent_cfg: AgentConfig, device: str) -> Policy:
    """The deterministic policy of ``checkpoint`` for ``env``: onnxruntime for ``.onnx``, else the torch actor."""
    if is_onnx(checkpoint):
        from mjfleet.rl.onnx_policy import OnnxPolicy

        onnx_policy = OnnxPolicy(checkpoint)
        onnx_policy.check_compatible(env.get_observations(), env.num_actions)
        return onnx_policy

    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    runner = Runner(env, agent_cfg, DistributedContext(device=device), run_dir=None)
    runner.load(str(checkpoint), evaluate=True)  # play's --seed decides resets, not the training run's RNGs
    return runner.get_inference_policy(device)  # type: ignore[return-value]
