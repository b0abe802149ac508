"""One summary table of a ``scripts/gpu_acceptance.sh`` run: the GPU, driver and versions, the outcome of every phase,
``pytest -m gpu``'s counts and the ``bench`` measurements. Exit code 0 only when the acceptance run passed.

    python scripts/gpu_summary.py RESULTS_DIR

Reads ``RESULTS_DIR/phases.txt`` (``name exit_code seconds`` per line; ``stopped`` for a phase not run),
``pytest-gpu.xml`` (JUnit) and ``bench-<task>.json`` (written by ``bench --json``). Standard library only, plus torch
where installed (CUDA version).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

PACKAGES = ("torch", "warp-lang", "mujoco", "mujoco-warp", "rsl-rl-lib", "torchrunx", "tensordict")


def gpu_line() -> str:
    """GPU 0's name, memory and driver (``nvidia-smi``), and the CUDA version torch was built with."""
    gpu = "unknown GPU (nvidia-smi not found)"
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "-i", "0", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
        try:
            fields = [
                f.strip() for f in subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.split(",")
            ]
            if len(fields) == 3:
                gpu = f"{fields[0]} ({fields[1]}), driver {fields[2]}"
        except (OSError, subprocess.SubprocessError) as e:
            gpu = f"unknown GPU (nvidia-smi failed: {e})"
    try:
        import torch

        cuda = f"CUDA {torch.version.cuda} (torch build)"
    except ImportError:
        cuda = "torch not importable"
    return f"GPU: {gpu}; {cuda}; Python {platform.python_version()}"


def versions_line() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} ?")
    return "versions: " + ", ".join(found)


def read_phases(out: Path) -> list[tuple[str, int | None, int]]:
    """``(name, exit code, seconds)`` of every phase; the code None for a phase not run because the script was
    stopped (``name stopped 0``)."""
    path = out / "phases.txt"
    if not path.is_file():
        return []
    phases: list[tuple[str, int | None, int]] = []
    for line in path.read_text().splitlines():
        name, code, seconds = line.split()
        phases.append((name, None if code == "stopped" else int(code), int(seconds)))
    return phases


def _outcome(code: int | None) -> str:
    return "not run (stopped)" if code is None else "ok" if code == 0 else f"FAILED ({code})"


MORE_GPUS = "needs two CUDA GPUs"
"""The skip reason of a GPU test that one GPU cannot run (NCCL refuses two ranks on one GPU): not run here, and not
held against a machine with one GPU."""


def read_pytest(out: Path) -> dict[str, int] | None:
    """Counts of the JUnit report: tests, failures, errors, skipped (summed over its test suites), and of the
    skipped ones those that need more GPUs than the machine has (``more_gpus``)."""
    path = out / "pytest-gpu.xml"
    if not path.is_file():
        return None
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    counts["more_gpus"] = sum(MORE_GPUS in (e.get("message") or "") for e in root.iter("skipped"))
    return counts


def bench_rows(report: dict) -> list[tuple[str, str, str, str, str]]:
    """(task, measurement, envs per worker, env-steps/s, comparison) rows of one ``bench --json`` report."""
    task = report["task"]
    rows = []
    graph = {r["num_envs"]: r["env"] for r in report["steps"] if r["backend"] == "warp graph"}
    for r in report["steps"]:
        n = r["num_envs"]
        versus = f"; {r['env'] / graph[n]:.2f}x warp graph" if n in graph and r["backend"] != "warp graph" else ""
        rows += [
            (task, f"raw physics, {r['backend']}", str(n), _rate(r["raw"]), ""),
            (task, f"env step, {r['backend']}", str(n), _rate(r["env"]), f"env/raw {r['env'] / r['raw']:.0%}{versus}"),
        ]
    training = report["training"]
    measured = [t for t in training if "error" not in t]
    base = measured[0]["env_steps_per_s"] if measured else 1.0
    for t in training:
        label = t["label"]
        what = "PPO, 1 worker in-process" if label == "1" else f"PPO, {label} worker(s)"
        what += f", {t['backend']}" if t.get("backend") else ""
        if "error" in t:
            rows.append((task, what, "-", "failed", str(t["error"])[:100]))
            continue
        note = f"{t['env_steps_per_s'] / base:.2f}x; sync {t['sync_share']:.1%}; wall {t['wall_s']:.1f} s"
        rows.append((task, what, str(t["num_envs"]), _rate(t["env_steps_per_s"]), note))
    return rows


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    right = {2, 3}  # numbers
    line = "  ".join("-" * w for w in widths)

    def fmt(row: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    return "\n".join([fmt(header), line, *(fmt(r) for r in rows)])


def summarize(out: Path) -> tuple[str, bool]:
    """The summary text and whether the acceptance run passed."""
    problems = []
    phases = read_phases(out)
    if not phases:
        problems.append("no phases ran")
    problems += [
        f"{name} {'not run (stopped)' if code is None else f'exited {code}'}" for name, code, _ in phases if code != 0
    ]
    counts = read_pytest(out)
    if counts is None:
        problems.append("no pytest report")
        tests = "pytest -m gpu: no report"
    else:
        passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        tests = (
            f"pytest -m gpu: {passed} passed, {counts['failures']} failed, {counts['errors']} errors,"
            f" {counts['skipped']} skipped"
        )
        if counts["more_gpus"]:
            tests += f" ({counts['more_gpus']} of them {MORE_GPUS}: not run on this machine)"
        if counts["tests"] == 0 or passed + counts["more_gpus"] != counts["tests"]:
            problems.append("not every GPU test passed (a skipped one counts against acceptance)")
    rows: list[tuple[str, ...]] = []
    machines = set()
    for path in sorted(out.glob("bench-*.json")):
        report = json.loads(path.read_text())
        machines.add(report["machine"])
        rows += bench_rows(report)
    for name, code, _ in phases:  # a bench phase that ended before its first table
        if name.startswith("bench-") and not (out / f"{name}.json").is_file():
            rows.append(
                (
                    name.removeprefix("bench-"),
                    "bench",
                    "-",
                    "-",
                    "no measurements (" + ("stopped" if code is None else f"exit {code}") + ")",
                )
            )
    lines = ["GPU acceptance summary", gpu_line(), versions_line()]
    lines += [f"bench machine: {m}" for m in sorted(machines)]
    lines.append("phases: " + "; ".join(f"{n} {_outcome(c)} {s} s" for n, c, s in phases))
    lines.append(tests)
    if rows:
        lines += ["", table(("task", "measurement", "envs/worker", "env-steps/s", "comparison"), rows)]
    ok = not problems
    lines += ["", "ACCEPTANCE: PASS" if ok else f"ACCEPTANCE: FAIL ({'; '.join(problems)})"]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: gpu_summary.py RESULTS_DIR\n")
        return 2
    text, ok = summarize(Path(argv[0]))
    sys.stdout.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
