"""What to expect from every task at its defaults: docs/results/expect.json, rendered into README.md and
docs/performance.md, and filled by running the commands.

    uv run python scripts/expect.py render                       # rewrite the tables from the results file
    uv run python scripts/expect.py render --check               # exit 1 if README.md or the docs disagree with it
    uv run python scripts/expect.py fill --device cpu --dry-run  # the commands a measurement would run, nothing run
    uv run python scripts/expect.py fill --device cpu --tasks go1-velocity-flat    # measure, record, render
    python scripts/expect.py fill --device gpu --limit-s 300 --rows-out rows.jsonl     # where the results go back
    uv run python scripts/expect.py add-rows rows.jsonl          # record rows measured elsewhere, and render

``fill`` runs, per task: ``train <task> --gpu-ids None|0 --stop-when <condition>`` timed from the command to its exit (a
fresh log root), ``play <task>`` of the checkpoint it ended with, and ``bench <task> --skip-steps`` for the PPO training
env-steps/s; then it records the figures with the date, the commit (``-dirty`` with uncommitted changes;
``MJFLEET_COMMIT`` where the checkout is a copy without git) and the machine, and renders the tables. Long: minutes to
hours per task on a CPU. ``tests/test_docs_generated.py`` fails when README.md or the docs differ from the results file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_text import ROOT, duration, read_block, replace_block, stale_exit, table

RESULTS = ROOT / "docs" / "results" / "expect.json"
SUMMARY = "expect"
"""The block in README.md: a short table, the time to the condition and ``play`` success per task and device."""
DETAILS = "expect-details"
"""The block in docs/performance.md: the table, the machines and each figure's command."""
TARGETS = {ROOT / "README.md": SUMMARY, ROOT / "docs" / "performance.md": DETAILS}
DEVICES = {"cpu": "2-core CPU", "gpu": "one GPU"}
NOT_MEASURED = "not measured"


MEASURED_REQUIRED = {
    "train": ("command", "ended", "date", "commit", "machine"),
    "play": ("command", "success"),
    "throughput": ("command", "env_steps_per_s", "date", "commit", "machine"),
}
"""What each kind of record in a row must say (a play record's date, commit and machine are its train record's)."""


def load(path: Path = RESULTS) -> dict[str, Any]:
    """The results file; exits with one line naming the first row that a table could not show truthfully."""
    results = json.loads(path.read_text())
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(results["rows"]):
        where = f"{path}: row {i} ({row.get('task', '?')} on {row.get('device', '?')})"
        if row.get("device") not in DEVICES:
            raise SystemExit(f"{where} names device {row.get('device')!r}; the tables show {', '.join(DEVICES)}")
        if (row["task"], row["device"]) in seen:
            raise SystemExit(f"{where} repeats an earlier row of the same task and device")
        seen.add((row["task"], row["device"]))
        for kind, required in MEASURED_REQUIRED.items():
            measured = row.get(kind)
            if measured is None:
                continue
            missing = [name for name in required if measured.get(name) in (None, "")]
            if missing:
                raise SystemExit(f"{where}: its {kind} record has no {', '.join(missing)}")
            if "machine" in required and measured["machine"] not in results["machines"]:
                raise SystemExit(f"{where}: its {kind} record names machine {measured['machine']!r}, not in 'machines'")
    return results


def rate(value: float | list[float]) -> str:
    """``16.7k``, ``270k``, ``5.2-6.2k`` env-steps/s."""

    def k(v: float) -> str:
        return f"{v / 1000:.1f}" if v < 100_000 else f"{v / 1000:.0f}"

    if isinstance(value, list):
        return f"{k(value[0])}-{k(value[1])}k"
    return f"{k(value)}k"


