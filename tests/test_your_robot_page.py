"""docs/your_robot.md works when copied: its own code blocks, written to a folder laid out as the page says (a project
of the user's own beside a checkout of mjfleet, with the robot package inside), install with the page's ``uv sync``,
``list-tasks`` shows the package's tasks, and two iterations train on the CPU; the error lines the page shows are the
ones a broken record and a broken import print.

A code block is a file of the page when its first line is a comment naming the file (``# my-training/pyproject.toml``);
``# <file>, continued`` appends to it. The robot's MJCF is the example package's, as the page says. The install goes
into the project's own environment, uv linking the packages from its cache (where this checkout's sync put them),
without network where the cache also holds what resolving the project needs, else with it; this checkout's
environment is not touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "your_robot.md"
TROTTER_XML = ROOT / "examples" / "trotter" / "src" / "mjfleet_trotter" / "trotter.xml"
FILE = re.compile(r"^# (my-training/[\w./-]+?)(, continued)?$")


def page_files(text: str) -> dict[str, str]:
    """The files the page's code blocks spell out: path (under the folder holding ``my-training``) -> content."""
    files: dict[str, str] = {}
    for block in re.findall(r"```(?:toml|python)\n(.*?)```", text, re.S):
        first, _, body = block.partition("\n")
        match = FILE.match(first)
        if match is None:
            continue
        path, continued = match.groups()
        assert (path in files) == bool(continued), f"{first!r}: a file starts once, then continues"
        files[path] = files[path] + "\n\n" + body if continued else body
    return files


def page_block(text: str, language: str, starting: str) -> str:
    """The page's first ``language`` block whose first line starts with ``starting``."""
    return next(b for b in re.findall(rf"```{language}\n(.*?)```", text, re.S) if b.startswith(starting))


def test_the_page_spells_out_every_file_of_its_layout() -> None:
    text = PAGE.read_text()
    files = page_files(text)
    assert set(files) == {
        "my-training/pyproject.toml",
        "my-training/my-robot/pyproject.toml",
        "my-training/my-robot/src/my_robot/tasks.py",
    }
    layout = page_block(text, "text", "mjfleet/")
    for name in ("src/my_robot/__init__.py", "src/my_robot/my_robot.xml", "src/my_robot/tasks.py"):
        assert name in layout
    package = files["my-training/my-robot/pyproject.toml"]
    for needed in ('version = "', "[build-system]", '[project.entry-points."mjfleet.tasks"]'):
        assert needed in package
    compile(files["my-training/my-robot/src/my_robot/tasks.py"], "tasks.py", "exec")  # one module, imports first


def _run(args: list[str], cwd: Path, offline: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE", "UV_PROJECT")}
    env |= {"WANDB_MODE": "offline", "MUJOCO_GL": "egl"} | ({"UV_OFFLINE": "1"} if offline else {})
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)


def _lines(text: str) -> list[str]:
    """Lines of output with the temporary folder's paths shortened as the page writes them (``.../my_robot.xml``)."""
    return [re.sub(r"\(/\S*/(\w+\.xml)\)", r"(.../\1)", line) for line in text.splitlines()]


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
def test_the_pages_package_installs_lists_and_trains(tmp_path: Path) -> None:
    text = PAGE.read_text()
    (tmp_path / "mjfleet").symlink_to(ROOT)  # the checkout of mjfleet beside the project
    for path, content in page_files(text).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    package = tmp_path / "my-training" / "my-robot" / "src" / "my_robot"
    (package / "__init__.py").touch()
    shutil.copy(TROTTER_XML, package / "my_robot.xml")
    project = tmp_path / "my-training"
    try:
        # The page's commands: `uv sync --compile-bytecode` without compiling (minutes of torch here; it only
        # makes starts faster), then list-tasks, then two short iterations of its training command.
        done = _run(["uv", "sync"], project)
        if done.returncode != 0:  # uv's cache lacks the index pages a new lock needs: resolve online
            done = _run(["uv", "sync"], project, offline=False)
        assert done.returncode == 0, done.stderr[-3000:]
        done = _run(["uv", "run", "list-tasks"], project)
        assert done.returncode == 0, done.stderr[-3000:]
        rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
        for task in ("my-robot-velocity-flat", "my-robot-velocity-rough"):
            assert rows[task].endswith("[package my-robot]"), rows.get(task)
        assert "go1-velocity-flat" in rows and not done.stderr.strip()
        short = ["--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8"]
        train = ["uv", "run", "train", "my-robot-velocity-flat", *short, "--agent.max-iterations", "2"]
        done = _run(train, project)
        assert done.returncode == 0, done.stderr[-3000:]
        (run_dir,) = (project / "logs" / "rsl_rl" / "my_robot_velocity_flat").iterdir()
        assert (run_dir / "model_2.pt").is_file()

        # The page's error lines, from the same package broken as the page says.
        tasks = package / "tasks.py"
        good = tasks.read_text()
        shown = page_block(text, "text", "warning: ")
        tasks.write_text(good.replace('base_body="torso"', 'base_body="chassis"'))
        done = _run(["uv", "run", "list-tasks"], project)
        assert done.returncode == 0
        (warning,) = _lines(done.stderr)
        assert warning in shown.splitlines(), warning
        done = _run(["uv", "run", "train", "my-robot-velocity-flat", "--gpu-ids", "None"], project)
        assert done.returncode == 2
        (error,) = _lines(done.stderr)
        assert error in page_block(text, "text", "error: ").splitlines(), error
        tasks.write_text(good.replace("from pathlib import Path", "from pathlib import Path\nimport my_robot_files"))
        done = _run(["uv", "run", "list-tasks"], project)
        assert done.returncode == 0
        (warning,) = _lines(done.stderr)
        assert warning in shown.splitlines(), warning
    finally:
        shutil.rmtree(project / ".venv", ignore_errors=True)  # links to uv's cache: nothing of this checkout's
