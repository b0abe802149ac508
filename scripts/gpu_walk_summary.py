"""The tables of a ``scripts/gpu_time_to_walk.sh`` run: per task, each training run's time from the command to its exit,
how it ended, and ``play`` success of the checkpoint it wrote; the GPU, the date and the commit above them. Writes
``RESULTS_DIR/summary.md`` and prints it (``--quiet``: only writes it). Exit code 0 when every planned phase ran and
none failed (a training run stopped at its time limit is a result, not a failure).

    python scripts/gpu_walk_summary.py [--quiet] RESULTS_DIR

Reads ``plan.txt`` (``name limit_s`` per line, in order), ``phases.txt`` (``name exit_code start end``, epoch seconds;
``name skipped - -`` (budget), ``name stopped - -`` or ``name no-checkpoint - -`` for a phase that did not run),
``commands.txt``, ``about.txt``, each ``train-<task>-<label>.log`` (its start-up line and last lines), the run's
``job.json`` and ``progress.jsonl`` (one record per iteration) under ``runs/<task>-<label>/`` and each
``play-<task>-<label>.json`` (``play``'s JSON line). Nothing is estimated: a figure the files do not hold is ``-``.
Standard library only, plus what ``gpu_summary.py`` uses for the GPU line.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_summary import gpu_line, versions_line

TIMEOUT = 124  # what `timeout` exits with when the limit stopped the command (SIGTERM honoured)
RICH_PREFIX = re.compile(r"^\[[^\]]*\]\s+(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+")
PROGRESS_FILE = "progress.jsonl"  # every iteration's record, one JSON line each (mjfleet.rl.reporting.records)
# `... (128 iterations, 12,582,912 env-steps in 1:08 from the command)` (mjfleet.runs.ending)
HEADLINE = re.compile(r"^(.*?) \((?:(\d+) iterations?, ([\d,]+) env-steps in )?(\d+(?::\d\d)+) from the command\)$")
# `start-up: first iteration done 12.3 s after the process started: ...` (mjfleet.train.startup)
STARTUP = "start-up: "


@dataclass
class TrainLog:
    """What a ``train`` command's log and its run's ``progress.jsonl`` say."""

    iterations: list[tuple[int, float, float]] = field(default_factory=list)
    """(iteration, seconds since this start began training, env-steps/s of that iteration) per iteration of the
    command's start, from ``progress.jsonl``."""
    headline: str | None = None
    """The first of the run's last lines, without its time part: ``finished at iteration 128 of 1500: ...``."""
    startup: str | None = None
    """The run's start-up line after ``start-up: `` (where the time before the first iteration went)."""


@dataclass
class Phase:
    name: str
    limit: int
    status: str | None = None
    """The exit code, ``skipped`` (budget), ``no-checkpoint``; None: not run (yet)."""
    seconds: float | None = None
    command: str | None = None

    @property
    def code(self) -> int | None:
        return int(self.status) if self.status is not None and self.status.lstrip("-").isdigit() else None


def rate(value: float) -> str:
    return f"{value / 1e3:.0f}k" if value >= 1e4 else f"{value:,.0f}"


def read_train_log(path: Path, log_root: Path) -> TrainLog:
    """The last lines and the start-up line of the command's log ``path``, and the iterations of its run under
    ``log_root``."""
    log = TrainLog(iterations=read_progress(log_root))
    if not path.is_file():
        return log
    for raw in path.read_text(errors="replace").splitlines():
        line = RICH_PREFIX.sub("", raw).strip()
        if (m := HEADLINE.match(line)) and line.endswith("from the command)"):
            log.headline = m[1]
        elif line.startswith(STARTUP) and log.startup is None:
            log.startup = line.removeprefix(STARTUP)
    return log


def read_progress(log_root: Path) -> list[tuple[int, float, float]]:
    """(iteration, elapsed s, env-steps/s) of the last start in the run's ``progress.jsonl``, where there is exactly
    one run under the root (a continued run's earlier starts come first in the file: each start's elapsed time and
    iterations begin again)."""
    found = sorted(log_root.glob(f"*/*/{PROGRESS_FILE}"))
    if len(found) != 1:
        return []
    try:
        lines = found[0].read_text().splitlines()
    except OSError:
        return []
    iterations: list[tuple[int, float, float]] = []
    for line in lines:
        try:
            record = json.loads(line)
            entry = (int(record["iteration"]), float(record["elapsed_s"]), float(record["env_steps_per_s"]))
        except (ValueError, TypeError, KeyError):
            continue  # a line cut short by a killed process
        if iterations and (entry[0] <= iterations[-1][0] or entry[1] < iterations[-1][1]):
            iterations = []  # another start of the run
        iterations.append(entry)
    return iterations


