"""``list-tasks``: every task id with its one-line description."""

from __future__ import annotations

import sys

from mjfleet.tasks.registry import all_tasks


def main() -> None:
    """Console entry point of ``list-tasks``."""
    tasks = all_tasks()
    width = max((len(t) for t in tasks), default=0)
    for task_id, spec in tasks.items():
        sys.stdout.write(f"{task_id:<{width}}  {spec.description}\n")


if __name__ == "__main__":
    main()
