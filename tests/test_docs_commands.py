"""The commands the documentation shows work: every ``train``, ``play``, ``bench`` and ``list-tasks`` command in a
fenced ``bash`` block of README.md and docs/ (the archive in docs/notes/ aside) parses with the real command-line
parser; the cheap ones (``list-tasks``, ``--help``, a CPU ``--dry-run``) run; every repository path the docs name
exists; and the user docs say nothing of issues, items or sittings. Nothing trains.

Placeholders are filled in: ``<task>`` is a locomotion task, ``<run>`` a run directory made here with the task's
saved settings (``--finish`` and ``play`` read them), a ``wandb:`` checkpoint of ``play`` that run."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mjfleet.cli import bench, list_tasks, play, train
from mjfleet.cli.args import parse
from mjfleet.tasks.registry import all_tasks
from mjfleet.train.config import TrainConfig
from tests.helpers import run_main

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "notes" not in p.parts)]
PROGRAMS = ("train", "play", "bench", "list-tasks")
RUN = "2026-01-01_00-00-00"
PLACEHOLDERS = {
    "<task>": "go1-velocity-flat",
    "<run id>": "abc123",
    "wandb:<entity>/<project>/<run>": "wandb:me/project/abc123",
    "<run_dir>": f"logs/rsl_rl/go1_velocity_flat/{RUN}",
    "<run>": RUN,
    "${SLURM_JOB_ID}": "123",
    "$SLURM_JOB_ID": "123",
    "my-robot-velocity-flat": "trotter-velocity-flat",  # docs/your_robot.md's package: the example's robot and tasks
}


def _commands() -> Iterator[tuple[str, str, list[str]]]:
    """``(where, line, [program, *arguments])`` of every command of ours in the docs' bash blocks."""
    for path in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                code = line.strip()
                for placeholder, value in PLACEHOLDERS.items():
                    code = code.replace(placeholder, value)
                words = shlex.split(code, comments=True)
                at = next((i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] in PROGRAMS), None)
                if at is None:
                    continue
                args = words[at + 1 :]
                end = next((i for i, w in enumerate(args) if w in ("|", "||", "&&", ";", "&")), len(args))
                yield f"{path.relative_to(ROOT)}: {line.strip()}", words[at].rsplit("/", 1)[-1], args[:end]


COMMANDS = list(_commands())


@pytest.fixture(scope="module")
def run_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of every task under ``logs/rsl_rl`` (settings and a checkpoint file), written once for the module."""
    from mjfleet.train.worker import write_params

    root = tmp_path_factory.mktemp("runs")
    for spec in all_tasks().values():
        cfg = TrainConfig(env=spec.env_cfg(), agent=spec.agent_cfg(), task=spec.id)
        run_dir = root / "logs" / "rsl_rl" / cfg.agent.experiment_name / RUN
        (run_dir / "params").mkdir(parents=True)
        write_params(run_dir, cfg)
        (run_dir / "model_100.pt").touch()
    return root


@pytest.fixture
def runs(run_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own with a copy of :func:`run_tree`'s runs."""
    shutil.copytree(run_tree / "logs", tmp_path / "logs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISPLAY", ":0")  # play --viewer native checks for a display while parsing
    monkeypatch.setattr("mjfleet.viewer.display.x11_opens", lambda name: True)  # and that an X server answers
    return tmp_path


def test_the_docs_show_commands_of_every_program() -> None:
    assert {program for _, program, _ in COMMANDS} == set(PROGRAMS)
    assert len(COMMANDS) > 50


