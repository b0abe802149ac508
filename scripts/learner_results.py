"""What each learner achieves at its defaults: docs/results/learners.json, rendered into docs/learners.md.

    uv run python scripts/learner_results.py render            # rewrite the table from the results file
    uv run python scripts/learner_results.py render --check    # exit 1 if docs/learners.md disagrees with it
    uv run python scripts/learner_results.py add runs.tsv --commit C --machine M [--date D] [--note N]

``add`` takes one run a line, tab-separated: task, learner, seed, iterations, seconds from the command to its exit,
``play`` success over 100 episodes (``--seed 0``), train's exit code; the command of each is the default one with
``--agent.learner``, ``--stop-when 'success>=0.95'`` and ``--seed``. Every record names its command, date, commit and
machine: a record without them is refused, so is a figure typed into the guide (``tests/test_docs_generated.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_text import ROOT, duration, load_records, read_block, replace_block, stale_exit, table

RESULTS = ROOT / "docs" / "results" / "learners.json"
GUIDE = ROOT / "docs" / "learners.md"
BLOCK = "learner-results"
REQUIRED = ("task", "learner", "seed", "command", "exit_s", "play", "date", "commit", "machine")
"""What every record must say: which run, what it measured, and where and when."""
MORE_PLAY_REQUIRED = ("command", "episodes", "success", "by_seed", "date", "commit", "machine")
"""What a run's ``more_play`` (its checkpoint over more episodes) must say."""
CONDITION = "success>=0.95"


def load(path: Path = RESULTS) -> dict[str, Any]:
    results = load_records(path, "runs", REQUIRED)
    for i, run in enumerate(results["runs"]):
        if run.get("ended") == "stop condition met" and run.get("iterations") is None:
            raise SystemExit(f"{path}: run {i} met its condition but has no iterations")
        missing = [
            key for key in MORE_PLAY_REQUIRED if key not in run.get("more_play", dict.fromkeys(MORE_PLAY_REQUIRED))
        ]
        if missing:
            raise SystemExit(f"{path}: run {i}'s more_play has no {', '.join(missing)}")
    return results


def render(results: dict[str, Any]) -> str:
    """The table of every run (task, learner, seed) and, below it, the machines and the commands."""
    runs = sorted(results["runs"], key=lambda r: (r["task"], r["learner"], r["seed"] != 42, r["seed"]))
    rows = [
        (
            f"`{r['task']}`",
            f"`{r['learner']}`",
            str(r["seed"]),
            f"{r['iterations']:,}" if r.get("ended") == "stop condition met" else f"not met ({r.get('ended', '?')})",
            duration(r["exit_s"]),
            f"{r['play']:.2f}",
            r["machine"],
        )
        for r in runs
    ]
    header = ("task", "learner", "seed", "iterations to the condition", "command to exit", "`play`", "machine")
    lines = [table(header, rows, "lllrrrl"), ""]
    used = {r["machine"] for r in runs}
    lines += [f"- {name}: {text}" for name, text in results["machines"].items() if name in used]
    notes = sorted({r["note"] for r in runs if r.get("note")})
    lines += [f"- {note}" for note in notes]
    lines += [more_play_line(r) for r in runs if r.get("more_play")]
    lines.append(
        f"- Each run: `{runs[0]['command'].split(' --seed')[0]} --seed S` with its task and learner; `play` of the"
        " checkpoint it ended with, 100 episodes, `--seed 0`. Each run's date, commit and command:"
        " `docs/results/learners.json`."
        if runs
        else "- No run recorded."
    )
    return "\n".join(lines)


def more_play_line(run: dict[str, Any]) -> str:
    """A run's checkpoint played over more episodes than the table's 100 (``more_play``: its command, episodes,
    success and where each ``--seed`` played), for a row whose 100 episodes sit near the condition."""
    more = run["more_play"]
    seeds = ", ".join(f"{v:.3g} (`--seed {k}`)" for k, v in more["by_seed"].items())
    return (
        f"- `{run['task']}` `{run['learner']}` seed {run['seed']}: the checkpoint it ended with over"
        f" {more['episodes']:,} more episodes (`{more['command']}`): {more['success']:.2f}; {seeds}."
    )


def stale(results: dict[str, Any]) -> list[Path]:
    """The guide, where its block differs from what ``results`` renders to."""
    return [GUIDE] if read_block(GUIDE.read_text(), BLOCK) != render(results).strip() else []


def add(results: dict[str, Any], tsv: Path, commit: str, machine: str, date: str, note: str) -> None:
    for number, line in enumerate(tsv.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 7:
            raise SystemExit(
                f"{tsv}:{number}: {len(fields)} tab-separated fields, not the 7 of task, learner, seed, iterations,"
                " seconds, play success, exit code"
            )
        task, learner, seed, iterations, exit_s, play, code = fields
        run = {
            "task": task,
            "learner": learner,
            "seed": int(seed),
            "command": f"train {task} --gpu-ids None --agent.learner {learner} --stop-when '{CONDITION}' --seed {seed}",
            "iterations": int(iterations),
            "exit_s": round(float(exit_s), 1),
            "ended": "stop condition met" if code == "0" else f"exit code {code}",
            "play": float(play),
            "date": date,
            "commit": commit,
            "machine": machine,
        }
        if note:
            run["note"] = note
        key = (task, learner, int(seed))
        results["runs"] = [r for r in results["runs"] if (r["task"], r["learner"], r["seed"]) != key] + [run]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    show = sub.add_parser("render")
    show.add_argument("--check", action="store_true")
    more = sub.add_parser("add")
    more.add_argument("tsv", type=Path)
    more.add_argument("--commit", required=True)
    more.add_argument("--machine", required=True)
    more.add_argument("--date", default=datetime.date.today().isoformat())
    more.add_argument("--note", default="")
    args = parser.parse_args(argv)
    results = load()
    if args.action == "render" and args.check:
        stale_exit(stale(results), RESULTS, "learner_results.py")
        return
    if args.action == "add":
        if args.machine not in results["machines"]:
            raise SystemExit(f"--machine {args.machine}: describe it in {RESULTS}'s 'machines' first")
        add(results, args.tsv, args.commit, args.machine, args.date, args.note)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    GUIDE.write_text(replace_block(GUIDE.read_text(), BLOCK, render(results)))


if __name__ == "__main__":
    main()
