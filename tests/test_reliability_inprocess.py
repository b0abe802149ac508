"""Reliability guarantees that need no launched workers: checkpoint contents, NaN handling, clean interrupts in
process, restart bookkeeping, failure diagnosis, resume resolution and log-root checks."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from mjfleet.cli import train
from mjfleet.errors import UsageError
from mjfleet.launch.diagnosis import WorkerFailure, build_failure
from mjfleet.launch.launcher import LaunchPlan
from mjfleet.launch.worker_logs import write_report
from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint, resolve_checkpoint, save_atomic
from mjfleet.rl.checkpoint.saving import CheckpointWriteError
from mjfleet.rl.divergence import NonFiniteTrainingError
from mjfleet.rl.runner import Runner
from mjfleet.runs import start as start_module
from mjfleet.runs.start import StartPoint
from mjfleet.runtime import stop as stop_module
from mjfleet.runtime.context import DistributedContext
from mjfleet.runtime.stop import STOP_FILE, StopRequest
from mjfleet.train import run, supervisor
from mjfleet.train.config import TrainConfig
from mjfleet.train.worker import train_worker

from .helpers import make_run_dir, rsl_ppo, small_train_config
from .instruments import FAULT_ENV, instrument

CPU = DistributedContext(device="cpu")
TINY = ["--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8"]
MINIMAL = {"actor_state_dict": {}, "critic_state_dict": {}, "optimizer_state_dict": {}}


def _main(argv: list[str]) -> tuple[int, str]:
    """``train.main`` in-process: exit code and stderr."""
    err = io.StringIO()
    code: object = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            train.main(argv)
        except SystemExit as e:
            code = e.code
    return int(code), err.getvalue()  # type: ignore[call-overload]


def _flat(text: str) -> str:
    """Console text with rich's line wrapping undone (words joined by single spaces)."""
    return " ".join(text.split())


def _runner(cfg: TrainConfig) -> Runner:
    from mjfleet.envs.env import MjEnv
    from mjfleet.tasks.registry import get_task

    env = MjEnv(get_task(cfg.task).load_task_class()(cfg.env), "cpu", 0)
    return Runner(env, cfg.agent, CPU, None)


# --- checkpoints ------------------------------------------------------------------------------------------------


def test_checkpoint_carries_the_whole_training_state(tmp_path: Path) -> None:
    cfg = small_train_config(num_envs=32, steps=8, iterations=2, log_root=tmp_path, init_at_random_ep_len=True)
    run_dir = make_run_dir(tmp_path, "state")
    train_worker(cfg, run_dir, CPU)
    data = load_checkpoint(run_dir / "model_2.pt")
    assert data["iter"] == 2 and math.isfinite(data["learning_rate"])
    assert data["optimizer_state_dict"]["state"], "Adam moments are saved"
    # Observation normalisers are buffers of the models, so they travel with the model state dicts.
    assert {"obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer.count"} <= set(data["actor_state_dict"])
    assert float(data["actor_state_dict"]["obs_normalizer.count"]) > 0
    (state,) = data["rank_states"]
    assert {"torch_rng_state", "numpy_rng_state", "python_rng_state", "env_generator_state"} <= set(state)
    assert state["episode_length_buf"].shape == (32,) and state["common_step_counter"] == 16

    # Loading restores the RNG streams and episode counters exactly.
    torch.manual_seed(123)
    np.random.seed(123)
    runner = _runner(cfg)
    runner.load(str(run_dir / "model_2.pt"))
    assert torch.equal(torch.get_rng_state(), state["torch_rng_state"])
    assert np.random.get_state(legacy=True)[2] == state["numpy_rng_state"]["pos"]  # type: ignore[index]
    assert torch.equal(runner.env.generator.get_state(), state["env_generator_state"])
    assert torch.equal(runner.env.episode_length_buf, state["episode_length_buf"])
    assert runner.env.common_step_counter == 16 and runner.restored_env_state
    for key, value in data["actor_state_dict"].items():
        assert torch.equal(rsl_ppo(runner).actor.state_dict()[key], value), key


def test_checkpoint_with_code_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "model_1.pt"
    torch.save({**MINIMAL, "iter": 1, "payload": Exploit()}, path)
    with pytest.raises(UsageError, match="refusing to unpickle"):
        load_checkpoint(path)
    assert not marker.exists()


