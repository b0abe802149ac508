"""What ``--checkpoint`` / ``--resume`` may name, turned into a local file, and the policy ``play`` runs from it.

Accepted: a ``model_<it>.pt`` checkpoint, a run directory (its newest checkpoint), an experiment directory (its
newest run), an exported ``.onnx`` policy (``play`` only), or ``wandb:<entity>/<project>/<run>[:<file>]``
(see :mod:`mjfleet.train.wandb_source`).
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


def fetch_remote_checkpoint(argv: list[str], default_log_root: Path) -> list[str]:
    """``argv`` with a ``--checkpoint wandb:...`` value replaced by the downloaded file (under
    ``<--log-root>/.wandb_downloads``), so the run's settings are read from beside it like a local run's."""
    from mjfleet.train.wandb_source import DOWNLOAD_DIR, fetch, is_wandb_ref

    out = list(argv)
    log_root = default_log_root
    for i, arg in enumerate(out):
        if arg == "--log-root" and i + 1 < len(out):
            log_root = Path(out[i + 1])
        elif arg.startswith("--log-root="):
            log_root = Path(arg.split("=", 1)[1])
    for i, arg in enumerate(out):
        if arg == "--checkpoint" and i + 1 < len(out) and is_wandb_ref(out[i + 1]):
            out[i + 1] = str(fetch(out[i + 1], log_root / DOWNLOAD_DIR))
        elif arg.startswith("--checkpoint=") and is_wandb_ref(arg.split("=", 1)[1]):
            out[i] = "--checkpoint=" + str(fetch(arg.split("=", 1)[1], log_root / DOWNLOAD_DIR))
    return out


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
