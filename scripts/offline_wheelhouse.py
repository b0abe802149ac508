"""Wheels to install mjfleet on a machine without a package index (an air-gapped GPU cluster, say).

Run it from a checkout of mjfleet, on a machine where uv and pip reach the package index:

    uv run python scripts/offline_wheelhouse.py OUT_DIR [--python 3.12] [--platform manylinux_2_28_x86_64]
        [--without-torch] [--with-tests] [--dry-run]

It writes OUT_DIR/requirements.txt (every package uv.lock pins for mjfleet that applies to the target, at its locked
version), OUT_DIR/wheels/ (mjfleet's own wheel and one binary wheel per requirement) and OUT_DIR/INSTALL.txt. Copy
OUT_DIR to the target and install without an index there:

    python3 -m venv ENV
    ENV/bin/pip install --no-index --find-links OUT_DIR/wheels -r OUT_DIR/requirements.txt mjfleet

The target is CPython ``--python`` on Linux with the glibc and CPU architecture of ``--platform`` (default: this
Python's version and glibc 2.28 on this machine's architecture); the lock's environment markers are evaluated for
it, not for this machine. ``--without-torch`` leaves out PyPI's torch and what only torch needs (the CUDA libraries
and triton, most of the bytes) for a target whose Python already has a CUDA PyTorch: create ENV there with
``--system-site-packages`` so that it sees that torch. ``--with-tests`` adds the test runner of the ``dev`` group
(pytest, hypothesis) that ``scripts/gpu_acceptance.sh`` needs. ``--dry-run`` lists the wheels and commands and
writes nothing. Running it again into the same OUT_DIR downloads only the wheels that are missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

from packaging.markers import Marker
from packaging.specifiers import SpecifierSet

from mjfleet.errors import UsageError, exits_on_usage_error

REPO = Path(__file__).resolve().parents[1]
TEST_RUNNER = ("pytest", "hypothesis")  # of the dev group; the rest of it (linters, a browser) stays out
PLATFORM_TAG = re.compile(r"manylinux_2_(\d+)_(x86_64|aarch64)")
LEGACY_MANYLINUX = {5: "manylinux1", 12: "manylinux2010", 17: "manylinux2014"}  # PEP 600's aliases, by glibc minor

logger = logging.getLogger("offline_wheelhouse")


class Target(NamedTuple):
    """The Python and platform the wheels are for."""

    python: tuple[int, int, int]
    glibc_minor: int
    machine: str

    @property
    def python_tag(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}"

    @property
    def platform(self) -> str:
        return f"manylinux_2_{self.glibc_minor}_{self.machine}"

    def platform_tags(self) -> list[str]:
        """Every manylinux tag a glibc-2.N machine accepts, newest first (pip matches each tag literally)."""
        tags: list[str] = []
        for minor in range(self.glibc_minor, 4, -1):
            tags.append(f"manylinux_2_{minor}_{self.machine}")
            if minor in LEGACY_MANYLINUX:
                tags.append(f"{LEGACY_MANYLINUX[minor]}_{self.machine}")
        return tags

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values of the target (the rest of them no lock entry here depends on)."""
        major, minor, micro = self.python
        return {
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "python_version": f"{major}.{minor}",
            "python_full_version": f"{major}.{minor}.{micro}",
            "implementation_version": f"{major}.{minor}.{micro}",
            "os_name": "posix",
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": self.machine,
        }


def parse_target(python: str, platform_tag: str, requires_python: str) -> Target:
    if not re.fullmatch(r"3\.\d+(\.\d+)?", python):
        raise UsageError(f"--python must be a CPython version such as 3.12 (got {python!r})")
    parts = [int(p) for p in python.split(".")]
    version = (parts[0], parts[1], parts[2] if len(parts) == 3 else 0)
    if not SpecifierSet(requires_python).contains(".".join(map(str, version))):
        raise UsageError(f"--python {python}: mjfleet needs Python {requires_python}")
    match = PLATFORM_TAG.fullmatch(platform_tag)
    if match is None:
        raise UsageError(
            f"--platform must be a manylinux tag such as manylinux_2_28_x86_64 (glibc 2.28, x86-64; or aarch64), "
            f"got {platform_tag!r}"
        )
    return Target(python=version, glibc_minor=int(match.group(1)), machine=match.group(2))


def default_platform() -> str:
    machine = {"arm64": "aarch64", "amd64": "x86_64"}.get(platform.machine().lower(), platform.machine().lower())
    return f"manylinux_2_28_{machine if machine in ('x86_64', 'aarch64') else 'x86_64'}"


def export_command(without_torch: bool, with_tests: bool, dev_group: list[str]) -> list[str]:
    """``uv export`` of the locked packages mjfleet needs (itself excluded: its wheel is built from the checkout)."""
    command = ["uv", "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--no-header"]
    command.append("--no-annotate")
    if with_tests:
        command[command.index("--no-dev")] = "--group=dev"
        for name in dev_group:
            if name not in TEST_RUNNER:
                command += ["--prune", name]
    if without_torch:
        command += ["--prune", "torch"]
    return command