@pytest.mark.parametrize(("where", "program", "args"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_each_command_in_the_docs_parses(where: str, program: str, args: list[str], runs: Path) -> None:
    if "--help" in args:  # help is printed, exit 0: run by test_the_cheap_commands_in_the_docs_run
        return
    if program == "list-tasks":
        assert args == [], where
    elif program == "train":
        train.parse_args(args)
    elif program == "play":
        if "--checkpoint" in args and args[args.index("--checkpoint") + 1].startswith("wandb:"):
            at = args.index("--checkpoint") + 1  # a W&B run is reached over the network: a local run stands in
            args = [*args[:at], f"logs/rsl_rl/{_experiment(args[0])}/{RUN}", *args[at + 1 :]]
        play.parse_args(args)
    else:
        parse(bench.BenchConfig, args[1:], f"bench {args[0]}")


def _experiment(task_id: str) -> str:
    return next(spec.agent_cfg().experiment_name for spec in all_tasks().values() if spec.id == task_id)


def _runs_here(program: str, args: list[str]) -> bool:
    """Cheap enough to run: list-tasks, help, and a dry run that needs no GPU."""
    if program == "list-tasks" or "--help" in args:
        return True
    if program != "train" or "--dry-run" not in args:
        return False
    gpu_ids = train.parse_args(args).gpu_ids
    return gpu_ids is None or gpu_ids == "auto"


CHEAP = [c for c in COMMANDS if _runs_here(c[1], c[2])]


def test_the_docs_show_cheap_commands_to_run() -> None:
    assert {program for _, program, args in CHEAP} >= {"list-tasks", "train"}
    assert any("--dry-run" in args for _, _, args in CHEAP) and any("--help" in args for _, _, args in CHEAP)


@pytest.mark.parametrize(("where", "program", "args"), CHEAP, ids=[c[0] for c in CHEAP])
def test_the_cheap_commands_in_the_docs_run(where: str, program: str, args: list[str], runs: Path) -> None:
    mains: dict[str, Callable[[list[str]], None]] = {
        "list-tasks": list_tasks.main,
        "train": train.main,
        "play": play.main,
        "bench": bench.main,
    }
    code, out, err = run_main(mains[program], args)
    assert code == 0, f"{where}: exit {code}\n{err}"
    assert out.strip(), where
    if "--dry-run" in args:
        assert "not created by --dry-run" in out, where
        assert [p.name for p in (runs / "logs" / "rsl_rl").glob("*/*")] == [RUN] * len(all_tasks())  # nothing new


PATH = re.compile(r"(?<![\w/.<-])((?:examples|scripts|src|tests|docs)/[\w./-]*[\w/])")


def test_every_repository_path_the_docs_name_exists() -> None:
    missing = []
    for doc in DOCS:
        for match in PATH.finditer(doc.read_text()):
            name = match.group(1)
            # relative to the repository, to the page, or to an example package (a package's own layout)
            bases = [ROOT, doc.parent, *(ROOT / "examples").glob("*/")]
            if doc == ROOT / "docs" / "your_robot.md" and name.startswith("src/my_robot"):
                continue  # the user's package that page builds (tests/test_your_robot_page.py)
            if not any((base / name).exists() for base in bases):
                missing.append(f"{doc.relative_to(ROOT)}: {name}")
    assert missing == []


def test_the_user_docs_speak_of_no_issue_item_or_sitting() -> None:
    pattern = re.compile(r"\b([Ii]ssue [0-9]+|[Ii]tem [0-9]|[Ss]itting)\b")
    found = [f"{doc.relative_to(ROOT)}: {m.group(0)}" for doc in DOCS for m in pattern.finditer(doc.read_text())]
    assert found == []


SETTLED = {
    "2-4x": "MuJoCo C over Warp on the CPU: one figure, 4.17x for go1's env step (performance.md)",
    "3-5x": "the same",
    "compilation included": "the CPU default, MuJoCo C, compiles nothing",
    "the first GPU this project ran on": "the benchmarks name each figure's GPU",
    "cannot be silenced": "--env.sim.solver-notices is off by default",
    "no Menagerie file has been": "Menagerie's Go1 and G1 trained on an H200",
    "every CPU worker runs MuJoCo Warp": "the CPU default is MuJoCo C",
    "uv run torchrun": "a Ctrl-C under uv reaches torchrun twice; the docs show the environment's torchrun",
    "continues at the next iteration": "--resume starts a new run; --finish finishes one in place",
    "the options of every task": "train --help shows the generic options and the task ids",
    "about two hours": "the humanoid's CPU time is in the what-to-expect table",
    "an eighth of them by the deterministic policy": "the evaluation environments come on top of --env.num-envs",
    "an eighth of the simulation runs": "the same",
}
"""Phrases of contradictions the docs once held, and what is true instead (the wording may still explain them)."""


def test_settled_contradictions_stay_settled() -> None:
    allowed = {"uv run torchrun": ("not `uv run torchrun`", "not uv run torchrun", "under `uv run torchrun`")}
    found = []
    for doc in DOCS:
        text = " ".join(doc.read_text().split())
        for phrase in SETTLED:
            hits = text.count(phrase) - sum(text.count(ok) for ok in allowed.get(phrase, ()))
            if hits > 0:
                found.append(f"{doc.relative_to(ROOT)}: {phrase!r} ({SETTLED[phrase]})")
    assert found == []


TRAINING_READS = re.compile(r"\bread(?:s|ing)?(?: from)? (?:the )?training episodes")
"""A statement that the ``--stop-when`` condition reads the training episodes."""
QUALIFIERS = ("eval-envs 0", "0: none", "before 2026-11-27", "an earlier version")
"""What makes such a statement true: without evaluation environments, or of the runs before the evaluation."""


def _unqualified_training_reads(text: str) -> list[str]:
    """Each place ``text`` says the condition reads the training episodes without saying it is the
    ``--agent.eval-envs 0`` case or the runs from before the evaluation (within the 150 characters before it)."""
    text = " ".join(text.split())
    return [
        text[max(0, m.start() - 60) : m.end()]
        for m in TRAINING_READS.finditer(text)
        if not any(q in text[max(0, m.start() - 150) : m.end()] for q in QUALIFIERS)
    ]


def test_stop_when_reads_the_evaluation_episodes_everywhere() -> None:
    """``--stop-when`` reads the evaluation episodes of the deterministic policy; only ``--agent.eval-envs 0`` (and
    the runs measured before 2026-11-27) read the training episodes. The statements the docs once held fail here."""
    once = [
        "- **`--stop-when` fired but `play` is worse.** The condition reads the training episodes, whose actions are",
        "planar error 0.16 m/s: the stop condition, read from training episodes, held before the deterministic policy",
        "it stands from iteration ~240 (17.6 min); the stop condition reads training episodes, whose action noise",
    ]
    assert all(_unqualified_training_reads(old) for old in once)
    assert _unqualified_training_reads("With `--agent.eval-envs 0` the condition reads the training episodes") == []
    found = [
        f"{doc.relative_to(ROOT)}: ...{hit}"
        for doc in [*DOCS, ROOT / "CHANGELOG.md"]
        for hit in _unqualified_training_reads(doc.read_text())
    ]
    assert found == []


def test_the_readme_starts_a_newcomer_on_the_first_screen() -> None:
    """What the project is, then how to get uv, install, train, play and test, in a block before line 40."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("```bash")
    block = "\n".join(lines[start : lines.index("```", start + 1)])
    assert start < 40
    for step in ("https://astral.sh/uv/install.sh", "pipx install uv", "uv sync", "uv run train", "uv run pytest"):
        assert step in block, step