def _cells(row: dict[str, Any], machines: dict[str, str]) -> list[str]:
    train, play, throughput = row.get("train"), row.get("play"), row.get("throughput")
    if train is None:
        exit_cell = NOT_MEASURED
    elif train.get("exit_s") is None:
        exit_cell = train["ended"]
    else:
        exit_cell = duration(train["exit_s"]) + _markers(row)
        details = [f"{train['iterations']} iterations"] if train.get("iterations") is not None else []
        details += [f"{train['envs']} envs"] if train.get("envs") is not None else []
        details += _how_it_ended(train["ended"]) if train.get("ended") not in (None, "stop condition met") else []
        exit_cell += f" ({', '.join(details)})" if details else ""
    play_cell = NOT_MEASURED if play is None else f"{play['success']:.2f}"
    rate_cell = NOT_MEASURED if throughput is None else rate(throughput["env_steps_per_s"])
    if throughput is not None and throughput.get("envs") is not None:
        rate_cell += f" ({throughput['envs']} envs)"
    machines_used = sorted({r["machine"] for r in (train, throughput) if r is not None})
    where_cell = " / ".join(short_machine(machines, machine) for machine in machines_used)
    return [f"`{row['task']}`", DEVICES[row["device"]], exit_cell, play_cell, rate_cell, where_cell or "-"]


def _how_it_ended(ended: str) -> list[str]:
    """A run's ending as the table says it: its clauses but the "timed before/while ..." history of the code it ran,
    which the record keeps and the cell sums up in one clause."""
    clauses = ended.split("; ")
    current = [c for c in clauses if not c.startswith(("timed before", "timed while"))]
    if len(current) < len(clauses):
        current.append("timed with older code (its record in docs/results/expect.json says what changed since)")
    return ["; ".join(current)]


def short_machine(machines: dict[str, str], key: str) -> str:
    """The machine's name for a table cell: its description up to the first comma, semicolon or parenthesis, or
    where another machine's would read the same, up to the end of the parenthesis (``2-core x86-64 VM (AMD EPYC,
    no AVX-512)``)."""

    def cut(description: str) -> str:
        return re.split(r"[,;(]", description, maxsplit=1)[0].strip()

    description = machines.get(key, key)
    short = cut(description)
    if sum(cut(other) == short for other in machines.values()) > 1 and "(" in description:
        return description[: description.index(")", description.index("(")) + 1] if ")" in description else short
    return short


def summary_table(results: dict[str, Any]) -> str:
    header = ["task", "on", "command to exit", "`play` success", "training env-steps/s", "machine"]
    return table(header, (_cells(row, results["machines"]) for row in results["rows"]))


EVALUATION_SINCE = "2026-11-27"
"""The first date of runs whose ``--stop-when`` read the evaluation episodes (the deterministic policy); runs dated
before it read the training episodes (the policy with its action noise)."""
MET = "stop condition met"
BEFORE_EVALUATION = "†"
CONFIRM_SINCE = "2026-11-28"
"""The first date of CPU runs whose stop waited for a check of the current policy on ``--agent.eval-confirm-episodes``
(100) fresh episodes; CPU runs dated before it checked it on ``--agent.eval-episodes`` (64 for the Go1 tasks)."""
BEFORE_CONFIRM = "‡"
BEFORE_CONFIRM_TEXT = (
    f"{BEFORE_CONFIRM} Measured while the check of the current policy before a stop played `--agent.eval-episodes`"
    " fresh episodes instead of `--agent.eval-confirm-episodes` (100): a run can now stop a few iterations later."
)


def _markers(row: dict[str, Any]) -> str:
    """The footnote marks of a row's time to its exit: measured before the evaluation (†), before the 100-episode
    check of the current policy on the CPU (‡)."""
    date = row["train"]["date"]
    marks = BEFORE_EVALUATION if date < EVALUATION_SINCE else ""
    marks += BEFORE_CONFIRM if row["device"] == "cpu" and date < CONFIRM_SINCE else ""
    return f" {marks}" if marks else ""


def _front_cells(row: dict[str, Any] | None, notes: list[str]) -> list[str]:
    """The time to the condition and the ``play`` success of one task on one device, for README's short table: a
    figure only where the condition was met; a caveat of the run becomes a numbered note (appended to ``notes``)."""
    train = None if row is None else row.get("train")
    if train is None or train.get("exit_s") is None or not str(train.get("ended", "")).startswith(MET):
        return ["-", "-"]
    assert row is not None
    time_cell = duration(train["exit_s"]) + _markers(row)
    caveat = str(train["ended"])[len(MET) :].strip(" ,;")
    if caveat:
        if caveat not in notes:
            notes.append(caveat)
        time_cell += f" ({notes.index(caveat) + 1})"
    play = row.get("play") if row is not None else None
    return [time_cell, NOT_MEASURED if play is None else f"{play['success']:.2f}"]