def test_resume_of_a_run_with_a_truncated_newest_checkpoint_exits_2(tmp_path: Path) -> None:
    run_dir = tmp_path / "old_run"
    save_atomic({**MINIMAL, "iter": 1}, run_dir / "model_1.pt")
    save_atomic({**MINIMAL, "iter": 2}, run_dir / "model_2.pt")
    newest = run_dir / "model_2.pt"
    newest.write_bytes(newest.read_bytes()[:100])
    code, err = _main(["cartpole-balance", *TINY, "--resume", str(run_dir), "--log-root", str(tmp_path / "logs")])
    assert code == 2
    assert err.count("\n") == 1 and "model_2.pt is corrupt or truncated" in err and "Traceback" not in err
    assert not (tmp_path / "logs").exists()


def test_resume_from_an_experiment_directory_picks_the_newest_run(tmp_path: Path) -> None:
    experiment = tmp_path / "exp"
    save_atomic({**MINIMAL, "iter": 9}, experiment / "run_a" / "model_9.pt")
    time.sleep(0.05)
    save_atomic({**MINIMAL, "iter": 4}, experiment / "run_b" / "model_4.pt")
    (experiment / "run_c_being_created").mkdir()
    assert resolve_checkpoint(experiment) == experiment / "run_b" / "model_4.pt"


# --- non-finite values --------------------------------------------------------------------------------------------


def test_nan_stops_the_run_keeps_the_last_good_checkpoint_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instrument(monkeypatch, fault="nan@0:2")
    argv = ["cartpole-balance", *TINY, "--agent.max-iterations", "6", "--agent.save-interval", "1"]
    code, err = _main([*argv, "--log-root", str(tmp_path)])
    assert code == 3  # a restart would diverge the same way
    assert "Traceback" not in err
    (run_dir,) = tmp_path.glob("*/*")
    message = _flat(err)
    assert "ERROR failed at iteration 2 of 6: training diverged at iteration 3: actor " in message
    assert "is not finite" in message
    assert f"the last good checkpoint is {run_dir / 'model_2.pt'}" in message
    assert [i for i, _ in list_checkpoints(run_dir)] == [1, 2]
    assert f"run directory: {run_dir}" in message and "finish it" not in message
    assert json.loads((run_dir / "job.json").read_text())["ended"]["how"] == "failed"  # never continued


def test_a_failure_between_checkpoints_is_said_at_the_last_iteration_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The headline counted to the newest checkpoint: "failed at iteration 2 ... (2 iterations" after 3."""
    instrument(monkeypatch, fault="nan@0:3")
    argv = ["cartpole-balance", *TINY, "--agent.max-iterations", "6", "--agent.save-interval", "2"]
    code, err = _main([*argv, "--log-root", str(tmp_path)])
    (run_dir,) = tmp_path.glob("*/*")
    message = _flat(err)
    assert code == 3 and "ERROR failed at iteration 3 of 6: training diverged at iteration 4: " in message, message
    assert "(3 iterations, " in message and f"the last good checkpoint is {run_dir / 'model_2.pt'}" in message


def test_a_full_disk_exits_3_keeps_the_last_checkpoint_and_offers_to_finish_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No automatic restart (it would fail the same way until space is freed), but the run is not over: its ending
    offers --finish, and job.json does not record it as failed (the ending left --finish out)."""
    import errno

    from mjfleet.rl.checkpoint import saving

    real_save = saving.save_atomic

    def save_until_full(payload: object, path: Path) -> None:
        if Path(path).name == "model_2.pt":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(payload, path)  # type: ignore[arg-type]

    monkeypatch.setattr(saving, "save_atomic", save_until_full)
    argv = ["cartpole-balance", *TINY, "--agent.max-iterations", "4", "--agent.save-interval", "1"]
    code, err = _main([*argv, "--log-root", str(tmp_path)])
    assert code == 3
    (run_dir,) = tmp_path.glob("*/*")
    said = _flat(err)
    assert "cannot write checkpoint" in said and "No space left on device" in said
    assert f"{run_dir / 'model_1.pt'} is intact" in said
    assert f"finish it: train cartpole-balance --finish {run_dir}" in said
    assert json.loads((run_dir / "job.json").read_text()).get("ended") is None  # not recorded as failed


