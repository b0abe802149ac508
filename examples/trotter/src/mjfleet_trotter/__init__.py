"""Trotter: a quadruped of primitives and its velocity tasks, added to mjfleet through the ``mjfleet.tasks`` entry
point (``tasks.tasks``)."""
