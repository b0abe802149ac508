"""mjfleet: GPU-parallel robot learning on MuJoCo Warp with PPO, from one CPU to many GPUs and nodes."""

import os

# Warp runs CPU kernels on the calling thread; torch's OpenMP workers busy-wait between parallel regions by default
# and then compete with it for the same cores. On a loaded 2-core machine that made PPO iterations ~10x slower.
# Must be set before the OpenMP runtime loads (with torch), and is inherited by launched workers.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
