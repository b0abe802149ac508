"""The nodes of a SLURM job, for ``--hostnames slurm`` and ``--hostnames auto``.

Not torchrunx's ``slurm_hosts``: it imports torch, runs scontrol with no timeout or node list, fails in tracebacks.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from mjfleet.errors import UsageError

HOST_KEYWORDS = ("slurm", "auto")
"""``--hostnames`` values that are not host names: the SLURM job's nodes, and those nodes only inside a job."""
SCONTROL_TIMEOUT_S = 30.0


def in_slurm_allocation(env: Mapping[str, str]) -> bool:
    """Whether this process runs inside a SLURM job (an ``sbatch`` script, ``salloc`` or ``srun``)."""
    return bool(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))


def resolve_hostnames(hostnames: tuple[str, ...], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The hosts to launch on.

    ``()`` -> this machine only; ``("slurm",)`` -> the nodes of the current SLURM job (an error outside one);
    ``("auto",)`` -> the job's nodes inside a SLURM job, else this machine only; anything else as given.
    """
    env = os.environ if env is None else env
    keyword = hostnames[0].lower() if len(hostnames) == 1 and hostnames[0].lower() in HOST_KEYWORDS else None
    if not hostnames or (keyword == "auto" and not in_slurm_allocation(env)):
        return ("localhost",)
    if keyword is not None:
        return slurm_job_nodes(env, flag=f"--hostnames {keyword}")
    return hostnames


def slurm_job_nodes(env: Mapping[str, str], flag: str = "--hostnames slurm") -> tuple[str, ...]:
    """The node names of the current SLURM job (``scontrol show hostnames $SLURM_JOB_NODELIST``), in order."""
    if not in_slurm_allocation(env):
        raise UsageError(
            f"{flag} needs a SLURM allocation (SLURM_JOB_ID is not set): run it from an sbatch script or salloc,"
            " or list the hosts"
        )
    task = env.get("SLURM_PROCID", "0")
    if task not in ("", "0"):
        raise UsageError(
            f"{flag}: this is SLURM task {task} of {env.get('SLURM_NTASKS', '?')}; start one launcher per job"
            " (run train once in the sbatch script, or srun --ntasks=1): it starts the workers on every node"
        )
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError(f"{flag}: SLURM_JOB_NODELIST is not set, so the job's nodes are unknown")
    return expand_nodelist(nodelist, flag)


def expand_nodelist(nodelist: str, flag: str) -> tuple[str, ...]:
    """A SLURM node list (``node-[01-04]``) as host names in order, through ``scontrol show hostnames``.

    ``flag`` names what needed the list, for the messages.
    """
    command = ["scontrol", "show", "hostnames", nodelist]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UsageError(f"{flag}: scontrol is not on PATH (it expands the node list {nodelist})") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"{flag}: '{' '.join(command)}' did not answer within {SCONTROL_TIMEOUT_S:g} s") from None
    except OSError as e:
        raise UsageError(f"{flag}: cannot run scontrol: {e.strerror}") from None
    if done.returncode != 0:
        said = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "no message")
        raise UsageError(f"{flag}: '{' '.join(command)}' failed (exit code {done.returncode}): {said}")
    nodes = tuple(line.strip() for line in done.stdout.splitlines() if line.strip())
    if not nodes:
        raise UsageError(f"{flag}: '{' '.join(command)}' listed no nodes")
    return nodes