def select_requirements(exported: str, target: Target) -> list[str]:
    """The ``name==version`` lines of a ``uv export`` whose markers hold on the target, markers removed."""
    environment = target.marker_environment()
    selected: list[str] = []
    for raw in exported.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement, _, marker = (part.strip() for part in line.partition(";"))
        if "==" not in requirement:
            raise UsageError(f"uv export gave an unpinned requirement {requirement!r}; is uv.lock up to date?")
        if not marker or Marker(marker).evaluate(environment):
            selected.append(requirement)
    return selected


def pip_command() -> list[str]:
    """pip of this Python where it has one, else the newest pip through uv."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    return ["uv", "tool", "run", "--from", "pip", "pip"]


def download_command(target: Target, requirements: Path, wheels: Path) -> list[str]:
    abi = ["--abi", target.python_tag, "--abi", "abi3", "--abi", "none"]
    platforms = [option for tag in target.platform_tags() for option in ("--platform", tag)]
    python_version = f"{target.python[0]}.{target.python[1]}"
    return [
        *pip_command(),
        "download",
        "--disable-pip-version-check",
        "--no-deps",  # requirements.txt is the whole closure already, resolved by uv
        "--only-binary=:all:",
        "--implementation=cp",
        f"--python-version={python_version}",
        *abi,
        *platforms,
        "--dest",
        str(wheels),
        "--requirement",
        str(requirements),
    ]


def install_text(target: Target, without_torch: bool) -> str:
    """How to install the wheelhouse on the target (WHEELHOUSE: the copied OUT_DIR there)."""
    version = f"{target.python[0]}.{target.python[1]}"
    venv = "python3 -m venv --system-site-packages ENV" if without_torch else "python3 -m venv ENV"
    lines = [
        f"mjfleet's wheels for CPython {version} on Linux {target.machine} with glibc 2.{target.glibc_minor} or newer.",
        "Install them without a package index, WHEELHOUSE being this folder on the target, into a virtual environment:",
        "",
        f"    {venv}",
        "    ENV/bin/pip install --no-index --find-links WHEELHOUSE/wheels -r WHEELHOUSE/requirements.txt mjfleet",
        "",
        "or into a folder for PYTHONPATH (requirements.txt holds every dependency, hence --no-deps):",
        "",
        "    python3 -m pip install --no-index --no-deps --find-links WHEELHOUSE/wheels --target SITE \\",
        "        -r WHEELHOUSE/requirements.txt mjfleet",
        "    export PYTHONPATH=SITE",
    ]
    if without_torch:
        lines += ["", "torch is not included: the target's Python must already have a CUDA PyTorch."]
    return "\n".join(lines) + "\n"


def run(command: list[str], what: str) -> None:
    logger.info("+ %s", shlex.join(command))
    code = subprocess.run(command, cwd=REPO, check=False).returncode
    if code != 0:
        raise UsageError(f"{what} failed (exit code {code}); its messages are above")


@exits_on_usage_error
def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    parser = argparse.ArgumentParser(prog="offline_wheelhouse.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write requirements.txt, wheels/ and INSTALL.txt into")
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    parser.add_argument("--platform", default=default_platform(), help="manylinux_2_<glibc minor>_<x86_64|aarch64>")
    parser.add_argument("--without-torch", action="store_true", help="the target's Python has a CUDA PyTorch")
    parser.add_argument("--with-tests", action="store_true", help="also pytest and hypothesis (GPU acceptance)")
    parser.add_argument("--dry-run", action="store_true", help="list the wheels and commands, write nothing")
    args = parser.parse_args(argv)

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = parse_target(args.python, args.platform, project["project"]["requires-python"])
    if shutil.which("uv") is None:
        raise UsageError("needs uv on PATH to read uv.lock and build mjfleet's wheel (https://docs.astral.sh/uv/)")
    dev_group = [re.split(r"[<>=!~\[; ]", item, maxsplit=1)[0] for item in project["dependency-groups"]["dev"]]
    export = export_command(args.without_torch, args.with_tests, dev_group)
    logger.info("+ %s", shlex.join(export))
    exported = subprocess.run(export, cwd=REPO, capture_output=True, text=True, check=False)
    if exported.returncode != 0:
        lines = exported.stderr.strip().splitlines()
        raise UsageError(f"uv export failed: {lines[-1] if lines else f'exit code {exported.returncode}'}")
    requirements = select_requirements(exported.stdout, target)
    logger.info(
        "%d wheels for CPython %d.%d on %s, plus mjfleet's own: %s",
        len(requirements),
        target.python[0],
        target.python[1],
        target.platform,
        " ".join(requirements),
    )

    out = args.out.resolve()
    wheels = out / "wheels"
    build = ["uv", "build", "--wheel", "--out-dir", str(wheels)]
    download = download_command(target, out / "requirements.txt", wheels)
    if args.dry_run:
        for command in (build, download):
            logger.info("+ %s", shlex.join(command))
        logger.info("then, on the target:\n%s", install_text(target, args.without_torch))
        return 0

    wheels.mkdir(parents=True, exist_ok=True)
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
    run(build, "building mjfleet's wheel")
    run(download, "pip download")
    (out / "INSTALL.txt").write_text(install_text(target, args.without_torch))
    files = sorted(wheels.glob("*.whl"))
    mib = sum(f.stat().st_size for f in files) / 2**20
    logger.info("%d wheels, %.0f MiB, in %s; install as %s says", len(files), mib, wheels, out / "INSTALL.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