def front_table(results: dict[str, Any]) -> tuple[str, list[str]]:
    """README's what-to-expect table: every task, with the time from the command to its exit and ``play`` success on
    each device where it met ``--stop-when`` (``-`` elsewhere); and the caveats its cells number."""
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for row in results["rows"]:
        by_task.setdefault(row["task"], {})[row["device"]] = row
    notes: list[str] = []
    rows = []
    for task, devices in by_task.items():
        cells = [c for device in DEVICES for c in _front_cells(devices.get(device), notes)]
        rows.append([f"`{task}`", *cells])
    header = ["task", "2-core CPU", "`play`", "one GPU", "`play`"]
    return table(header, rows, align="lrrrr"), notes


def render_summary(results: dict[str, Any]) -> str:
    front, notes = front_table(results)
    gpu_envs = sorted(
        {row["train"]["envs"] for row in results["rows"] if row["device"] == "gpu" and row.get("train", {}).get("envs")}
    )
    envs = " or ".join(str(n) for n in gpu_envs)
    caveats = "".join(f" ({i}) {note}." for i, note in enumerate(notes, 1))
    return (
        front
        + "\n\n"
        + "The time from `train <task> --stop-when 'success>=0.95'` to its exit at the task's defaults"
        + (f" (on the GPU with {envs} environments instead of 1024" if envs else " (on the GPU")
        + " and Warp kernels compiled beforehand: a first run on a fresh GPU machine compiles them, about a minute"
        " more), at the default seed, and the success of `play` (100 fresh episodes) with the policy it ended with:"
        " the run stopped once its own check of 100 episodes met the condition, so `play`'s other episodes can read a"
        f" little under it; `-`: not trained to the condition. {BEFORE_EVALUATION} Measured with an earlier version,"
        " whose `--stop-when` read the training episodes instead of the deterministic policy's evaluation episodes and"
        " stopped sooner."
        + (f" {BEFORE_CONFIRM_TEXT}" if BEFORE_CONFIRM in front else "")
        + caveats
        + " Every figure's machine and command, the other seeds, and the training throughput of every task:"
        " [what to expect](docs/performance.md#what-to-expect) (generated, as this table, from"
        " `docs/results/expect.json` by `scripts/expect.py`, which records each figure's date and commit)."
    )


