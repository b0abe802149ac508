"""``scripts/gpu_time_to_walk.sh`` without a GPU: its ``--dry-run``, a whole sweep with a stand-in interpreter whose
``train`` and ``play`` print lines made by mjfleet's own formatters (and leave a ``progress.jsonl`` written by its
own writer), and ``scripts/gpu_walk_summary.py``'s tables of such a results folder. No GPU figure is produced or
faked here: the numbers are the fabricated inputs'."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from mjfleet.rl.reporting.progress import Progress, progress_block, progress_line
from mjfleet.rl.reporting.records import IterationRecord, append_progress
from mjfleet.runs.ending import RunEnd, ending_lines
from mjfleet.runs.record import RunRecord
from mjfleet.train.startup import StartupClock

from .helpers import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_time_to_walk.sh"
BASH = shutil.which("bash") or "/bin/bash"
STEPS = 24  # env steps per environment per iteration (the runs' --agent.num-steps-per-env)


def _summary() -> ModuleType:
    return load_script(REPO / "scripts" / "gpu_walk_summary.py")


def _script(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MJFLEET_WALK_OUT": str(tmp_path / "out")}
    return subprocess.run(
        [BASH, str(SCRIPT), *args], env={**base, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def test_script_parses_and_has_help(tmp_path: Path) -> None:
    assert os.access(SCRIPT, os.X_OK)
    subprocess.run([BASH, "-n", str(SCRIPT)], check=True, timeout=30)
    done = _script(tmp_path, "--help")
    assert done.returncode == 0 and "MJFLEET_WALK_NUM_ENVS" in done.stdout and "--dry-run" in done.stdout
    assert _script(tmp_path, "--bogus").returncode == 2


def _dry_run(tmp_path: Path, **env: str) -> list[str]:
    """``--dry-run`` with a PATH of python3 and what the script needs to print its plan (no uv)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)
        (bin_dir / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    done = _script(tmp_path, "--dry-run", PATH=str(bin_dir), **env)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out").exists(), "--dry-run runs and creates nothing"
    return done.stdout.splitlines()


def test_dry_run_prints_the_sweep_and_its_bound(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path)
    python = tmp_path / "bin" / "python3"
    out = tmp_path / "out"
    assert f"runner: {python} (no uv: dependencies from PYTHONPATH)" in lines
    assert any(line.startswith("plan: 8 phases, one after another; at most 580 s") for line in lines), lines
    commands = [line for line in lines if line.startswith("+ ")]
    trains = [c for c in commands if " -m mjfleet.cli.train " in c]
    plays = [c for c in commands if " -m mjfleet.cli.play " in c]
    assert trains == [
        f"+ {python} -m mjfleet.cli.train go1-velocity-flat --gpu-ids 0 --env.num-envs {n} --stop-when 'success>=0.95'"
        f" --log-root {out}/runs/go1-velocity-flat-{n}"
        for n in (1024, 4096, 8192, 16384)
    ]
    assert len(plays) == 4 and all("--gpu-ids 0 --checkpoint '<newest model_*.pt under" in c for c in plays)
    assert all(c.endswith("--num-episodes 100") for c in plays)
    assert commands[-1] == f"+ {python} scripts/gpu_walk_summary.py {out}"
    assert commands.index(plays[0]) == commands.index(trains[0]) + 1  # one after another: train, its play, ...


def test_dry_run_with_the_fresh_machine_phase(tmp_path: Path) -> None:
    env = {"MJFLEET_WALK_FRESH": "1", "MJFLEET_WALK_NUM_ENVS": "4096", "MJFLEET_WALK_TRAIN_ARGS": "--agent.x 1"}
    lines = _dry_run(tmp_path, **env)
    out = tmp_path / "out"
    # (200 + 45) for the fresh run and the warm one, (100 + 45) for 4096.
    assert any(line.startswith("plan: 6 phases, one after another; at most 635 s") for line in lines), lines
    caches = (
        f"env WARP_CACHE_PATH={out}/caches/go1-velocity-flat/warp CUDA_CACHE_PATH={out}/caches/go1-velocity-flat/cuda"
    )
    trains = [line for line in lines if " -m mjfleet.cli.train " in line]
    assert [t.split("--log-root ")[1] for t in trains] == [
        f"{out}/runs/go1-velocity-flat-{label}" for label in ("fresh", "warm", "4096")
    ]
    assert all(t.startswith(f"+ {caches} ") for t in trains), trains
    # The defaults: no --env.num-envs and none of the sweep's extra flags.
    assert (
        "--env.num-envs" not in trains[0]
        and "--agent.x" not in trains[0]
        and trains[0] == trains[1].replace("-warm", "-fresh")
    )
    assert trains[2].endswith(
        f"--env.num-envs 4096 --stop-when 'success>=0.95' --agent.x 1 --log-root {out}/runs/go1-velocity-flat-4096"
    )


def _rich(message: str, level: str = "INFO") -> str:
    """A record as mjfleet's log handler writes it to a file (time, level, message; lines padded to the width)."""
    first, *more = message.splitlines()
    lines = [f"[12:00:00] {level:<8} {first}", *(f"{' ' * 20}{line}" for line in more)]
    return "\n".join(line.ljust(300) for line in lines)


def train_log(num_envs: int, iterations: list[tuple[int, float, float]], end: RunEnd) -> str:
    """A train log: a progress line per (iteration, elapsed s, env-steps/s), a block every 50th, the last lines."""
    final = end.final_iteration or 0
    records = []
    for it, elapsed, rate in iterations:
        p = Progress(
            iteration=it,
            final=final,
            elapsed_s=elapsed,
            run_elapsed_s=None,
            eta_s=None if it == 1 else 100.0,
            env_steps=it * num_envs * STEPS,
            env_steps_per_s=rate,
            collect_s=0.3,
            learn_s=0.1,
            episode={"Episode/success": 0.5},
            evaluation={"Eval/success": 0.6},
            evaluation_episodes=50,
            evaluation_window=50,
            stop_when="success>=0.95 (1 iterations in a row)",
        )
        records.append(_rich(progress_block(p) if it % 50 == 0 else progress_line(p)))
        if it == 1:  # the start-up line (the script sets COLUMNS wide enough that no line wraps)
            clock = StartupClock(process_started=0.0, worker_started=8.0, marks=[("simulation", 11.0), ("PPO", 11.5)])
            records.append(_rich(clock.describe(12.5 + num_envs / 4096)))
    level = {"failed": "ERROR", "stopped": "WARNING"}.get(end.how, "INFO")
    records += [_rich(line, level) for line in ending_lines(end)]
    return "\n".join([_rich("training go1-velocity-flat on cuda:0"), *records]) + "\n"


def write_progress(run_dir: Path, num_envs: int, iterations: list[tuple[int, float, float]]) -> None:
    """The run's ``progress.jsonl`` as rank 0 writes it: a record per (iteration, elapsed s, env-steps/s)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for it, elapsed, rate in iterations:
        record = IterationRecord(
            iteration=it,
            losses={"value": 0.1},
            episode={"Episode/success": 0.5},
            env_steps_per_s=rate,
            collect_s=0.3,
            learn_s=0.1,
            sync_s=0.0,
            evaluation={"Eval/success": 0.6},
            evaluation_episodes=50,
            env_steps=it * num_envs * STEPS,
            elapsed_s=elapsed,
            run_elapsed_s=elapsed,
        )
        append_progress(run_dir, record)


def _end(how: str, num_envs: int, last: int | None, wall_s: float, detail: str = "") -> RunEnd:
    return RunEnd(
        how=how,  # type: ignore[arg-type]
        task="go1-velocity-flat",
        run_dir=None,
        started_at=0 if last is not None else None,
        final_iteration=1500 if last is not None else None,
        last_iteration=last,
        env_steps_per_iteration=num_envs * STEPS,
        wall_s=wall_s,
        detail=detail,
    )


def job(num_envs: int, how: str | None, iteration: int | None, message: str | None = None) -> dict[str, object]:
    ended = None if how is None else {"how": how, "iteration": iteration, "message": message}
    record = RunRecord("0" * 16, {"env.num_envs": num_envs}, "go1-velocity-flat", 1500, ended=ended)
    return dataclasses.asdict(record)


FAKE_PYTHON = r"""#!/usr/bin/env bash
# Stands in for python: `-c` (the CUDA check) succeeds; train and play replay what the test prepared under DATA/<label>.
data=__DATA__
[[ $1 == -c ]] && exit 0
[[ $1 == -m ]] || exit 0  # the summary: the test runs it in-process
module=$2; root=; ckpt=
while (($#)); do
  case $1 in --log-root) root=$2 ;; --checkpoint) ckpt=$2 ;; esac
  shift
done
if [[ $module == mjfleet.cli.play ]]; then
  echo "loading $ckpt" >&2
  printf '{"task": "go1-velocity-flat", "checkpoint": "%s", "success_rate": 0.97, "lin_vel_error": 0.1}\n' "$ckpt"
  exit 0
fi
label=${root##*-}; d=$data/$label; run=$root/go1_velocity/2026-01-01_00-00-00
echo "cache: ${WARP_CACHE_PATH:-default}" >"$d/seen"
mode=$(cat "$d/mode")
if [[ $mode == fail ]]; then cat "$d/log" >&2; exit 1; fi
mkdir -p "$run"
touch "$run/model_9.pt" "$run/model_10.pt" "$run/model_x.pt"  # the newest is 10, not 9
if [[ $mode == interrupted ]]; then cp "$d/job.json" "$run/job.json"; cat "$d/log" >&2; exit 130; fi  # a Ctrl-C
if [[ -f $d/progress.jsonl ]]; then cp "$d/progress.jsonl" "$run/progress.jsonl"; fi
if [[ $mode == slow ]]; then
  echo '{"fingerprint": "0000000000000000", "settings": {}, "task": "t", "final_iteration": 1500}' >"$run/job.json"
  trap 'kill $! 2>/dev/null; cp "$d/job.json" "$run/job.json"; cat "$d/log" >&2; exit 143' TERM
  sleep 30 &
  wait
fi
cp "$d/job.json" "$run/job.json"
cat "$d/log" >&2
"""


def _prepare(
    data: Path,
    label: str,
    mode: str,
    log: str,
    record: dict[str, object] | None,
    progress: tuple[int, list[tuple[int, float, float]]] | None = None,
) -> None:
    (data / label).mkdir(parents=True)
    (data / label / "mode").write_text(mode)
    (data / label / "log").write_text(log)
    (data / label / "job.json").write_text(json.dumps(record))
    if progress is not None:
        write_progress(data / label, *progress)


def test_a_sweep_with_a_stand_in_interpreter(tmp_path: Path) -> None:
    """The script's own work: order, time limits, the checkpoint it plays, what it records for a stopped, a met and
    a failed run, and the kernel caches of the fresh-machine phase."""
    data = tmp_path / "data"
    fast = [(1, 5.0, 2.0e5), (2, 6.0, 3.1e5), (3, 7.0, 3.3e5)]
    for label in ("fresh", "warm", "4096"):
        end = _end("condition", 4096, 3, 20.0, "success>=0.95")
        _prepare(data, label, "ok", train_log(4096, fast, end), job(4096, "condition", 3), (4096, fast))
    stopped = _end("stopped", 1024, 3, 1.0, "SIGTERM")
    _prepare(data, "1024", "slow", train_log(1024, fast, stopped), job(1024, "stopped", 3), (1024, fast))
    failed = _end("failed", 8192, None, 9.0, "CUDA error: out of memory")
    _prepare(data, "8192", "fail", train_log(8192, [], failed), None)
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.replace("__DATA__", str(data)))
    fake.chmod(0o755)

    env = {"MJFLEET_PYTHON": str(fake), "MJFLEET_WALK_NUM_ENVS": "1024 4096 8192", "MJFLEET_WALK_LIMIT_S": "1"}
    done = _script(tmp_path, MJFLEET_WALK_FRESH="1", **env)
    assert done.returncode == 0, done.stdout + done.stderr  # the stand-in's summary call
    out = tmp_path / "out"
    phases = _phases(out)
    assert phases == [
        ["train-go1-velocity-flat-fresh", "0"],
        ["play-go1-velocity-flat-fresh", "0"],
        ["train-go1-velocity-flat-warm", "0"],
        ["play-go1-velocity-flat-warm", "0"],
        ["train-go1-velocity-flat-1024", "124"],  # its limit of 1 s: SIGTERM, a checkpoint, then its exit
        ["play-go1-velocity-flat-1024", "0"],
        ["train-go1-velocity-flat-4096", "0"],
        ["play-go1-velocity-flat-4096", "0"],
        ["train-go1-velocity-flat-8192", "1"],
        ["play-go1-velocity-flat-8192", "no-checkpoint"],
    ], done.stdout
    assert "time limit of 1 s reached" in done.stdout and "FAILED (exit 1)" in done.stdout
    played = json.loads((out / "play-go1-velocity-flat-4096.json").read_text())
    assert played["checkpoint"].endswith("runs/go1-velocity-flat-4096/go1_velocity/2026-01-01_00-00-00/model_10.pt")
    assert (out / "play-go1-velocity-flat-4096.log").read_text().startswith("loading ")
    # Every run of the task, the sweep included, uses the caches the fresh run started empty.
    caches = out / "caches" / "go1-velocity-flat"
    assert {(data / label / "seen").read_text().strip() for label in ("fresh", "warm", "1024", "4096")} == {
        f"cache: {caches / 'warp'}"
    }
    assert (caches / "cuda").is_dir()

    summary = _summary()
    text, ok = summary.summarize(out)
    assert not ok and "Phases not run or failed: train-go1-velocity-flat-8192, play-go1-velocity-flat-8192" in text
    cells = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")]
    rows = {row[0].removeprefix("| "): row for row in cells[2:]}
    assert rows["4096 (defaults, empty kernel cache)"][3:6] == ["3 of 1500", "stop condition held", "0.97"]
    assert rows["1024"][3:6] == ["3 of 1500", "time limit (1 s), stopped by SIGTERM", "0.97"]
    assert rows["4096"][3:6] == ["3 of 1500", "stop condition held", "0.97"]
    assert rows["8192"][3:6] == ["-", "failed: CUDA error: out of memory (exit 1)", "no checkpoint"]
    assert rows["4096"][7] == "320k |" and rows["1024"][7] == "320k |"  # from progress.jsonl: after the first
    assert (
        "-m mjfleet.cli.train go1-velocity-flat --gpu-ids 0 --env.num-envs 1024 --stop-when 'success>=0.95'"
        " --log-root <out>/runs/go1-velocity-flat-1024`" in text
    )


def _phases(out: Path) -> list[list[str]]:
    """Each phase's name and outcome, in the order ``phases.txt`` records them."""
    return [line.split()[:2] for line in (out / "phases.txt").read_text().splitlines()]


def _stopped_stand_in(tmp_path: Path, mode: str, signal_name: str) -> tuple[Path, Path]:
    """The stand-in's data (its 1024-environment train stopped by ``signal_name`` in ``mode``) and interpreter."""
    data = tmp_path / "data"
    rows = [(1, 5.0, 2.0e5), (2, 6.0, 3.1e5)]
    stopped = _end("stopped", 1024, 2, 6.0, signal_name)
    _prepare(data, "1024", mode, train_log(1024, rows, stopped), job(1024, "stopped", 2), (1024, rows))
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.replace("__DATA__", str(data)))
    fake.chmod(0o755)
    return data, fake


def test_a_phase_stopped_from_outside_stops_the_sweep(tmp_path: Path) -> None:
    """A Ctrl-C or a session's SIGTERM ends the phase that runs; no later phase starts (each was a minute or more)."""
    data, fake = _stopped_stand_in(tmp_path, "interrupted", "SIGINT")
    done = _script(tmp_path, MJFLEET_PYTHON=str(fake), MJFLEET_WALK_NUM_ENVS="1024 4096")
    phases = _phases(tmp_path / "out")
    assert phases == [
        ["train-go1-velocity-flat-1024", "130"],
        ["play-go1-velocity-flat-1024", "stopped"],
        ["train-go1-velocity-flat-4096", "stopped"],
        ["play-go1-velocity-flat-4096", "stopped"],
    ], done.stdout + done.stderr
    assert not (data / "4096").exists()  # never prepared: a start would have failed on it
    text, ok = _summary().summarize(tmp_path / "out")
    assert not ok and "skipped: the script was stopped" in text and "skipped (stopped)" in text


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_script_reaches_the_training_it_runs(tmp_path: Path, signum: int) -> None:
    """A Ctrl-C (SIGINT to the script alone: timeout(1) keeps its command in a process group of its own) or a
    SIGTERM ends the running train at once, which checkpoints and exits; nothing later starts."""
    data, fake = _stopped_stand_in(tmp_path, "slow", "SIGTERM")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MJFLEET_WALK_OUT": str(tmp_path / "out")}
    env |= {"MJFLEET_PYTHON": str(fake), "MJFLEET_WALK_NUM_ENVS": "1024 4096", "MJFLEET_WALK_LIMIT_S": "60"}
    script = subprocess.Popen([BASH, str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started = data / "1024" / "seen"
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the stand-in's trap is set
    began = time.monotonic()
    script.send_signal(signum)
    out, _ = script.communicate(timeout=30)
    assert time.monotonic() - began < 10, out  # the stand-in would sleep 30 s
    phases = _phases(tmp_path / "out")
    assert phases == [
        ["train-go1-velocity-flat-1024", "143"],
        ["play-go1-velocity-flat-1024", "stopped"],
        ["train-go1-velocity-flat-4096", "stopped"],
        ["play-go1-velocity-flat-4096", "stopped"],
    ], out


def _train_roots(tmp_path: Path, **env: str) -> list[str]:
    """The log roots of the training runs a dry run prints, in order (``<task>-<label>``)."""
    done = _script(tmp_path, "--dry-run", **env)
    assert done.returncode == 0, done.stderr
    return [line.rsplit("/runs/", 1)[1] for line in done.stdout.splitlines() if " -m mjfleet.cli.train " in line]


def test_every_task_s_first_rows_come_before_any_task_s_further_env_counts(tmp_path: Path) -> None:
    tasks = "go1-velocity-flat unitree-go1-velocity-flat"
    assert _train_roots(tmp_path, MJFLEET_WALK_TASKS=tasks, MJFLEET_WALK_NUM_ENVS="1024 4096") == [
        "go1-velocity-flat-1024",
        "unitree-go1-velocity-flat-1024",
        "go1-velocity-flat-4096",
        "unitree-go1-velocity-flat-4096",
    ]
    fresh = {"MJFLEET_WALK_TASKS": tasks, "MJFLEET_WALK_NUM_ENVS": "4096", "MJFLEET_WALK_FRESH": "1"}
    assert _train_roots(tmp_path, **fresh) == [
        "go1-velocity-flat-fresh",
        "go1-velocity-flat-warm",
        "unitree-go1-velocity-flat-fresh",
        "unitree-go1-velocity-flat-warm",
        "go1-velocity-flat-4096",
        "unitree-go1-velocity-flat-4096",
    ]


def _results(tmp_path: Path) -> Path:
    """A results folder as the script leaves it, with chosen times: a fresh and a warm run at the defaults, 4096
    environments meeting the condition, 16384 stopped by the time limit."""
    out = tmp_path / "results"
    out.mkdir()
    task = "go1-velocity-flat"
    plan = [("fresh", 200), ("warm", 200), ("4096", 100), ("16384", 100)]
    (out / "plan.txt").write_text("".join(f"train-{task}-{label} {s}\nplay-{task}-{label} 45\n" for label, s in plan))
    (out / "about.txt").write_text("started: 2026-12-01T10:00:00Z\ncommit: abc1234\nstop_when: success>=0.95\n")
    (out / "environment.txt").write_text("GPU: NVIDIA H100 80GB HBM3 (81559 MiB), driver 580\nversions: torch 2\n")
    runs = {
        # label: (num_envs, exit code, seconds, progress (iteration, elapsed, env-steps/s), ending, play)
        "fresh": (4096, 0, 140.0, [(1, 75.0, 1e5), (2, 75.5, 2.6e5), (128, 125.0, 2.7e5)], "condition", 0.98),
        "warm": (4096, 0, 70.0, [(1, 6.0, 1e5), (2, 6.5, 2.6e5), (128, 56.0, 2.7e5)], "condition", 0.96),
        "4096": (
            4096,
            0,
            69.5,
            [(1, 6.0, 1e5), (2, 6.5, 2.6e5), (3, 7.0, 2.8e5), (128, 56.0, 2.7e5)],
            "condition",
            0.98,
        ),
        "16384": (16384, 124, 101.2, [(1, 7.0, 2e5), (2, 8.0, 5.1e5), (80, 92.0, 4.9e5)], "stopped", 0.88),
    }
    phases = []
    t = 1_000_000.0
    for label, (n, code, seconds, progress, how, success) in runs.items():
        last = progress[-1][0]
        end = _end(how, n, last, seconds - 0.5, "success>=0.95" if how == "condition" else "SIGTERM")
        (out / f"train-{task}-{label}.log").write_text(train_log(n, progress, end))
        run = out / "runs" / f"{task}-{label}" / "go1_velocity" / "2026-12-01_10-00-00"
        run.mkdir(parents=True)
        RunRecord(**job(n, how, last)).write(run)  # type: ignore[arg-type]
        write_progress(run, n, progress)
        result = {"task": task, "agent": "policy", "success_rate": success, "lin_vel_error": 0.092}
        (out / f"play-{task}-{label}.json").write_text(json.dumps(result) + "\n")
        phases += [f"train-{task}-{label} {code} {t:.6f} {t + seconds:.6f}", f"play-{task}-{label} 0 {t} {t + 20}"]
        t += 1000
    (out / "phases.txt").write_text("\n".join(phases) + "\n")
    return out


def test_summary_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _results(tmp_path)
    summary = _summary()
    assert summary.main(["--quiet", str(out)]) == 0 and capsys.readouterr().out == ""
    text = (out / "summary.md").read_text()
    assert "- GPU: NVIDIA H100 80GB HBM3 (81559 MiB), driver 580" in text
    assert "- started 2026-12-01T10:00:00Z, commit abc1234" in text and "`--stop-when 'success>=0.95'`" in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table == [
        "| env count | command to exit (s) | overhead (s) | iterations | how it ended | `play` success"
        " | planar error (m/s) | training env-steps/s |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
        "| 4096 (defaults, empty kernel cache) | 140.0 | 90 | 128 of 1500 | stop condition held | 0.98 | 0.092"
        " | 265k |",
        "| 4096 (defaults, warm kernel cache) | 70.0 | 20 | 128 of 1500 | stop condition held | 0.96 | 0.092 | 265k |",
        "| 4096 | 69.5 | 20 | 128 of 1500 | stop condition held | 0.98 | 0.092 | 270k |",
        "| 16384 | 101.2 | 16 | 80 of 1500 | time limit (100 s), stopped by SIGTERM | 0.88 | 0.092 | 500k |",
    ]
    assert "Compile share of the fresh run: 70 s of its 140 s (50%)" in text
    assert (
        "- 16384: first iteration done 16.5 s after the process started: imports, plan and launch 8.0 s, simulation"
        " 3.0 s, PPO 0.50 s, first iteration 5.0 s"
    ) in text.splitlines()
    assert text.rstrip().endswith("Every phase ran.")
    assert summary.main([str(out)]) == 0 and capsys.readouterr().out == text

    # A sweep cut short: what did not run says so, and the summary fails.
    lines = (out / "phases.txt").read_text().splitlines()
    (out / "phases.txt").write_text("\n".join(lines[:-2]) + "\n")
    shutil.rmtree(out / "runs" / "go1-velocity-flat-16384")
    for name in ("train-go1-velocity-flat-16384.log", "play-go1-velocity-flat-16384.json"):
        (out / name).unlink()
    text, ok = summary.summarize(out)
    assert not ok and "| 16384 | - | - | - | not run | not run | - | - |" in text


def test_a_phase_that_no_longer_fits_the_budget_is_skipped(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")  # passes the CUDA check; nothing else may run
    fake.chmod(0o755)
    env = {"MJFLEET_PYTHON": str(fake), "MJFLEET_WALK_NUM_ENVS": "4096", "MJFLEET_WALK_BUDGET_S": "60"}
    done = _script(tmp_path, MJFLEET_COMMIT="abc1234", **env)  # a copy of the checkout without .git says its commit
    assert "skipped: 100 s no longer fit the budget of 60 s" in done.stdout, done.stdout
    out = tmp_path / "out"
    assert "commit: abc1234" in (out / "about.txt").read_text().splitlines()
    assert (out / "phases.txt").read_text().splitlines() == [
        "train-go1-velocity-flat-4096 skipped - -",
        "play-go1-velocity-flat-4096 no-checkpoint - -",
    ]
    text, ok = _summary().summarize(out)
    assert (
        not ok and "| 4096 | - | - | - | skipped: its limit no longer fit the budget | no checkpoint | - | - |" in text
    )
