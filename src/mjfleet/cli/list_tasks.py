"""``list-tasks``: every task id with its one-line description, and a line for each package that failed to load;
``list-tasks --robots``: the robot records ``--env.robot`` takes by name."""

from __future__ import annotations

import sys

from mjfleet.cli.args import broken_package_lines, reader_may_leave, robot_table, task_table, wants_help, write_out
from mjfleet.errors import UsageError, exits_on_usage_error
from mjfleet.tasks.registry import check_robot_files

USAGE = (
    "usage: list-tasks [--robots]: every task id with its one-line description (--robots: the robot records"
    " --env.robot takes by name)"
)


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``list-tasks``: exit 0 even with broken packages (everything else is listed)."""
    argv = sys.argv[1:] if argv is None else argv
    if wants_help(argv):
        write_out(USAGE + "\n")
        return
    robots = argv == ["--robots"]
    if argv and not robots:  # a flag meant for train (or a typo) would print the table as if it had been taken
        raise UsageError(f"list-tasks takes no arguments but --robots (got {' '.join(argv)}); {USAGE}")
    check_robot_files()  # the packages' robot files: only what can be trained is listed
    write_out(robot_table() if robots else task_table())
    with reader_may_leave():
        for line in broken_package_lines():
            sys.stderr.write(f"warning: {line}\n")


if __name__ == "__main__":
    from mjfleet.runtime.process_end import run_as_process

    run_as_process(main)
