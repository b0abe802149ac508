"""Real (small) PPO training in-process: learning, seeding, checkpoints and resume."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mjfleet.cli import play
from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.runtime.context import DistributedContext
from mjfleet.train.worker import seed_everything, train_worker
from mjfleet.train.worker_hook import WORKER_HOOK_ENV

from .helpers import make_run_dir, rsl_ppo, run_main, small_train_config
from .instruments import instrument

CPU = DistributedContext(device="cpu")


def test_same_seed_same_first_iteration_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    instrument(monkeypatch, probes=True)
    a = train_worker(small_train_config(iterations=1, seed=3), None, CPU)
    b = train_worker(small_train_config(iterations=1, seed=3), None, CPU)
    c = train_worker(small_train_config(iterations=1, seed=4), None, CPU)
    assert a.records[0].losses == b.records[0].losses
    assert a.extras["replica_digest"] == b.extras["replica_digest"]
    assert a.records[0].losses != c.records[0].losses


def test_runs_without_a_worker_hook_return_no_extras_and_keep_recent_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_HOOK_ENV, raising=False)
    monkeypatch.setattr("mjfleet.train.worker.KEPT_RECORDS", 2)
    result = train_worker(small_train_config(iterations=3), None, CPU)
    assert result.extras == {}
    assert [r.iteration for r in result.records] == [2, 3]  # bounded: the most recent iterations only


@pytest.mark.slow
def test_short_training_improves_return() -> None:
    cfg = small_train_config(num_envs=256, iterations=25, steps=32, init_at_random_ep_len=True, full_update=True)
    result = train_worker(cfg, None, CPU)
    returns = [r.episode["Episode/return"] for r in result.records if "Episode/return" in r.episode]
    early, late = sum(returns[:3]) / 3, sum(returns[-3:]) / 3
    assert late > early + 1.0, returns
    assert result.final_iteration == 25


def test_run_directory_layout_and_atomic_checkpoints(tmp_path: Path) -> None:
    cfg = small_train_config(iterations=2, log_root=tmp_path)
    run_dir = make_run_dir(cfg.log_root, cfg.agent.experiment_name)
    train_worker(cfg, run_dir, CPU)
    assert (run_dir / "params" / "env.yaml").is_file() and (run_dir / "params" / "agent.yaml").is_file()
    assert [i for i, _ in list_checkpoints(run_dir)] == [1, 2]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert not list(run_dir.glob(".*.tmp"))  # no temp file left behind
    data = load_checkpoint(run_dir / "model_2.pt")
    assert data["iter"] == 2 and data["format"] == "mjfleet-checkpoint"


def test_resume_continues_iterations_and_restores_optimizer(tmp_path: Path) -> None:
    cfg = small_train_config(iterations=3, log_root=tmp_path)
    first_dir = make_run_dir(tmp_path, "resume", "first")
    first = train_worker(cfg, first_dir, CPU)
    saved = load_checkpoint(first_dir / "model_3.pt")

    resumed_cfg = small_train_config(iterations=2, log_root=tmp_path, resume=first_dir)
    second_dir = make_run_dir(tmp_path, "resume", "second")
    second = train_worker(resumed_cfg, second_dir, CPU)
    assert [r.iteration for r in second.records] == [4, 5]
    assert [i for i, _ in list_checkpoints(second_dir)] == [4, 5]
    assert first.final_iteration == 3 and second.final_iteration == 5

    # The optimizer state and learning rate of the resumed run started from the checkpoint's.
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.runner import Runner
    from mjfleet.tasks.registry import get_task

    env = MjEnv(get_task(cfg.task).load_task_class()(cfg.env), "cpu", 0)
    runner = Runner(env, cfg.agent, CPU, None)
    runner.load(str(first_dir / "model_3.pt"))
    assert runner.current_learning_iteration == 3
    assert math.isclose(runner.learner.learning_rate, saved["learning_rate"])
    restored = rsl_ppo(runner).optimizer.state_dict()["state"]
    for key, state in saved["optimizer_state_dict"]["state"].items():
        assert torch.equal(restored[key]["exp_avg"], state["exp_avg"])


@pytest.mark.parametrize("learner", ["rsl-rl-ppo", "skrl-sac"])
def test_a_resumed_run_trains_at_its_own_learning_rate_and_a_restart_at_its_checkpoints(
    learner: str, tmp_path: Path
) -> None:
    """``--resume`` starts a new run with its settings: ``--resume <last good> --agent.algorithm.learning-rate`` lower
    (what a divergence advises) trained on at the checkpoint's rate. A restart continues the rate it saved."""
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.runner import Runner
    from mjfleet.runs.start import continue_point
    from mjfleet.tasks.registry import get_task
    from mjfleet.train.plan import plan_start

    cfg = small_train_config(iterations=2, log_root=tmp_path)
    cfg.agent.learner = learner
    first_dir = make_run_dir(tmp_path, "rates", "first")
    train_worker(cfg, first_dir, CPU)
    checkpoint = first_dir / "model_2.pt"

    def loaded(rate: float, another: bool) -> Runner:
        agent = dataclasses.replace(cfg.agent, learner=learner)
        agent.algorithm = dataclasses.replace(agent.algorithm, learning_rate=rate, schedule="fixed")
        agent.sac = dataclasses.replace(agent.sac, learning_rate=rate)
        env = MjEnv(get_task(cfg.task).load_task_class()(cfg.env), "cpu", 0)
        runner = Runner(env, agent, CPU, None)
        runner.load(str(checkpoint), another_run=another)
        return runner

    saved = loaded(1.0, another=False).learner.learning_rate
    assert saved != 1.0
    runner = loaded(saved / 10, another=True)
    assert all(g["lr"] == saved / 10 for o in runner.learner.optimizers() for g in o.param_groups)
    if learner == "rsl-rl-ppo":
        assert rsl_ppo(runner).learning_rate == saved / 10  # where its schedule adapts from
    # --resume plans its start with the run's own rate; a restart from the run's own checkpoint does not.
    start = plan_start(dataclasses.replace(cfg, resume=checkpoint))
    assert start.another_run
    assert not continue_point(first_dir, start).another_run


