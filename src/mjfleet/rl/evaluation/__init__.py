"""Judging the deterministic policy: evaluation episodes, their window, the stop condition and the check before a
stop."""
