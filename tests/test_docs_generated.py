"""The generated documentation matches the code it is generated from: a flag, a default or a measured figure changed
without running the generator fails here. Each generator renders in a second or less, from configuration classes and
checked-in files, without building an environment."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import load_script

SCRIPTS = Path(__file__).parents[1] / "scripts"


def test_cli_reference_is_what_the_configuration_classes_give() -> None:
    cli_reference = load_script(SCRIPTS / "cli_reference.py")
    assert cli_reference.OUT.read_text() == cli_reference.render(), (
        "docs/reference/cli.md is out of date: run uv run python scripts/cli_reference.py"
    )


def test_cli_reference_lists_every_flag_of_every_command_with_its_default() -> None:
    text = (Path(__file__).parents[1] / "docs" / "reference" / "cli.md").read_text()
    for flag, default in (
        ("--env.num-envs", "`1024`"),
        ("--gpu-ids", "`auto`"),
        ("--stop-when", "`None`"),
        ("--num-episodes", "`100`"),  # play
        ("--train-iterations", "`11`"),  # bench
        ("--env.sim.solver-notices, --env.sim.no-solver-notices", "`False`"),
    ):
        assert any(line.startswith(f"| `{flag}` |") and default in line for line in text.splitlines()), flag
    # cartpole-balance trains 80 iterations by default, the number the docs quote.
    section = text.split("### cartpole-balance", 1)[1].split("###", 1)[0]
    assert "| `--agent.max-iterations` | `80` |" in section
