"""mjfleet: GPU-parallel robot learning on MuJoCo Warp with PPO, from one CPU to many GPUs and nodes."""

import os

# torch's OpenMP workers busy-wait between parallel regions by default and then compete for the cores with the
# simulation's threads (Warp's kernel thread, MuJoCo C's pool): on a loaded 2-core machine PPO iterations were ~10x
# slower. Passive waiting fixes that, but a worker that goes to sleep at once has to be woken for each of the PPO
# update's thousands of small operations; a short spin first (GNU OpenMP, which torch's Linux wheels use, reads
# GOMP_SPINCOUNT over the wait policy) made the update ~25% faster on 2 idle cores and the rollout no slower; on
# cores other processes keep busy it costs 5-30% (docs/performance.md). Set before the OpenMP runtime loads (with
# torch), inherited by launched workers, and left alone where the user chose either.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = "10000"

__version__ = "0.1.0"
