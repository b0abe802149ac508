"""The simulation and environment on ``cuda:0``: graph replay, host syncs per step, CPU/CUDA agreement, streams."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
import warp as wp

from mjfleet.envs.env import MjEnv
from mjfleet.sim.warp_runtime import scoped_device
from mjfleet.tasks.registry import get_task

pytestmark = pytest.mark.gpu

CUDA = "cuda:0"


def _env(task_id: str, num_envs: int, device: str, seed: int = 0) -> MjEnv:
    spec = get_task(task_id)
    cfg = dataclasses.replace(spec.env_cfg(), num_envs=num_envs)
    cfg.sim = dataclasses.replace(cfg.sim, backend="warp")  # MuJoCo Warp on both devices (auto is C on the CPU)
    with scoped_device(device):
        return MjEnv(spec.load_task_class()(cfg), device=device, seed=seed)


def test_the_captured_graph_is_active_on_cuda() -> None:
    env = _env("cartpole-balance", 64, CUDA)
    actions = torch.zeros(env.num_envs, env.num_actions, device=CUDA)
    for _ in range(3):  # eager (compiles and loads modules), capture + replay, replay
        env.step(actions)
    # On CUDA the physics step replays a captured CUDA graph from the second step on; it never fell back to eager.
    assert env.sim.graph_active, "graph capture failed on CUDA: physics runs with eager launches"


@contextmanager
def _counting_host_syncs() -> Iterator[list[str]]:
    """Where the host waited for the GPU: torch's synchronizing operations (``set_sync_debug_mode``) and explicit
    Warp synchronisations through the ``wp`` namespace (what mujoco_warp would call)."""
    found: list[str] = []
    patched = {}
    for name in ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event"):
        original = getattr(wp, name)

        def counting(*args: object, _name: str = name, _original: object = original, **kwargs: object) -> object:
            found.append(f"wp.{_name}")
            return _original(*args, **kwargs)  # type: ignore[operator]

        patched[name] = original
        setattr(wp, name, counting)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield found
        found += [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if "synchroniz" in str(w.message)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
        for name, original in patched.items():
            setattr(wp, name, original)


@pytest.mark.parametrize("task_id", ["cartpole-balance", "go1-velocity-flat"])
def test_no_host_sync_per_env_step_beyond_the_reset_check(task_id: str) -> None:
    env = _env(task_id, 256, CUDA)
    actions = torch.zeros(env.num_envs, env.num_actions, device=CUDA)
    for _ in range(5):  # compile, capture, settle
        env.step(actions)
    torch.cuda.synchronize()
    per_step: list[list[str]] = []
    for _ in range(20):
        with _counting_host_syncs() as syncs:
            _, _, _, extras = env.step(actions)
        if "episodes" not in extras:  # a step that resets worlds may legitimately do more
            per_step.append(syncs)
    assert per_step, "every step reset some world; nothing to check"
    # The one host sync of a step is the reset check (``dones.nonzero()``: which worlds to reset).
    too_many = [s for s in per_step if len(s) > 1]
    assert not too_many, f"host syncs in one env step beyond the reset check: {too_many[0]}"


def _copy_state(src: MjEnv, dst: MjEnv) -> None:
    """Give ``dst`` the physics state and per-world model parameters of ``src`` (their reset noise differs: torch's
    CPU and CUDA generators draw different numbers from the same seed)."""
    for name in ("qpos", "qvel", "ctrl", "qacc_warmstart"):
        dst.sim.view(name).copy_(src.sim.view(name).to(dst.device))
    for name in dst.task.batched_model_fields:
        dst.sim.model_field(name).copy_(src.sim.model_field(name).to(dst.device))
    dst.sim.forward()


# Tolerances on qpos and qvel after the rollout: float32 on both devices, but kernels differ in reduction order and
# fused multiply-adds, and contacts amplify differences. Measured on an NVIDIA H100 80GB HBM3 (2026-11-25, seeds 0-2,
# 8 worlds): largest error cartpole 3.3e-7 qpos / 1.3e-6 qvel, go1 6.6e-7 / 2.1e-5, humanoid 9.5e-7 / 3.3e-5; the
# bounds leave 30-40x for other GPUs and drivers. Humanoid stops before its feet touch down: on the CPU, a 1e-6
# relative nudge of qpos per step grows to 6e-3 by step 16 and to 0.4 by step 19 (contact timing), while 1e-7 stays
# at 4e-5 over 20 steps.
ROLLOUTS = [
    pytest.param("cartpole-balance", 50, 5e-5, id="cartpole-balance"),
    pytest.param("go1-velocity-flat", 20, 1e-3, id="go1-velocity-flat"),
    pytest.param("humanoid-velocity-flat", 12, 1e-3, id="humanoid-velocity-flat"),
]


@pytest.mark.parametrize(("task_id", "steps", "atol"), ROLLOUTS)
def test_fixed_action_rollout_agrees_on_cpu_and_cuda(task_id: str, steps: int, atol: float) -> None:
    cpu, gpu = _env(task_id, 8, "cpu"), _env(task_id, 8, CUDA)
    _copy_state(cpu, gpu)
    torch.testing.assert_close(gpu.sim.qpos.cpu(), cpu.sim.qpos, rtol=0, atol=1e-6)
    t = torch.arange(steps, dtype=torch.float32)[:, None, None]
    phase = torch.arange(cpu.num_envs * cpu.num_actions, dtype=torch.float32).reshape(1, cpu.num_envs, -1)
    actions = 0.3 * torch.sin(0.3 * t + 0.7 * phase)  # fixed, different per world and actuator
    alive = torch.ones(cpu.num_envs, dtype=torch.bool)
    errors = {"qpos": 0.0, "qvel": 0.0}
    compared = 0
    for a in actions:
        _, _, cpu_dones, _ = cpu.step(a)
        _, _, gpu_dones, _ = gpu.step(a.to(CUDA))
        alive &= ~(cpu_dones | gpu_dones.cpu())  # a reset draws a new random state: compare unbroken episodes only
        compared += int(alive.sum())
        for name in errors:
            diff = (cpu.sim.view(name)[alive] - gpu.sim.view(name).cpu()[alive]).abs()
            errors[name] = max(errors[name], diff.max().item() if diff.numel() else 0.0)
    assert compared >= steps * cpu.num_envs // 2, f"too many worlds reset within {steps} steps: {alive.tolist()}"
    for name, error in errors.items():
        assert error <= atol, f"{task_id}: {name} differs by up to {error:.3g} within {steps} steps (atol {atol})"


def test_warp_runs_on_torchs_current_stream() -> None:
    """A torch write to ``ctrl`` on a non-default stream, right before the graph launch, is seen by that step."""
    env = _env("cartpole-balance", 1024, CUDA)
    sim = env.sim
    ids = torch.arange(env.num_envs, device=CUDA)
    qpos0, qvel0 = sim.qpos.clone(), sim.qvel.clone()
    # Alternating full-scale controls: a step that read the previous step's ctrl would end up far away.
    controls = [torch.full_like(sim.ctrl, 1.0 if i % 2 == 0 else -1.0) for i in range(20)]
    for _ in range(3):
        sim.step()  # compile and capture first
    torch.cuda.synchronize()

    def rollout(stream: torch.cuda.Stream) -> torch.Tensor:
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            sim.reset_worlds(ids, qpos0, qvel0)
            for ctrl in controls:
                torch.cuda._sleep(20_000_000)  # keep the stream busy so a launch on another stream would overtake
                sim.ctrl.copy_(ctrl)
                sim.step()
            result = torch.cat((sim.qpos, sim.qvel), dim=-1).clone()
        torch.cuda.synchronize()
        return result

    assert sim.graph_active
    reference = rollout(torch.cuda.current_stream())
    side = torch.cuda.Stream()
    assert side.cuda_stream != torch.cuda.current_stream().cuda_stream
    torch.testing.assert_close(rollout(side), reference, rtol=0, atol=1e-5)
