"""Run a function on many workers (GPUs, CPU processes, hosts) through torchrunx, and diagnose their failures.
Importing this package is cheap: torchrunx is imported only when a launch needs it."""
