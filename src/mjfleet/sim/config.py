"""Physics settings (importable without MuJoCo Warp, so command-line parsing stays fast)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SimConfig:
    """Physics settings shared by every task."""

    decimation: int = 2
    """Physics steps per environment step."""
    use_graph: bool = True
    """Capture the decimated physics step as a Warp graph and replay it (CPU and CUDA); falls back to eager launches
    if capture fails."""
    nconmax: int | None = None
    """Contacts to allocate per world (None: MuJoCo Warp's default for the model)."""
    njmax: int | None = None
    """Constraint rows to allocate per world (None: MuJoCo Warp's default for the model)."""
    solver_notices: bool = False
    """Print MuJoCo Warp's "(linesearch) iterations limit reached" notices from inside the kernels. Off by default:
    after falls and hard impacts the solver regularly stops at its iteration limit (the step is still valid, it
    uses the best iterate), and the notices would flood the console and worker logs. Buffer-overflow warnings
    (contacts, constraint rows) always print."""