def read_job(log_root: Path) -> dict | None:
    """The run's ``job.json`` (mjfleet.runs.record.RunRecord), where there is exactly one under the root."""
    found = sorted(log_root.glob("*/*/job.json"))
    if len(found) != 1:
        return None
    try:
        return json.loads(found[0].read_text())
    except (OSError, ValueError):
        return None


def read_play(path: Path) -> dict | None:
    """``play``'s JSON line: the last line of its stdout that parses."""
    if not path.is_file():
        return None
    for line in reversed(path.read_text(errors="replace").splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "success_rate" in data:
            return data
    return None


def read_phases(out: Path) -> list[Phase]:
    """The planned phases in order, each with its outcome where it ran."""
    plan = out / "plan.txt"
    phases = {}
    for line in plan.read_text().splitlines() if plan.is_file() else []:
        name, limit = line.split()
        phases[name] = Phase(name, int(limit))
    done = out / "phases.txt"
    for line in done.read_text().splitlines() if done.is_file() else []:
        name, status, start, end = line.split()
        phase = phases.setdefault(name, Phase(name, 0))
        phase.status = status
        if start != "-":
            phase.seconds = float(end) - float(start)
    commands = out / "commands.txt"
    for line in commands.read_text().splitlines() if commands.is_file() else []:
        name, _, command = line.partition("\t")
        if name in phases:
            phases[name].command = command
    return list(phases.values())


def _how(train: Phase, log: TrainLog, job: dict | None) -> str:
    """How a training run ended, from job.json and its last lines; the time limit first where it stopped it."""
    if train.status is None:  # no exit recorded: not started, or the script was stopped during it
        return "not run" if log.headline is None and not log.iterations else "no exit recorded (the script stopped)"
    if train.status == "skipped":
        return "skipped: its limit no longer fit the budget"
    if train.status == "stopped":
        return "skipped: the script was stopped"
    ended = (job or {}).get("ended") or {}
    how = ended.get("how")
    if how == "condition":
        text = "stop condition held"
    elif how == "finished":
        text = "all iterations, condition not met"
    elif how == "stopped":
        m = re.search(r"stopped by (\S+)", log.headline or "")
        text = f"stopped by {m[1]}" if m else "stopped"
    elif how == "failed":
        text = f"failed: {str(ended.get('message') or '')[:100]}"
    elif log.headline:
        text = log.headline[:100]
    else:
        text = "no ending recorded"
    code = train.code
    if code == TIMEOUT:
        return f"time limit ({train.limit} s), {text}"
    if code != 0:
        return f"{text} (exit {code})"
    return text


def _iterations(log: TrainLog, job: dict | None) -> str:
    ended = (job or {}).get("ended") or {}
    last = ended.get("iteration")
    if last is None and log.iterations:
        last = log.iterations[-1][0]
    if last is None:
        return "-"
    final = (job or {}).get("final_iteration")
    return f"{last} of {final}" if final else str(last)


def _overhead(train: Phase, log: TrainLog) -> float | None:
    """The command's time outside iterations 2 to the last: start-up, the first iteration (Warp kernels compiled or
    loaded, CUDA graphs captured) and the exit."""
    if train.seconds is None or len(log.iterations) < 2:
        return None
    return train.seconds - (log.iterations[-1][1] - log.iterations[0][1])


def _play(play: Phase, result: dict | None) -> tuple[str, str]:
    """``play`` success and planar error cells."""
    if result is not None:
        error = result.get("lin_vel_error")
        return f"{result['success_rate']:.2f}", "-" if error is None else f"{error:.3f}"
    if play.status is None:
        return "not run", "-"
    if play.status == "no-checkpoint":
        return "no checkpoint", "-"
    if play.status == "skipped":
        return "skipped (budget)", "-"
    if play.status == "stopped":
        return "skipped (stopped)", "-"
    if play.code == TIMEOUT:
        return f"time limit ({play.limit} s)", "-"
    return f"failed (exit {play.status})", "-"


@dataclass
class Row:
    label: str
    train: Phase
    play: Phase
    log: TrainLog
    job: dict | None
    result: dict | None

    def envs(self) -> str:
        n = (self.job or {}).get("settings", {}).get("env.num_envs")
        if self.label in ("fresh", "warm"):
            cache = "empty kernel cache" if self.label == "fresh" else "warm kernel cache"
            return f"{n if n is not None else '?'} (defaults, {cache})"
        return self.label

    def cells(self) -> list[str]:
        exit_s = "-" if self.train.seconds is None else f"{self.train.seconds:.1f}"
        overhead = _overhead(self.train, self.log)
        rates = [r for _, _, r in self.log.iterations[1:]]  # the first carries compiles and graph capture
        success, error = _play(self.play, self.result)
        return [
            self.envs(),
            exit_s,
            "-" if overhead is None else f"{overhead:.0f}",
            _iterations(self.log, self.job),
            _how(self.train, self.log, self.job),
            success,
            error,
            rate(statistics.median(rates)) if rates else "-",
        ]


HEADER = [
    "env count",
    "command to exit (s)",
    "overhead (s)",
    "iterations",
    "how it ended",
    "`play` success",
    "planar error (m/s)",
    "training env-steps/s",
]


TEXT_COLUMNS = {0, 4}  # left-aligned; the others are numbers


def markdown(header: list[str], rows: list[list[str]]) -> str:
    rule = ["---" if i in TEXT_COLUMNS else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, rule, *rows])