def test_a_nan_loss_is_caught_before_anything_is_saved(tmp_path: Path) -> None:
    cfg = small_train_config(num_envs=32, steps=8, iterations=3)
    run_dir = make_run_dir(tmp_path, "nan")
    runner = Runner(_runner(cfg).env, cfg.agent, CPU, run_dir)
    update = runner.learner.update
    calls = 0

    def update_with_nan() -> dict[str, float]:
        nonlocal calls
        calls += 1
        losses = update()
        return {**losses, "value": float("nan")} if calls == 2 else losses

    runner.learner.update = update_with_nan  # type: ignore[method-assign]
    with pytest.raises(NonFiniteTrainingError, match=r"iteration 2: the value loss is nan") as info:
        runner.learn(3)
    assert "model_1.pt" in str(info.value)
    assert [i for i, _ in list_checkpoints(run_dir)] == [1]


# --- clean interrupt in process -----------------------------------------------------------------------------------


def test_sigint_in_process_finishes_the_iteration_checkpoints_and_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instrument(monkeypatch, fault="sigint@0:2")
    argv = ["cartpole-balance", *TINY, "--agent.max-iterations", "50", "--agent.save-interval", "100"]
    before = signal.getsignal(signal.SIGINT)  # Python's default_int_handler, or SIG_IGN in a `cmd &` background job
    code, err = _main([*argv, "--log-root", str(tmp_path)])
    (run_dir,) = tmp_path.glob("*/*")
    assert code == 130
    assert [i for i, _ in list_checkpoints(run_dir)] == [3]  # iteration 3 was under way when the signal came
    said = _flat(err)
    # 32 training environments and 2 evaluating, stepped 4 times (8 evaluation environments' worth), x 8 steps x 3
    assert "stopped by SIGINT at iteration 3 of 50 (3 iterations, 960 env-steps in" in said
    assert f"run directory: {run_dir}" in said and f"checkpoint: {run_dir / 'model_3.pt'}" in said
    assert f"watch it: play cartpole-balance --checkpoint {run_dir / 'model_3.pt'}" in said
    finish = f"train cartpole-balance --finish {run_dir} (continues in place to iteration 50)"
    assert f"finish it: {finish}" in said
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored

    # The printed command finishes the run in its own directory, to the iteration it was started for.
    monkeypatch.delenv(FAULT_ENV)
    code, err = _main(finish.split(" (")[0].split()[1:])
    assert code == 0, err
    assert list(tmp_path.glob("*/*")) == [run_dir] and list_checkpoints(run_dir)[-1][0] == 50
    assert "finished at iteration 50 of 50 (47 iterations" in _flat(err)

    # --resume is another thing: a new run from those weights, with --agent.max-iterations more.
    resumed = run(small_train_config(num_envs=32, steps=8, iterations=2, log_root=tmp_path, resume=run_dir))
    assert [r.iteration for r in resumed[0].records] == [51, 52] and resumed[0].run_dir != str(run_dir)


def test_second_signal_stops_immediately(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stop_module, "REPEAT_WINDOW_S", 0.0)  # the iterations here are shorter than the window
    instrument(monkeypatch, fault="sigterm@0:1,sigterm@0:2")
    argv = ["cartpole-balance", *TINY, "--agent.max-iterations", "50", "--agent.save-interval", "100"]
    code, err = _main([*argv, "--log-root", str(tmp_path)])
    assert code == 143
    assert "stopped immediately by SIGTERM" in _flat(err) and "Traceback" not in err


def test_the_same_signal_passed_on_twice_is_one_request() -> None:
    stop = StopRequest()
    with stop.install():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. `uv run` passing on what reached its process group
        assert stop.signals == [signal.SIGTERM]
        time.sleep(stop_module.REPEAT_WINDOW_S)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)


def test_stop_request_file_and_deferral(tmp_path: Path) -> None:
    stop = StopRequest()
    with stop.install(), stop.attach(tmp_path):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signum == signal.SIGTERM and stop.poll() == signal.SIGTERM
        assert (tmp_path / STOP_FILE).read_text() == str(int(signal.SIGTERM))
        with stop.deferring():
            os.kill(os.getpid(), signal.SIGINT)  # recorded, not raised: cleanup must finish
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)