def test_play_follows_its_own_seed_not_the_training_runs_random_streams(tmp_path: Path) -> None:
    cfg = small_train_config(num_envs=16, iterations=1, steps=8, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "seeds")
    train_worker(cfg, run_dir, DistributedContext(device="cpu"))

    def play_with(seed: int) -> dict[str, float]:
        argv = ["cartpole-balance", "--checkpoint", str(run_dir / "model_1.pt"), "--gpu-ids", "None"]
        code, out, err = run_main(play.main, [*argv, "--num-episodes", "8", "--env.num-envs", "8", "--seed", str(seed)])
        assert code == 0, err
        return json.loads(out)

    one, again, two = play_with(1), play_with(1), play_with(2)
    assert one == again
    assert (one["mean_length"], one["mean_return"]) != (two["mean_length"], two["mean_return"]), "--seed had no effect"


def test_a_checkpoint_copied_out_of_its_run_plays_with_the_networks_it_has(tmp_path: Path) -> None:
    """Without its run's settings, play built the task's default networks: a run of other sizes (the CPU defaults'
    smaller ones, or flags) was refused as not fitting the task's observations."""
    import shutil

    cfg = small_train_config(num_envs=16, iterations=1, steps=8, log_root=tmp_path)
    policy = dataclasses.replace(
        cfg.agent.policy, actor_hidden_dims=(24, 24), critic_hidden_dims=(16,), obs_normalization=False
    )
    cfg.agent = dataclasses.replace(cfg.agent, policy=policy)
    run_dir = make_run_dir(tmp_path, "sizes")
    train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    (tmp_path / "lone").mkdir()
    shutil.copy(run_dir / "model_1.pt", tmp_path / "lone" / "model_1.pt")
    argv = ["cartpole-balance", "--checkpoint", str(tmp_path / "lone" / "model_1.pt"), "--gpu-ids", "None"]
    code, out, err = run_main(play.main, [*argv, "--num-episodes", "2"])
    assert code == 0, err
    assert json.loads(out)["episodes"] == 2


