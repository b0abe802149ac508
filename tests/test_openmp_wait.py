"""Importing mjfleet sets how torch's OpenMP workers wait, before torch loads, unless the user chose it already."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}


def _after_import(setup: str = "import mjfleet; env = os.environ", **given: str) -> dict[str, str | None]:
    """The two variables of ``env`` after ``setup`` runs in a fresh interpreter started with ``given`` set (by
    default: its own environment after ``import mjfleet``)."""
    env = {k: v for k, v in os.environ.items() if k not in _KEYS} | given
    code = f"import json, os; {setup}; print(json.dumps({{k: env.get(k) for k in {_KEYS!r}}}))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_defaults_wait_passively_after_a_short_spin() -> None:
    assert _after_import() == _DEFAULTS


@pytest.mark.parametrize(
    "given",
    [{"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "0"}, {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "5"}],
)
def test_a_choice_of_the_user_is_left_alone(given: dict[str, str]) -> None:
    assert _after_import(**given) == {k: given.get(k) for k in _KEYS}


@pytest.mark.parametrize("given", [{}, {"GOMP_SPINCOUNT": "0"}])
def test_remote_workers_wait_as_the_launching_host_does(given: dict[str, str]) -> None:
    # Local workers inherit the launcher's environment; a worker on another host gets only the copied variables and
    # would otherwise apply mjfleet's defaults over the user's choice.
    setup = (
        "from mjfleet.launch.launcher import REMOTE_ENV_PATTERNS, agent_environment; "
        "env = agent_environment(REMOTE_ENV_PATTERNS, {})"
    )
    expected = {k: given.get(k) for k in _KEYS} if given else _DEFAULTS
    assert _after_import(setup, **given) == expected