def test_a_stop_before_a_launch_whose_rank_0_is_elsewhere_stops_it_before_any_worker_starts(tmp_path: Path) -> None:
    # Rank 0 on another host cannot read the stop file: a signal during the host check was logged as "stopping after
    # the current iteration" and the whole run trained on.
    stop = StopRequest()
    with stop.install():
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt), stop.attach(tmp_path, graceful=False):
            pytest.fail("the launch went on")
        with stop.attach(tmp_path):  # a local rank 0 reads the file and stops after its iteration
            assert (tmp_path / STOP_FILE).read_text() == str(int(signal.SIGINT))


# --- restarts -----------------------------------------------------------------------------------------------------


PLAN = LaunchPlan(device_kind="cpu", workers_per_host=2)


def _failure(retryable: bool = True, rank: int = 1) -> WorkerFailure:
    return WorkerFailure(f"worker rank {rank} failed", rank=rank, error="worker process died", retryable=retryable)


def test_supervisor_restarts_from_the_newest_loadable_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = small_train_config(iterations=10, max_restarts=3)
    starts: list[StartPoint] = []
    plans: list[object] = []
    outcomes: list[object] = []

    def fake_launch(cfg: TrainConfig, run_dir: Path, plan: object, start: StartPoint, stop: object) -> list[str]:
        starts.append(start)
        plans.append(plan)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return ["done"]

    monkeypatch.setattr(supervisor, "launch_training", fake_launch)
    first = StartPoint(checkpoint=None, final_iteration=10)

    outcomes[:] = [_failure(), _failure(rank=0), "ok"]
    save_atomic({**MINIMAL, "iter": 4}, tmp_path / "model_4.pt")
    original = start_module.newest_loadable_checkpoint

    def newest_after_first(run_dir: Path) -> object:
        # Before the second restart a newer checkpoint appeared, and a newer one still that is damaged.
        if len(starts) == 2:
            save_atomic({**MINIMAL, "iter": 6}, run_dir / "model_6.pt")
            (run_dir / "model_8.pt").write_bytes(b"truncated")
        return original(run_dir)

    monkeypatch.setattr(start_module, "newest_loadable_checkpoint", newest_after_first)
    assert supervisor.supervise(cfg, tmp_path, PLAN, first) == ["done"]  # type: ignore[comparison-overlap]
    assert [(s.start_iteration, s.final_iteration) for s in starts] == [(0, 10), (4, 10), (6, 10)]
    assert starts[2].checkpoint == tmp_path / "model_6.pt"
    assert all(plan is PLAN for plan in plans)  # restarts relaunch the plan that was prepared
    lines = (tmp_path / supervisor.RESTART_LOG).read_text().splitlines()
    assert len(lines) == 2
    assert "restart=1/3 rank=1 resume_iteration=4" in lines[0] and "cause=worker process died" in lines[0]
    assert "restart=2/3 rank=0 resume_iteration=6" in lines[1]


def test_supervisor_without_checkpoint_restarts_from_scratch_and_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts: list[StartPoint] = []

    def always_fails(cfg: TrainConfig, run_dir: Path, plan: object, start: StartPoint, stop: object) -> None:
        starts.append(start)
        raise _failure()

    monkeypatch.setattr(supervisor, "launch_training", always_fails)
    first = StartPoint(checkpoint=None, final_iteration=5)
    with pytest.raises(WorkerFailure):
        supervisor.supervise(small_train_config(max_restarts=2), tmp_path, PLAN, first)
    assert starts == [first, first, first]  # no checkpoint: every attempt starts from scratch
    assert len((tmp_path / supervisor.RESTART_LOG).read_text().splitlines()) == 2


@pytest.mark.parametrize("stopped", [False, True])
def test_supervisor_never_retries_fatal_errors_or_requested_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopped: bool
) -> None:
    calls = 0

    def fails(cfg: TrainConfig, run_dir: Path, plan: object, start: StartPoint, stop: object) -> None:
        nonlocal calls
        calls += 1
        raise _failure(retryable=stopped)

    monkeypatch.setattr(supervisor, "launch_training", fails)
    stop = StopRequest()
    if stopped:
        stop.signals.append(signal.SIGINT)
    with pytest.raises(WorkerFailure):
        supervisor.supervise(small_train_config(max_restarts=5), tmp_path, PLAN, StartPoint(None, 5), stop=stop)
    assert calls == 1 and not (tmp_path / supervisor.RESTART_LOG).exists()


