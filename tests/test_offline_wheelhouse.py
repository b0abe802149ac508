"""``scripts/offline_wheelhouse.py``: the locked requirements chosen for the target's Python and platform, the pip
and uv commands it would run, and its usage errors. Nothing is downloaded here (``--dry-run`` only)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from mjfleet.errors import UsageError

from .helpers import load_script

REPO = Path(__file__).resolve().parents[1]
wheelhouse = load_script(REPO / "scripts" / "offline_wheelhouse.py")

EXPORT = """\
absl-py==2.5.1
    # via tensorboard
colorama==0.4.6 ; sys_platform == 'win32'
cuda-toolkit==13.2.2 ; sys_platform == 'linux'
deprecated==1.3.1 ; python_full_version < '3.12'
deprecated==3.0.1 ; python_full_version >= '3.12'
nvidia-cufft==12.2.0.57 ; (platform_machine == 'aarch64' or platform_machine == 'x86_64') and sys_platform == 'linux'
pycparser==3.12 ; implementation_name != 'PyPy' and platform_python_implementation != 'PyPy'
"""


def _target(python: str = "3.12", platform: str = "manylinux_2_28_x86_64") -> Any:
    return wheelhouse.parse_target(python, platform, ">=3.11")


def test_markers_are_evaluated_for_the_target_not_this_machine() -> None:
    assert wheelhouse.select_requirements(EXPORT, _target("3.12")) == [
        "absl-py==2.5.1",
        "cuda-toolkit==13.2.2",
        "deprecated==3.0.1",
        "nvidia-cufft==12.2.0.57",
        "pycparser==3.12",
    ]
    assert "deprecated==1.3.1" in wheelhouse.select_requirements(EXPORT, _target("3.11.7", "manylinux_2_17_aarch64"))


def test_an_unpinned_line_is_refused() -> None:
    with pytest.raises(UsageError, match="unpinned"):
        wheelhouse.select_requirements("torch>=2.6\n", _target())


def test_platform_tags_are_every_glibc_up_to_the_targets_with_the_legacy_names() -> None:
    tags = _target(platform="manylinux_2_17_aarch64").platform_tags()
    assert tags[:2] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert tags[-2:] == ["manylinux_2_5_aarch64", "manylinux1_aarch64"]
    assert "manylinux2010_aarch64" in tags and "manylinux_2_18_aarch64" not in tags
    assert not any("x86_64" in tag for tag in tags)


@pytest.mark.parametrize(
    ("python", "platform", "message"),
    [
        ("3.12", "win_amd64", "--platform must be a manylinux tag"),
        ("3.12", "manylinux2014_x86_64", "--platform must be a manylinux tag"),
        ("twelve", "manylinux_2_28_x86_64", "--python must be a CPython version"),
        ("3.10", "manylinux_2_28_x86_64", "mjfleet needs Python >=3.11"),
    ],
)
def test_a_bad_target_is_a_usage_error(python: str, platform: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        wheelhouse.parse_target(python, platform, ">=3.11")


def test_the_export_leaves_out_torch_and_the_dev_tools_when_asked() -> None:
    plain = wheelhouse.export_command(False, False, ["pytest", "ruff"])
    assert "--no-dev" in plain and "--prune" not in plain and "--no-emit-project" in plain
    command = wheelhouse.export_command(True, True, ["pytest", "hypothesis", "ruff", "pyright"])
    pruned = [command[i + 1] for i, part in enumerate(command) if part == "--prune"]
    assert pruned == ["ruff", "pyright", "torch"] and "--group=dev" in command and "--no-dev" not in command


def test_pip_downloads_binary_wheels_for_the_target_only(tmp_path: Path) -> None:
    command = wheelhouse.download_command(_target("3.12"), tmp_path / "requirements.txt", tmp_path / "wheels")
    assert "--only-binary=:all:" in command and "--no-deps" in command and "--python-version=3.12" in command
    assert command[command.index("--abi") + 1] == "cp312"
    assert command[command.index("--platform") + 1] == "manylinux_2_28_x86_64"


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        wheelhouse.main([str(tmp_path / "out"), "--platform", "macosx_14_0_arm64", "--dry-run"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --platform must be a manylinux tag") and err.count("\n") == 1, err


@pytest.mark.slow  # runs `uv export`
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on PATH (uv export reads uv.lock)")
def test_dry_run_lists_the_locked_wheels_and_writes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "wheelhouse"
    with caplog.at_level(logging.INFO, logger="offline_wheelhouse"):
        code = wheelhouse.main([str(out), "--python", "3.12", "--without-torch", "--with-tests", "--dry-run"])
    assert code == 0
    assert not out.exists()
    text = caplog.text
    listed = next(line for line in text.splitlines() if "wheels for CPython 3.12" in line)
    names = {item.split("==")[0] for item in listed.split(": ", 1)[1].split()}
    assert {"warp-lang", "mujoco-warp", "rsl-rl-lib", "torchrunx", "pytest", "hypothesis"} <= names
    assert not names & {"torch", "triton", "ruff", "pyright", "playwright"}
    assert not any(name.startswith("nvidia-") for name in names)
    assert "uv build --wheel" in text and "download" in text and "--no-index --find-links" in text
    assert "--system-site-packages" in text  # the target's own torch must be visible to the environment