def environment(out: Path) -> list[str]:
    """The GPU and versions lines, worked out once per results folder (the summary is rewritten after every phase,
    and the GPU line imports torch)."""
    path = out / "environment.txt"
    if path.is_file():
        return path.read_text().splitlines()
    lines = [gpu_line(), versions_line()]
    path.write_text("\n".join(lines) + "\n")
    return lines


def about(out: Path) -> dict[str, str]:
    path = out / "about.txt"
    pairs = (line.partition(": ") for line in (path.read_text().splitlines() if path.is_file() else []))
    return {k: v for k, _, v in pairs}


def summarize(out: Path) -> tuple[str, bool]:
    """The summary (markdown) and whether every planned phase ran without failing."""
    phases = read_phases(out)
    by_name = {p.name: p for p in phases}
    info = about(out)
    lines = ["# Time to a walking robot", ""]
    lines += [f"- {line}" for line in environment(out)]
    lines.append(f"- started {info.get('started', '?')}, commit {info.get('commit', '?')}")
    lines.append(
        f"- every run: `--stop-when '{info.get('stop_when', '?')}'`, timed from the command to its exit;"
        " `play`: 100 episodes of the deterministic policy from the newest checkpoint of the run"
    )
    lines.append(
        "- overhead: the command's time outside iterations 2 to the last (start-up, the first iteration with its"
        " kernel compiles and graph capture, the exit); training env-steps/s: the median iteration after the first"
    )
    trains = [p for p in phases if p.name.startswith("train-")]
    tasks: dict[str, list[Row]] = {}
    for train in trains:
        task, label = train.name.removeprefix("train-").rsplit("-", 1)
        play = by_name.get(f"play-{task}-{label}", Phase(f"play-{task}-{label}", 0))
        row = Row(
            label,
            train,
            play,
            read_train_log(out / f"{train.name}.log", out / "runs" / f"{task}-{label}"),
            read_job(out / "runs" / f"{task}-{label}"),
            read_play(out / f"{play.name}.json"),
        )
        tasks.setdefault(task, []).append(row)
    for task, rows in tasks.items():
        lines += ["", f"## {task}", "", markdown(HEADER, [r.cells() for r in rows])]
        fresh = next((r for r in rows if r.label == "fresh"), None)
        warm = next((r for r in rows if r.label == "warm"), None)
        if fresh and warm:
            a, b = _overhead(fresh.train, fresh.log), _overhead(warm.train, warm.log)
            if a is not None and b is not None and fresh.train.seconds:
                lines += [
                    "",
                    f"Compile share of the fresh run: {a - b:.0f} s of its {fresh.train.seconds:.0f} s"
                    f" ({(a - b) / fresh.train.seconds:.0%}): its overhead less the warm run's.",
                ]
        startups = [(r.label, r.log.startup) for r in rows if r.log.startup]
        if startups:
            lines += ["", "Start-up, each run's own line after its first iteration:", ""]
            lines += [f"- {label}: {text}" for label, text in startups]
        commands = [r.train.command for r in rows if r.train.command]
        if commands:
            lines += ["", "Commands:", "", *(f"- `{c.replace(str(out), '<out>')}`" for c in commands)]
    problems = [p.name for p in phases if _problem(p)]
    lines += ["", f"Phases not run or failed: {', '.join(problems)}" if problems else "Every phase ran."]
    return "\n".join(lines) + "\n", not problems


def _problem(phase: Phase) -> bool:
    """Not run, or failed; a training run stopped by its time limit is a result (it did not walk in time)."""
    if phase.status is None or phase.status in ("skipped", "stopped", "no-checkpoint"):
        return True
    code = phase.code
    return code != 0 and not (code == TIMEOUT and phase.name.startswith("train-"))


def main(argv: list[str]) -> int:
    quiet = "--quiet" in argv
    args = [a for a in argv if a != "--quiet"]
    if len(args) != 1:
        sys.stderr.write("usage: gpu_walk_summary.py [--quiet] RESULTS_DIR\n")
        return 2
    out = Path(args[0])
    if not out.is_dir():
        sys.stderr.write(f"error: {out} is not a folder\n")
        return 2
    text, ok = summarize(out)
    (out / "summary.md").write_text(text)
    if not quiet:
        sys.stdout.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