# --- failure diagnosis ----------------------------------------------------------------------------------------------


def _reports(report_dir: Path, *reports: dict[str, object]) -> None:
    for report in reports:
        write_report(report_dir, report)


def test_a_hang_names_the_silent_rank_and_its_last_iteration(tmp_path: Path) -> None:
    plan = LaunchPlan(device_kind="cpu", workers_per_host=3, worker_timeout_s=20)
    now = time.time()
    _reports(
        tmp_path,
        *({"kind": "started", "rank": r, "pid": 100 + r, "time": now - 60} for r in range(3)),
        {"kind": "heartbeat", "rank": 0, "iteration": 2, "time": now - 21},
        {"kind": "heartbeat", "rank": 1, "iteration": 2, "time": now - 24},
        {"kind": "heartbeat", "rank": 2, "iteration": 2, "time": now - 21},
        *(
            {
                "kind": "failure",
                "rank": r,
                "time": now,
                "error": "RuntimeError: Timed out waiting 20000ms for recv operation to complete",
                "traceback": [],
                "peer_failure": True,
                "retryable": True,
            }
            for r in (0, 2)
        ),
    )
    failure = build_failure(RuntimeError("exit code 1"), plan, tmp_path, None)
    assert failure.rank == 1 and failure.unresponsive_ranks == (1,) and failure.retryable
    first_line = str(failure).splitlines()[0]
    assert first_line.startswith("worker rank 1 (localhost, local rank 1) failed: stopped responding")
    assert "last completed iteration 2, 24 s before" in first_line and "rank 0, 2 timed out after 20 s" in first_line


@pytest.mark.parametrize(
    ("exc", "code", "finishable"),
    [
        (UsageError("checkpoint model_80.pt: its networks take 5 observations, the task gives 48"), 2, False),
        (NonFiniteTrainingError("the value loss is nan"), 3, False),
        (CheckpointWriteError("cannot write checkpoint model_9.pt: No space left on device"), 3, True),
        (ImportError("No module named 'skrl'"), 3, True),
        (RuntimeError("CUDA error: an illegal memory access"), 1, True),
    ],
)
def test_a_launched_workers_failure_exits_as_it_would_in_one_process(
    exc: BaseException, code: int, finishable: bool, tmp_path: Path
) -> None:
    """Bad input a launched worker found exited 3 ("would fail the same way", a diverged run's code) where one
    process exits 2 (docs/guides/runs.md's table: a scheduler retries neither, but reads them apart). A full disk
    is not retried either, but the run's ending offers --finish, as in one process."""
    from mjfleet.cli.train import _exit_code
    from mjfleet.launch.worker_entry import failure_report

    plan = LaunchPlan(device_kind="cpu", workers_per_host=2)
    _reports(
        tmp_path, {"kind": "started", "rank": 1, "pid": 101, "time": time.time()}, failure_report(exc) | {"rank": 1}
    )
    failure = build_failure(RuntimeError("exit code 1"), plan, tmp_path, None)
    assert failure.rank == 1 and _exit_code(failure) == code and failure.finishable == finishable


@pytest.mark.parametrize(("quiet_s", "hinted"), [(118.0, True), (30.0, False)])
def test_an_abort_a_collective_timeout_after_the_last_heartbeat_hints_at_nccls_watchdog(
    quiet_s: float, hinted: bool, tmp_path: Path
) -> None:
    plan = LaunchPlan(device_kind="cuda", workers_per_host=2, worker_timeout_s=120)
    now = time.time()
    _reports(
        tmp_path,
        *({"kind": "started", "rank": r, "pid": 100 + r, "time": now - 300} for r in range(2)),
        *({"kind": "heartbeat", "rank": r, "iteration": 7, "time": now - quiet_s} for r in range(2)),
    )
    fault = tmp_path / "fault-rank0.txt"
    fault.write_text("Fatal Python error: Aborted\n\nThread 0x00007f (most recent call first):\n  <no Python frame>\n")
    os.utime(fault, (now, now))
    failure = build_failure(RuntimeError("Signal 6 (SIGABRT) received by PID 100"), plan, tmp_path, None)
    assert failure.rank == 0 and "worker process crashed: Fatal Python error: Aborted" in str(failure)
    hint = f"it aborted {quiet_s:.0f} s after its last heartbeat, about the collective timeout (120 s)"
    assert (hint in str(failure)) is hinted
    assert ("the rank at fault may be another one" in str(failure)) is hinted


