"""The training flow: configuration and its checks, the launch plan, the worker function, restarts."""