def render_details(results: dict[str, Any]) -> str:
    lines = [
        summary_table(results),
        "",
        f"{BEFORE_EVALUATION} Measured with an earlier version, whose `--stop-when` read the training episodes (the"
        " policy with its action noise) instead of the deterministic policy's evaluation episodes: such runs stopped"
        " earlier and played further below the condition."
        + (f" {BEFORE_CONFIRM_TEXT}" if BEFORE_CONFIRM in summary_table(results) else ""),
        "",
        "Machines:",
        "",
    ]
    lines += [f"- **{short_machine(results['machines'], key)}**: {text}" for key, text in results["machines"].items()]
    lines += ["", "The commands of each figure (their dates, commits and notes: `docs/results/expect.json`):", ""]
    for row in results["rows"]:
        parts = [f"`{row[kind]['command']}`" for kind in ("train", "play", "throughput") if row.get(kind) is not None]
        if parts:
            lines.append(f"- `{row['task']}`, {DEVICES[row['device']]}: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def render_file(path: Path, results: dict[str, Any]) -> str:
    name = TARGETS[path]
    body = render_summary(results) if name == SUMMARY else render_details(results)
    return replace_block(path.read_text(), name, body)


def stale(results: dict[str, Any]) -> list[Path]:
    """The files whose generated block differs from what ``results`` renders to."""
    return [
        path
        for path in TARGETS
        if read_block(path.read_text(), TARGETS[path]) != read_block(render_file(path, results), TARGETS[path])
    ]


# --- measuring ---------------------------------------------------------------------------------------------------


def commands(task: str, device: str, stop_when: str, log_root: str) -> dict[str, str]:
    """The three commands ``fill`` runs for one task, as a user would type them."""
    gpu = "None" if device == "cpu" else "0"
    backends = "mujoco" if device == "cpu" else "warp"
    condition = shlex.quote(stop_when)
    return {
        "train": f"train {task} --gpu-ids {gpu} --stop-when {condition} --log-root {log_root}",
        "play": f"play {task} --gpu-ids {gpu} --log-root {log_root}",
        "throughput": f"bench {task} --gpu-ids {gpu} --skip-steps --backends {backends} --json {log_root}/bench.json",
    }


COMMANDS = {"train": "mjfleet.cli.train", "play": "mjfleet.cli.play", "bench": "mjfleet.cli.bench"}
"""The module of each command: run with this interpreter's ``-m``, which needs no console scripts beside it (an
offline install's folder may have none)."""
GRACE_S = 60
"""After its time limit a command gets SIGTERM (train checkpoints and exits); SIGKILL this much later."""


def _run(command: str, limit_s: float | None = None) -> tuple[float, str, bool]:
    """Run ``command`` with this interpreter; its seconds from start to exit, its stdout and whether ``limit_s``
    stopped it (with SIGTERM: a training run checkpoints and exits)."""
    words = shlex.split(command)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", COMMANDS[words[0]], *words[1:]], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=limit_s)
        limited = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        limited = True
    seconds = time.monotonic() - start
    if proc.returncode != 0 and not limited:
        raise SystemExit(f"{command} exited {proc.returncode}")
    return seconds, out, limited


def _commit() -> str:
    """``MJFLEET_COMMIT`` where set (a copy of the checkout without ``.git``), else git's short hash (``-dirty`` with
    changes to the code)."""
    if os.environ.get("MJFLEET_COMMIT"):
        return os.environ["MJFLEET_COMMIT"]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        return git("rev-parse", "--short", "HEAD") + (
            # The results file and the pages rendered from it change while a fill runs; the code measured does not.
            "-dirty" if git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs", ":!README.md") else ""
        )
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("this checkout has no git history: set MJFLEET_COMMIT to the commit it is a copy of") from None


def measure(task: str, device: str, stop_when: str, limit_s: float | None = None) -> dict[str, Any]:
    """Run the three commands for one task (train stopped after ``limit_s``, and recorded so); the row for the results
    file."""
    from mjfleet.runs.record import RunRecord

    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    commit = _commit()
    with tempfile.TemporaryDirectory(prefix="mjfleet-expect-") as log_root:
        run = commands(task, device, stop_when, log_root)
        exit_s, _, limited = _run(run["train"], limit_s)
        (run_dir,) = [p.parent for p in Path(log_root).glob("*/*/job.json")]
        record = RunRecord.read(run_dir)
        ended = (record.ended if record is not None else None) or {}
        _, out, _ = _run(run["play"])
        summary = json.loads(out.strip().splitlines()[-1])
        _run(run["throughput"])
        bench = json.loads((Path(log_root) / "bench.json").read_text())
    machine = bench["machine"]
    measured = {"date": today, "commit": commit, "machine": machine}
    shown = {kind: command.replace(f" --log-root {log_root}", "") for kind, command in run.items()}
    shown["throughput"] = shown["throughput"].split(" --json ")[0]
    how = {"finished": "all iterations", "condition": "stop condition met"}.get(ended.get("how", ""), "stopped")
    if limited:
        how = f"stopped at the time limit of {limit_s:g} s"
    return {
        "task": task,
        "device": device,
        "train": {
            "command": shown["train"],
            "exit_s": round(exit_s),
            "iterations": ended.get("iteration"),
            "ended": how,
            **measured,
        },
        "play": {"command": shown["play"], "success": summary["success_rate"]},
        "throughput": {
            "command": shown["throughput"],
            "env_steps_per_s": round(bench["training"][0]["env_steps_per_s"]),
            **measured,
        },
    }


def check_machine(results: dict[str, Any], machine: str | None) -> None:
    """One line where ``machine`` is given but not a key of the results' machines."""
    if machine is not None and machine not in results["machines"]:
        known = ", ".join(results["machines"])
        raise SystemExit(f"--machine {machine}: not one of the machines in {RESULTS.relative_to(ROOT)} ({known})")


def record(results: dict[str, Any], row: dict[str, Any], machine: str | None = None) -> None:
    """Put ``row`` in place of the task's row on its device; its machine is ``machine`` (a key of the results'
    machines, described there by hand) or else named by the description ``bench`` gave it."""
    machines: dict[str, str] = results["machines"]
    check_machine(results, machine)
    for kind in ("train", "throughput"):
        description = row[kind]["machine"]
        key = machine or next((k for k, v in machines.items() if v == description), None)
        if key is None:
            key = re.sub(r"[^a-z0-9]+", "-", description.lower()).strip("-")[:40]
            machines[key] = description
        row[kind]["machine"] = key
    rows: list[dict[str, Any]] = results["rows"]
    at = next((i for i, r in enumerate(rows) if (r["task"], r["device"]) == (row["task"], row["device"])), None)
    if at is None:
        raise SystemExit(f"no row of {row['task']} on the {row['device']} in {RESULTS.relative_to(ROOT)} to replace")
    rows[at] = row


def add_rows(results: dict[str, Any], path: Path, machine: str | None = None) -> None:
    """Record the rows of a ``fill --rows-out`` file; exits with one line where the results would no longer pass
    :func:`load`'s checks."""
    for line in path.read_text().splitlines():
        if line.strip():
            record(results, json.loads(line), machine)
    with tempfile.TemporaryDirectory() as folder:
        check = Path(folder) / "expect.json"
        check.write_text(json.dumps(results))
        load(check)


def write(results: dict[str, Any]) -> None:
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    for path in TARGETS:
        path.write_text(render_file(path, results))


def main() -> None:
    parser = argparse.ArgumentParser(description="What to expect from every task: render or fill docs/results.")
    sub = parser.add_subparsers(dest="action", required=True)
    render = sub.add_parser("render", help="rewrite the tables in README.md and docs/performance.md")
    render.add_argument("--check", action="store_true", help="exit 1 where a table differs from the results file")
    fill = sub.add_parser("fill", help="measure tasks and record the figures (long)")
    fill.add_argument("--device", choices=sorted(DEVICES), required=True, help="cpu: --gpu-ids None; gpu: GPU 0")
    fill.add_argument("--tasks", nargs="*", help="task ids (default: every task of the results file)")
    fill.add_argument("--stop-when", default="success>=0.95", help="the condition that ends each training run")
    fill.add_argument("--dry-run", "--list", action="store_true", help="print the commands, run nothing")
    fill.add_argument("--limit-s", type=float, help="seconds for each training run (then stopped, and recorded so)")
    fill.add_argument("--rows-out", type=Path, help="also append each measured row to this file, one JSON per line")
    rows = sub.add_parser("add-rows", help="record the rows a fill appended to --rows-out elsewhere, and render")
    rows.add_argument("file", type=Path)
    for command in (fill, rows):
        command.add_argument(
            "--machine", help="the key of the results' machine this is (default: a new one, as bench describes it)"
        )
    args = parser.parse_args()
    results = load()
    check_machine(results, getattr(args, "machine", None))  # before a fill measures for minutes
    if args.action == "add-rows":
        add_rows(results, args.file, args.machine)
        write(results)
        return
    if args.action == "render":
        if args.check:
            stale_exit(stale(results), RESULTS, "expect.py")
            return
        write(results)
        return
    known = list(dict.fromkeys(row["task"] for row in results["rows"]))
    tasks = args.tasks or known
    unknown = [t for t in tasks if t not in known]
    if unknown:
        sys.exit(f"not in {RESULTS.relative_to(ROOT)}: {', '.join(unknown)}")
    for task in tasks:
        if args.dry_run:
            print("\n".join(commands(task, args.device, args.stop_when, "<log_root>").values()))
            continue
        print(f"measuring {task} on the {args.device} ({platform.node()})", flush=True)
        row = measure(task, args.device, args.stop_when, args.limit_s)
        if args.rows_out is not None:
            with args.rows_out.open("a") as rows_file:  # the row as measured: its machine by description
                rows_file.write(json.dumps(row) + "\n")
        record(results, json.loads(json.dumps(row)), args.machine)
        write(results)  # after every task: an interrupted fill keeps what it measured


if __name__ == "__main__":
    main()
