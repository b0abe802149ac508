"""What of the GPU acceptance can be checked without a GPU: the ``gpu`` tests are deselected by default and skipped
with the reason under ``-m gpu``; ``scripts/gpu_acceptance.sh`` parses and picks ``uv`` or plain Python; its summary
reads a real (CPU) ``bench --json`` report. No GPU figure is produced or faked here."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import torch

from mjfleet.cli import bench
from mjfleet.train.config import TrainConfig

from .helpers import load_script, run_main

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_acceptance.sh"


def _pytest(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``pytest tests/gpu`` in this process (a fresh interpreter would spend most of a minute importing torch and
    the simulator on a loaded CI machine); its exit code and output."""
    capsys.readouterr()
    code = pytest.main(
        [str(REPO / "tests" / "gpu"), "--rootdir", str(REPO), "-q", "-rs", "-p", "no:cacheprovider", *args]
    )
    return int(code), capsys.readouterr().out


def test_the_default_run_deselects_gpu_tests() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert shlex.split(options["addopts"])[-2:] == ["-m", "not gpu"]  # the last -m wins: `pytest -m gpu` runs them
    assert any(m.startswith("gpu:") for m in options["markers"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available: the GPU tests would really run")
def test_gpu_tests_are_skipped_with_the_reason_under_m_gpu(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the inner run reads pyproject.toml's addopts like the real one
    code, out = _pytest(capsys, "-m", "gpu")
    assert code == pytest.ExitCode.OK, out
    assert "passed" not in out and " skipped" in out
    assert "SKIPPED" in out and "needs a CUDA GPU" in out, out
    # Every test in tests/gpu is marked ``gpu``: -m gpu selected them all.
    assert "deselected" not in out


def test_acceptance_script_parses() -> None:
    assert os.access(SCRIPT, os.X_OK)
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)


def _dry_run(tmp_path: Path, with_uv: bool, uv_exit: int = 99, pythonpath: str | None = None) -> str:
    """The script's ``--dry-run`` with a PATH holding only what it needs (and a ``uv`` stand-in exiting ``uv_exit``
    if asked: the script runs it only to ask whether an offline environment is ready, with PYTHONPATH set)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    for tool in ("dirname",):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    if with_uv:
        (bin_dir / "uv").write_text(f"#!/bin/sh\nexit {uv_exit}\n")
        (bin_dir / "uv").chmod(0o755)
    env = {"PATH": str(bin_dir), "MJFLEET_ACCEPTANCE_OUT": str(tmp_path / "out"), "HOME": str(tmp_path)}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    bash = shutil.which("bash") or "/bin/bash"
    done = subprocess.run([bash, str(SCRIPT), "--dry-run"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out").exists(), "--dry-run runs and creates nothing"
    return done.stdout


def test_script_falls_back_to_python_without_uv(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, with_uv=False)
    python = tmp_path / "bin" / "python3"
    assert f"runner: {python} (no uv: dependencies from PYTHONPATH)" in out
    assert f"+ {python} -m pytest -m gpu tests/gpu" in out
    bench = {line.split()[4]: line for line in out.splitlines() if line.startswith(f"+ {python} -m mjfleet.cli.bench")}
    assert set(bench) == {"cartpole-balance", "go1-velocity-flat", "humanoid-velocity-flat"}
    assert all("--gpu-ids 0 --num-envs 1024 4096 8192" in line for line in bench.values())
    # 2 workers sharing the GPU for the small tasks, the launcher's overhead once.
    assert "--workers 1 2 --workers-per-gpu 2 --launcher-overhead" in bench["go1-velocity-flat"]
    assert "--workers 1 2 --workers-per-gpu 2 --json" in bench["cartpole-balance"]
    assert "--workers" not in bench["humanoid-velocity-flat"]
    assert f"+ {python} scripts/gpu_summary.py" in out


def test_script_uses_uv_where_installed(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, with_uv=True)
    assert "runner: uv run --locked python" in out
    assert "+ env -u PYTHONPATH uv run --locked python -m pytest -m gpu" in out


def test_script_with_an_offline_site_uses_uv_only_if_its_environment_is_ready(tmp_path: Path) -> None:
    # The GPU machine: dependencies unpacked into PYTHONPATH, and a uv (if any) that cannot reach a package index.
    out = _dry_run(tmp_path / "a", with_uv=True, uv_exit=2, pythonpath="/tmp/site")
    assert f"runner: {tmp_path / 'a' / 'bin' / 'python3'} (no uv: dependencies from PYTHONPATH)" in out
    out = _dry_run(tmp_path / "b", with_uv=True, uv_exit=0, pythonpath="/tmp/site")
    assert "runner: uv run --locked python" in out


def _summary_module() -> ModuleType:
    return load_script(REPO / "scripts" / "gpu_summary.py")


def _junit(path: Path, tests: int, skipped: int, reason: str = "CUDA is not available") -> None:
    cases = "".join(f'<testcase name="t{i}"><skipped message="{reason}"/></testcase>' for i in range(skipped))
    suite = f'<testsuite name="pytest" tests="{tests}" failures="0" errors="0" skipped="{skipped}">{cases}</testsuite>'
    path.write_text(f"<testsuites>{suite}</testsuites>")


def test_summary_of_a_real_cpu_bench_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "results" / "bench-cartpole-balance.json"
    argv = ["cartpole-balance", "--gpu-ids", "None", "--num-envs", "8", "--steps", "1"]
    argv += ["--train-num-envs", "8", "--train-iterations", "2", "--json", str(report)]
    code, _, err = run_main(bench.main, argv)
    assert code == 0, err
    data = json.loads(report.read_text())
    assert data["task"] == "cartpole-balance" and data["device"] == "cpu"
    assert {r["num_envs"] for r in data["steps"]} == {8} and data["training"][0]["label"] == "1"
    assert {"warp eager", "warp graph"} <= {r["backend"] for r in data["steps"]}
    assert data["training"][0]["env_steps_per_s"] > 0

    results = report.parent
    (results / "phases.txt").write_text("pytest-gpu 0 60\nbench-cartpole-balance 0 30\n")
    _junit(results / "pytest-gpu.xml", tests=12, skipped=0)
    summary = _summary_module()
    text, ok = summary.summarize(results)
    assert ok, text
    assert "pytest -m gpu: 12 passed, 0 failed, 0 errors, 0 skipped" in text and text.rstrip().endswith("PASS")
    assert "versions: torch " in text and "GPU: " in text
    rows = [line for line in text.splitlines() if line.startswith("cartpole-balance")]
    # Raw physics and env step per backend (warp eager, warp graph, mujoco on the CPU), one training row per backend.
    assert len(rows) == 2 * len(data["steps"]) + len(data["training"]), text
    (graph,) = [row for row in rows if "env step, warp graph" in row]
    assert "env/raw" in graph

    # One GPU: the NCCL test of a frozen rank needs two, and is not held against the machine.
    _junit(results / "pytest-gpu.xml", tests=12, skipped=1, reason="needs two CUDA GPUs: NCCL refuses two ranks on one")
    text, ok = summary.summarize(results)
    assert ok, text
    assert "11 passed, 0 failed, 0 errors, 1 skipped (1 of them needs two CUDA GPUs: not run on this machine)" in text
    _junit(results / "pytest-gpu.xml", tests=12, skipped=12)  # what a machine without CUDA would produce
    text, ok = summary.summarize(results)
    assert not ok and "a skipped one counts against acceptance" in text
    assert summary.main([str(tmp_path / "nothing")]) == 1


def test_a_failing_training_row_keeps_the_other_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mjfleet.benchmark

    real = mjfleet.benchmark.measure_training

    def warp_fails(cfg: TrainConfig) -> object:
        if cfg.env.sim.backend == "warp":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(cfg)

    monkeypatch.setattr(mjfleet.benchmark, "measure_training", warp_fails)
    report = tmp_path / "results" / "bench-cartpole-balance.json"
    argv = ["cartpole-balance", "--gpu-ids", "None", "--skip-steps", "--train-num-envs", "8"]
    argv += ["--train-iterations", "2", "--json", str(report)]
    code, _, err = run_main(bench.main, argv)
    assert code == 1 and "training row 1 failed: RuntimeError: CUDA error: an illegal memory access" in err, err
    training = json.loads(report.read_text())["training"]
    assert [(t["backend"], "error" in t) for t in training] == [("warp", True), ("mujoco", False)]
    assert training[1]["env_steps_per_s"] > 0

    results = report.parent
    (results / "phases.txt").write_text("bench-cartpole-balance 1 30\nbench-go1-velocity-flat 124 600\n")
    text, ok = _summary_module().summarize(results)
    assert not ok
    lines = text.splitlines()
    assert any(
        "PPO, 1 worker in-process, warp" in line and "failed" in line and "illegal memory" in line for line in lines
    )
    assert any(line.startswith("cartpole-balance") and "mujoco" in line and "1.00x" in line for line in lines), text
    assert any(line.startswith("go1-velocity-flat") and "no measurements (exit 124)" in line for line in lines), text


def test_bench_workers_per_gpu_needs_a_gpu() -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--workers", "1", "2", "--workers-per-gpu", "2"]
    code, _, err = run_main(bench.main, argv)
    assert code == 2 and err.count("\n") == 1 and "--workers-per-gpu 2 needs a GPU" in err, err


def test_phases_not_run_because_the_script_was_stopped_are_said_so(tmp_path: Path) -> None:
    (tmp_path / "phases.txt").write_text("pytest-gpu 130 41\nbench-go1-velocity-flat stopped 0\n")
    text, ok = _summary_module().summarize(tmp_path)
    assert not ok
    assert "pytest-gpu FAILED (130) 41 s; bench-go1-velocity-flat not run (stopped) 0 s" in text
    assert any(
        line.startswith("go1-velocity-flat") and "no measurements (stopped)" in line for line in text.splitlines()
    )
