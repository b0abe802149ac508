"""The versions of a dependency that pyproject.toml allows, for the tests that check what mjfleet relies on in it."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def assert_checked_range(name: str, checked: str) -> None:
    """pyproject.toml allows exactly ``checked`` (the versions a contract test was written for) of ``name``, and the
    installed version is one of them."""
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (declared,) = [r.specifier for r in map(Requirement, dependencies) if r.name == name]
    assert str(declared) == checked, (
        f"pyproject.toml allows {name}{declared} but its contract tests were checked for {name}{checked}:"
        " re-check them against the new range, then make both say the same"
    )
    assert Version(version(name)) in declared, f"{name} {version(name)} is installed, outside {checked}"