def test_a_silent_death_names_the_vanished_rank(tmp_path: Path) -> None:
    plan = LaunchPlan(device_kind="cpu", workers_per_host=2)
    _reports(
        tmp_path,
        *({"kind": "started", "rank": r, "pid": 100 + r, "time": 1.0} for r in range(2)),
        {
            "kind": "failure",
            "rank": 0,
            "time": 2.0,
            "error": "RuntimeError: Connection reset by peer",
            "traceback": ["..."],
            "peer_failure": True,
        },
    )
    failure = build_failure(RuntimeError("worker exited with 1"), plan, tmp_path, None)
    assert failure.rank == 1 and failure.retryable
    assert "died without a Python error" in str(failure)


def test_user_facing_errors_are_not_retryable_and_have_no_traceback(tmp_path: Path) -> None:
    plan = LaunchPlan(device_kind="cpu", workers_per_host=2)
    _reports(
        tmp_path,
        {
            "kind": "failure",
            "rank": 1,
            "time": 1.0,
            "error": "NonFiniteTrainingError: training diverged at iteration 3: the value loss is nan",
            "traceback": ["Traceback (most recent call last):", "  File ..."],
            "peer_failure": False,
            "retryable": False,
            "user_facing": True,
        },
    )
    failure = build_failure(RuntimeError("x"), plan, tmp_path, tmp_path / "logs")
    assert not failure.retryable
    assert "Traceback" not in str(failure) and "iteration 3" in str(failure)


# --- log root and dry run -------------------------------------------------------------------------------------------


def test_a_full_log_root_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=5 * 2**20))
    code, err = _main(["cartpole-balance", *TINY, "--log-root", str(tmp_path / "logs")])
    assert code == 2 and err.count("\n") == 1 and "only 5 MiB free" in err
    assert not (tmp_path / "logs").exists()


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_atomic({**MINIMAL, "iter": 7}, tmp_path / "old" / "model_7.pt")
    argv = ["cartpole-balance", *TINY, "--cpu-workers", "2", "--max-restarts", "2", "--agent.max-iterations", "5"]
    train.main([*argv, "--resume", str(tmp_path / "old"), "--log-root", str(tmp_path / "logs"), "--dry-run"])
    out = capsys.readouterr().out
    assert "launch plan: 2 workers" in out and "iterations 8..12, from" in out and "automatic restarts: 2" in out
    assert not (tmp_path / "logs").exists()
    assert json.dumps(out)  # plain text, one report


def test_a_run_is_offered_to_finish_unless_the_same_start_would_fail_again() -> None:
    """A rank of another launcher's job that lost a peer (138) lost its "finish it" line when bad input (2) stopped
    being offered it."""
    from mjfleet.cli.train import _finishable

    assert _finishable("stopped", 143) and _finishable("interrupted", 130)
    assert _finishable("failed", 1) and _finishable("failed", 138)
    assert not _finishable("failed", 2) and not _finishable("failed", 3)


def test_local_agents_that_do_not_join_in_time_say_so_and_name_the_setting() -> None:
    """Agents on this machine that started too slowly read as a generic agent failure (exit 1, retried the same way
    by --max-restarts); the message for remote hosts (firewalls) did not fit them either."""
    from mjfleet.launch.launcher import AgentsDidNotJoin

    failure = AgentsDidNotJoin(
        RuntimeError("AgentFailedError"), LaunchPlan(device_kind="cpu", workers_per_host=2), None
    )
    line = failure.message("--agent-timeout-s 1")
    assert line.startswith("the torchrunx agents on this machine did not all start and join within --agent-timeout-s 1")
    assert "allow them longer" in line and "firewalls" not in line
