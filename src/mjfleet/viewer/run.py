"""One entry point for every viewer; each loads its own libraries only when chosen."""

from __future__ import annotations

from typing import Literal

from mjfleet.envs.env import MjEnv
from mjfleet.rl.evaluation.episodes import Policy


def run_viewer(kind: Literal["web", "native"], env: MjEnv, policy: Policy, host: str, port: int) -> int:
    """Run the ``kind`` viewer on ``env`` driven by ``policy`` until it is closed; returns the control steps taken.
    ``host`` and ``port`` are where the web viewer listens (``play --viewer-host/--viewer-port``)."""
    if kind == "native":
        from mjfleet.viewer.native import run_native_viewer

        return run_native_viewer(env, policy)
    from mjfleet.viewer.web import run_web_viewer

    return run_web_viewer(env, policy, host, port)
