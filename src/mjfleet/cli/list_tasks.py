"""``list-tasks``: every task id with its one-line description."""

from __future__ import annotations

from mjfleet.cli.args import task_table, write_out


def main() -> None:
    """Console entry point of ``list-tasks``."""
    write_out(task_table())


if __name__ == "__main__":
    main()