def test_a_rank_whose_seed_passes_numpys_limit_still_seeds() -> None:
    """Worker k seeds with ``--seed`` + k; past 2**32 - 1 (a large seed on a job of many ranks) NumPy wraps around."""
    seed_everything(2**32 + 5)
    wrapped = np.random.random()
    seed_everything(5)
    assert np.random.random() == wrapped


def test_training_that_fails_keeps_the_metrics_it_logged(tmp_path: Path) -> None:
    """The TensorBoard writer buffers for seconds: a run that ended with an error (a divergence, a full disk) lost
    the iterations logged last, those that show what went wrong."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.runner import Runner
    from mjfleet.tasks.registry import get_task

    cfg = small_train_config(iterations=5)
    run_dir = make_run_dir(tmp_path, "fails")

    def fail_at_3(runner: Runner, record: object) -> None:
        if runner.current_learning_iteration == 3:
            raise OSError("No space left on device")

    env = MjEnv(get_task(cfg.task).load_task_class()(cfg.env), "cpu", 0)
    runner = Runner(env, cfg.agent, CPU, run_dir, hooks=[fail_at_3])
    with pytest.raises(OSError, match="No space left"):
        runner.learn(5)
    events = EventAccumulator(str(run_dir))
    events.Reload()
    logged = {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert logged and all(steps == [1, 2, 3] for steps in logged.values()), logged


def test_a_restart_supersedes_the_iterations_it_trains_again_in_tensorboard(tmp_path: Path) -> None:
    """A restart from checkpoint 2 of a run that had logged 3 iterations trains iteration 3 again: TensorBoard showed
    both."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.runner import Runner
    from mjfleet.tasks.registry import get_task

    cfg = small_train_config(iterations=3)
    run_dir = make_run_dir(tmp_path, "restarted")

    def runner() -> Runner:
        return Runner(MjEnv(get_task(cfg.task).load_task_class()(cfg.env), "cpu", 0), cfg.agent, CPU, run_dir)

    runner().learn(3)
    restarted = runner()
    restarted.load(run_dir / "model_2.pt")
    restarted.learn(2)
    events = EventAccumulator(str(run_dir))
    events.Reload()
    assert [e.step for e in events.Scalars("Perf/total_env_steps")] == [1, 2, 3, 4]


def test_a_full_disk_under_the_event_writer_is_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorBoard's writer thread printed its error as a 14-line traceback before the run's one line."""
    import errno
    import threading

    from mjfleet.rl.reporting.metrics import MetricsWriter

    printed: list[BaseException | None] = []  # what Python's hook for a thread's exception would print
    monkeypatch.setattr(threading, "excepthook", lambda args: printed.append(args.exc_value))
    writer = MetricsWriter(tmp_path / "run")
    worker = writer._tb.event_writer._async_writer._worker  # TensorBoard's thread

    def full(data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    worker._record_writer.write = full
    writer.add_scalars({"Loss/value": 1.0}, 1)
    worker.join(timeout=10)  # the thread dies of it
    with caplog.at_level("WARNING"):
        writer.add_scalars({"Loss/value": 0.5}, 2)
        writer.close()
    assert "could not write TensorBoard events" in caplog.text and "No space left" in caplog.text
    assert printed == []
    other = threading.Thread(target=lambda: 1 / 0)  # any other thread's error is printed as before
    other.start()
    other.join()
    assert len(printed) == 1 and isinstance(printed[0], ZeroDivisionError)


def test_a_run_directory_deleted_midway_stops_the_events_not_the_training(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    from mjfleet.rl.reporting.metrics import MetricsWriter

    writer = MetricsWriter(tmp_path / "run")
    writer.add_scalars({"Loss/value": 1.0}, 1)
    writer._tb.flush()  # written before the folder goes, so the writer's thread has nothing left to write
    shutil.rmtree(tmp_path / "run")
    with caplog.at_level("WARNING"):
        writer.add_scalars({"Loss/value": 0.5}, 2)
        writer.close()
    assert "could not write TensorBoard events" in caplog.text
