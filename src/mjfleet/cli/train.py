"""``train <task> [overrides]``: parse, then :func:`mjfleet.train.run`, then an exit code.

Checks and planning live in :mod:`mjfleet.train` (the same for every entry point): a rejected command leaves
nothing behind, and ``--dry-run`` prints the plan that would run.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

from mjfleet.cli.args import parse, print_help, wants_help, write_out
from mjfleet.console import configure_logging
from mjfleet.envs.config import EnvConfig
from mjfleet.errors import FatalTrainingError, UsageError, exits_on_usage_error
from mjfleet.launch.diagnosis import WorkerFailure
from mjfleet.rl.checkpoint import list_checkpoints
from mjfleet.rl.config import AgentConfig
from mjfleet.runtime.devices import trains_on_cpu
from mjfleet.runtime.nccl import nccl_hint
from mjfleet.runtime.stop import StopRequest, exit_code, signal_name
from mjfleet.tasks.registry import get_task
from mjfleet.tasks.spec import TaskSpec
from mjfleet.train import Prepared, TrainConfig, describe, prepare, run

logger = logging.getLogger("mjfleet.train")


def parse_args(argv: list[str], prog: str = "train") -> TrainConfig:
    """``<task> [--field value ...]`` -> a complete :class:`TrainConfig` with the task's defaults (not yet checked:
    :func:`mjfleet.train.prepare` does that)."""
    if not argv or argv[0].startswith("-"):
        if wants_help(argv):
            generic = TrainConfig(env=EnvConfig(), agent=AgentConfig())
            print_help(TrainConfig, generic, prog, "Train a task. Defaults below are generic; each task sets its own.")
        raise UsageError(f"usage: {prog} <task> [OPTIONS]; run list-tasks to see the task ids")
    spec = get_task(argv[0])
    command = f"{prog} {spec.id}"
    on_cpu = _trains_on_cpu(spec, argv[1:], command)
    default = TrainConfig(env=spec.env_cfg(), agent=spec.agent_defaults(on_cpu), task=spec.id)
    description = f"{CPU_DEFAULTS_NOTE}\n\n{TrainConfig.__doc__}" if on_cpu else None
    cfg = parse(TrainConfig, argv[1:], command, default, description)
    cfg.task = spec.id
    return cfg


CPU_DEFAULTS_NOTE = "PPO defaults below: this task's for training on the CPU (with a GPU it uses others)."


def _trains_on_cpu(spec: TaskSpec, args: list[str], command: str) -> bool:
    """Whether the command trains on the CPU, for a task with PPO defaults of its own there: the device is read
    from a first parse, before the defaults are chosen (without ``--help``, so help shows the ones that apply)."""
    if spec.cpu_agent_cfg is None:
        return False
    probe = TrainConfig(env=spec.env_cfg(), agent=spec.agent_cfg(), task=spec.id)
    try:
        gpu_ids = parse(TrainConfig, [a for a in args if a not in ("-h", "--help")], command, probe).gpu_ids
    except UsageError:
        if not wants_help(args):
            raise
        return False  # help for a command with other errors: the GPU defaults
    return trains_on_cpu(gpu_ids)


def _resume_hint(prepared: Prepared, run_dir: Path) -> str:
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        return f"no checkpoint was written to {run_dir}"
    if prepared.identity is not None:
        again = "run the same job again" if prepared.identity.source != "--run-id" else "run the same command again"
        return f"checkpoint {checkpoints[-1][1]}; {again} (run id {prepared.identity.value}) to continue"
    return f"checkpoint {checkpoints[-1][1]}; resume with: train {prepared.cfg.task} --resume {run_dir}"


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``train``.

    Exit codes: 0 done, 1 training failed, 2 invalid input, 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM).
    """
    configure_logging()
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    prepared = prepare(cfg)
    if prepared.external is not None and prepared.external.rank != 0:
        logging.getLogger("mjfleet").setLevel(logging.WARNING)  # rank 0 speaks for the job
    if prepared.selection.kind == "cpu" and get_task(cfg.task).cpu_agent_cfg is not None:
        logger.info("PPO defaults of %s on the CPU (train %s --gpu-ids None --help shows them)", cfg.task, cfg.task)
    if cfg.dry_run:
        write_out(describe(prepared))
        return
    stop = StopRequest()
    with stop.install():
        try:
            results = run(prepared, stop)
        except (WorkerFailure, FatalTrainingError) as failure:
            logger.error("%s", failure)
            raise SystemExit(1) from None
        except UsageError:
            raise
        except Exception as e:
            # One rank of another launcher's job: its traceback is the report; add what helps with NCCL.
            hint = nccl_hint("".join(traceback.format_exception(e))) if prepared.external is not None else None
            if hint is not None:
                logger.error("hint: %s", hint)
            raise
        except KeyboardInterrupt:
            signum = stop.signum or 2
            hint = _resume_hint(prepared, prepared.run_dir)
            logger.warning("stopped immediately by %s; %s", signal_name(signum), hint)
            raise SystemExit(exit_code(signum)) from None
    # Another rank's signal stops this one too (a scheduler may signal only some ranks): exit as stopped, so the
    # launcher restarts or requeues the job rather than taking it as done.
    signum = stop.signum or results[0].stop_signal
    if signum is not None:
        final = results[0].final_iteration
        if results[0].stop_signal is None:
            logger.warning("finished at iteration %d before the stop request took effect", final)
        hint = _resume_hint(prepared, Path(results[0].run_dir or prepared.run_dir))
        logger.warning("stopped by %s after iteration %d; %s", signal_name(signum), final, hint)
        raise SystemExit(exit_code(signum))
    met = results[0].condition_met_at
    if met is not None:
        logger.info("finished at iteration %d: --stop-when %s was met", met, cfg.stop_when)
    else:
        logger.info("finished at iteration %d", results[0].final_iteration)


if __name__ == "__main__":
    main()
