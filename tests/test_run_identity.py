"""A run continues only itself: the configuration is part of its identity (``job.json``), ``--run-id`` refuses other
settings, ``--finish`` continues a run in place, and a run whose training diverged is not continued. Real training
runs in this process (cartpole, a few iterations, CPU); the launcher-started cases are in test_external_launch.py."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
from pathlib import Path

import pytest

from mjfleet.cli import train
from mjfleet.config_io import plain
from mjfleet.errors import UsageError
from mjfleet.runs.fingerprint import differences, fingerprint, same_training, training_settings
from mjfleet.runs.identity import RunIdentity, run_identity
from mjfleet.runs.lock import LOCK_FILE
from mjfleet.runs.record import JOB_FILE, RunRecord, record_end
from mjfleet.runtime.stop import StopRequest
from mjfleet.train import run
from mjfleet.train.config import TrainConfig
from mjfleet.train.external import ExternalJob
from mjfleet.train.plan import RunFailedBefore, open_run_dir, plan_run

from .helpers import run_main, small_train_config

TORCHRUN = ExternalJob("torchrun", 0, 0, 1, 1, 0, "127.0.0.1", 29500, 0, True, key="torchrun-x")


def _settings(cfg: TrainConfig) -> dict[str, object]:
    return training_settings(plain(dataclasses.asdict(cfg)))


def _stopped_after_first_iteration() -> StopRequest:
    stop = StopRequest()
    stop.signals.append(15)  # as by SIGTERM: stop after the current iteration, with a checkpoint
    return stop


def _runs(log_root: Path) -> list[Path]:
    return sorted((log_root / "cartpole_balance").iterdir())


def test_the_identity_comes_from_the_job_first_match_wins() -> None:
    env = {"SLURM_JOB_ID": "99", "SLURM_ARRAY_TASK_ID": "3", "SLURM_STEP_ID": "1", "TORCHELASTIC_RUN_ID": "r"}
    assert run_identity("mine", env, TORCHRUN.launcher) == RunIdentity("mine", "--run-id")
    assert run_identity(None, env, TORCHRUN.launcher) == RunIdentity("slurm-99_3.1", "SLURM_JOB_ID")
    assert run_identity(None, {"TORCHELASTIC_RUN_ID": "r"}, TORCHRUN.launcher) == RunIdentity(
        "torchrun-r", "TORCHELASTIC_RUN_ID"
    )
    # torchrun's static rendezvous: nothing but its invocation's token (from its store) names it; no process id.
    assert run_identity(None, {"TORCHELASTIC_RUN_ID": "none"}, TORCHRUN.launcher) is None
    assert run_identity(None, {"TORCHELASTIC_RUN_ID": "none"}, TORCHRUN.launcher, "ab12") == RunIdentity(
        "torchrun-ab12", "torchrun"
    )
    # mjfleet's own launcher takes only --run-id: two commands of one salloc stay two runs.
    assert run_identity(None, env, None) is None


def test_the_fingerprint_holds_what_is_trained_not_how_or_where() -> None:
    base = small_train_config(seed=1)
    same = fingerprint(_settings(base))
    agent = dataclasses.replace(
        base.agent,
        max_iterations=999,
        logger="wandb",
        experiment_name="other",
        save_interval=7,
        eval_episodes=9,
        eval_steps_per_step=2,
    )
    sim = dataclasses.replace(base.env.sim, nconmax=99, njmax=999)  # capacity: raising it continues the run
    env = dataclasses.replace(base.env, sim=sim)
    how = dataclasses.replace(
        base,
        env=env,
        agent=agent,
        log_root=Path("/elsewhere"),
        gpu_ids=(0,),
        cpu_workers=4,
        video_interval=5,
        run_id="x",
    )
    assert fingerprint(_settings(how)) == same
    # A run recorded when capacity still counted matches the same settings now.
    recorded = {**_settings(base), "env.sim.njmax": 64}
    assert same_training(recorded, _settings(how)) and differences(recorded, _settings(how)) == ""
    rewards = dataclasses.replace(base.env.rewards, effort=-0.5)  # type: ignore[attr-defined]
    for changed in (
        dataclasses.replace(base, seed=2),
        dataclasses.replace(base, env=dataclasses.replace(base.env, num_envs=128)),
        dataclasses.replace(base, env=dataclasses.replace(base.env, rewards=rewards)),
        dataclasses.replace(base, resume=Path("logs/other/model_5.pt")),
        dataclasses.replace(base, agent=dataclasses.replace(base.agent, num_steps_per_env=8)),
    ):
        assert fingerprint(_settings(changed)) != same
    said = differences(_settings(base), _settings(dataclasses.replace(base, seed=2)))
    assert said == "--seed 2 (the run has 1)"
    # An empty setting (the tracking task's shipped motion) is said as one, not as a blank: "(the run has )".
    assert differences({"env.motion": ""}, {"env.motion": "/m.csv"}) == "--env.motion /m.csv (the run has '')"


def test_run_id_continues_its_run_and_refuses_other_settings(tmp_path: Path) -> None:
    first = run(small_train_config(iterations=3, log_root=tmp_path, run_id="exp-1"), _stopped_after_first_iteration())
    assert first[0].final_iteration == 1
    [run_dir] = _runs(tmp_path)
    record = json.loads((run_dir / JOB_FILE).read_text())
    assert record["run_id"] == "exp-1" and record["final_iteration"] == 3 and record["ended"]["how"] == "stopped"
    params = (run_dir / "params" / "agent.yaml").read_text()

    # The same settings continue to the iteration the run was started for (not 5 more), in the same directory;
    # its params/ keep describing its checkpoints.
    second = run(small_train_config(iterations=5, log_root=tmp_path, run_id="exp-1"))[0]
    assert second.run_dir == str(run_dir) and [r.iteration for r in second.records] == [2, 3]
    assert (run_dir / "params" / "agent.yaml").read_text() == params

    # Other settings under the same --run-id: one line naming them, nothing created.
    code, _, err = run_main(
        train.main,
        ["cartpole-balance", "--gpu-ids", "None", "--run-id", "exp-1", "--seed", "7", "--log-root", str(tmp_path)],
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--run-id exp-1 names run {run_dir}, which trains other settings: " in err
    assert "other settings: --init-at-random-ep-len True (the run has False), --seed 7 (the run has 0)," in err
    assert " more; give the same settings to continue it" in err  # the task's own defaults differ from the test's
    assert _runs(tmp_path) == [run_dir]

    # The run is over: the same command again trains nothing and says so.
    assert run(small_train_config(iterations=3, log_root=tmp_path, run_id="exp-1")) == []


def test_a_job_identity_with_other_settings_is_another_run(tmp_path: Path) -> None:
    """A sweep inside one SLURM job: one run per member; the same member again continues its own."""
    env = {"SLURM_JOB_ID": "4242"}
    one = plan_run(small_train_config(seed=1, log_root=tmp_path), env, TORCHRUN)
    assert not one.continues and one.identity == RunIdentity("slurm-4242", "SLURM_JOB_ID")
    one.run_dir.mkdir(parents=True)
    one.record.write(one.run_dir)
    two = plan_run(small_train_config(seed=2, log_root=tmp_path), env, TORCHRUN)
    assert not two.continues and two.run_dir != one.run_dir
    again = plan_run(small_train_config(seed=1, log_root=tmp_path), env, TORCHRUN)
    assert again.continues and again.run_dir == one.run_dir


def test_resume_beside_a_run_to_continue_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run(small_train_config(iterations=2, log_root=tmp_path / "a"))
    [source] = _runs(tmp_path / "a")
    cfg = small_train_config(iterations=2, log_root=tmp_path / "b", run_id="r", resume=source)
    run(cfg, _stopped_after_first_iteration())
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        continued = plan_run(cfg, {}, None)
    assert continued.continues
    assert f"--resume {source} is where run {continued.run_dir} began" in caplog.text


def test_a_diverged_run_is_not_continued(tmp_path: Path) -> None:
    cfg = small_train_config(iterations=3, log_root=tmp_path, run_id="d", full_update=True)
    run(cfg, _stopped_after_first_iteration())
    [run_dir] = _runs(tmp_path)
    record_end(run_dir, "failed", 1, "training diverged at iteration 2: the value loss is nan")
    with pytest.raises(RunFailedBefore, match="continuing it would fail the same way"):
        plan_run(cfg, {}, None)
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.num-steps-per-env", "16"]
    argv += ["--seed", "0", "--no-init-at-random-ep-len", "--agent.eval-envs", "0", "--run-id", "d"]
    argv += ["--log-root", str(tmp_path)]
    code, _, err = run_main(train.main, argv)
    assert code == 3, err
    assert "ended at iteration 1 (training diverged at iteration 2" in " ".join(err.split())


def test_finish_continues_an_interrupted_run_in_place(tmp_path: Path) -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.max-iterations", "3"]
    argv += ["--agent.save-interval", "1", "--seed", "5", "--log-root", str(tmp_path)]
    run(train.parse_args(argv), _stopped_after_first_iteration())
    [run_dir] = _runs(tmp_path)
    (run_dir / ".model_2.pt.x1y2.tmp").write_bytes(b"half a checkpoint")  # a write killed half-way
    # A changed training setting is refused in one line; --finish alone takes every setting from the run.
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir), "--seed", "6"])
    assert code == 2 and "--seed 6 (the run has 5)" in err and "(leave the flags out)" in err, err
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 0, err
    assert _runs(tmp_path) == [run_dir] and (run_dir / "model_3.pt").is_file()
    assert not list(run_dir.glob(".*.tmp"))
    assert "finished at iteration 3 of 3 (2 iterations" in " ".join(err.split())
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(tmp_path)])
    assert code == 2 and "not a run directory" in err
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir / "model_3.pt")])
    assert code == 2 and f"a file; --finish takes the run's directory ({run_dir})" in err
    # What a new run's place would be says nothing to a run that continues in its own.
    code, _, err = run_main(
        train.main, ["cartpole-balance", "--finish", str(run_dir), "--log-root", str(tmp_path / "x")]
    )
    assert code == 0 and f"--log-root has no effect with --finish: the run continues in {run_dir}" in " ".join(
        err.split()
    )


def test_a_run_another_process_trains_is_not_trained_twice(tmp_path: Path) -> None:
    """Two processes trained one run in its directory, overwriting each other's checkpoints and progress."""
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.max-iterations", "3"]
    run(train.parse_args([*argv, "--log-root", str(tmp_path)]), _stopped_after_first_iteration())
    [run_dir] = _runs(tmp_path)
    assert not (run_dir / LOCK_FILE).exists() or fcntl_free(run_dir / LOCK_FILE)  # given back at the run's end
    with (run_dir / LOCK_FILE).open("w") as other:  # as another process training it holds it
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        other.write("pid 4242 on elsewhere\n")
        other.flush()
        code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
        said = " ".join(err.split())
        assert code == 2 and f"run {run_dir} is being trained by pid 4242 on elsewhere: one process" in said, err
        assert [p.name for p in sorted(run_dir.glob("model_*.pt"))] == ["model_1.pt"]
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 0 and (run_dir / "model_3.pt").is_file(), err


def fcntl_free(path: Path) -> bool:
    """Whether no one holds ``path``'s lock."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_a_stop_request_in_the_last_iteration_leaves_the_run_finished(tmp_path: Path) -> None:
    """A request that arrives while the last iteration trains stops nothing: the run is over (recorded as stopped,
    a scheduler's script requeued it on the signal's exit code, to train nothing)."""
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.max-iterations", "1"]
    [result] = run(train.parse_args([*argv, "--log-root", str(tmp_path)]), _stopped_after_first_iteration())
    [run_dir] = _runs(tmp_path)
    record = RunRecord.read(run_dir)
    assert result.stop_signal is None and result.final_iteration == 1
    assert record is not None and record.over and record.ended is not None and record.ended["how"] == "finished"


def test_finish_as_a_rank_of_another_launcher_leaves_out_the_own_launchers_recorded_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started by train.sbatch (--hostnames slurm --max-restarts 2) finished under torchrun was refused for
    flags its user never typed there ("--hostnames is for mjfleet's own launcher")."""
    from mjfleet.tasks.registry import get_task
    from mjfleet.train.external import OWN_LAUNCHER_FIELDS

    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "16", "--agent.max-iterations", "2"]
    run(train.parse_args([*argv, "--log-root", str(tmp_path)]), _stopped_after_first_iteration())
    [run_dir] = _runs(tmp_path)
    recorded = run_dir / "params" / "run.yaml"
    recorded.write_text(recorded.read_text() + "max_restarts: 2\nhostnames: [slurm]\ncpu_workers: 4\n")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(name, raising=False)
    own = train.recorded_config(get_task("cartpole-balance"), run_dir)
    assert (own.max_restarts, own.hostnames, own.cpu_workers) == (2, ("slurm",), 4)  # its own launcher: the same job
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    ranked = train.recorded_config(get_task("cartpole-balance"), run_dir)
    assert (ranked.max_restarts, ranked.hostnames, ranked.cpu_workers) == (0, (), 1)
    assert all(hasattr(ranked, name) for name in OWN_LAUNCHER_FIELDS)


def test_finish_of_a_run_it_cannot_write_or_read_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both were tracebacks: PermissionError writing the run's record, yaml's ParserError reading its settings."""
    from mjfleet.train import plan

    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "16", "--agent.max-iterations", "2"]
    run(train.parse_args([*argv, "--log-root", str(tmp_path)]), _stopped_after_first_iteration())
    [run_dir] = _runs(tmp_path)
    real_access = plan.os.access
    with monkeypatch.context() as patch:  # root writes anywhere a mode allows none: the check is what is tested
        patch.setattr(plan.os, "access", lambda path, mode: Path(path) != run_dir and real_access(path, mode))
        code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 2 and f"--finish {run_dir}: the run directory is not writable" in err, err
    settings = run_dir / "params" / "agent.yaml"
    settings.write_text(settings.read_text() + "foo: [unclosed\n")  # edited by hand
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 2 and f"{settings} cannot be read as YAML (expected ',' or ']'" in err, err
    assert "Traceback" not in err and _runs(tmp_path) == [run_dir]
    text = settings.read_text().replace("foo: [unclosed\n", "")
    settings.write_text(text)
    # Another task's: the command that finishes it, whole.
    code, _, err = run_main(train.main, ["cartpole-swingup", "--finish", str(run_dir)])
    assert code == 2 and f"not cartpole-swingup: train cartpole-balance --finish {run_dir}" in err
    settings.write_text(text.replace("max_iterations: 2", "max_iterations: two"))  # a value of the wrong type
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 2 and f"{settings}: max_iterations is 'two', not int" in err, err
    assert "Traceback" not in err and _runs(tmp_path) == [run_dir]
    settings.write_text(text)
    job = run_dir / JOB_FILE
    job.write_text(job.read_text().replace('"final_iteration": 2', '"final_iteration": "x"'))  # a TypeError before
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 2 and f"ignoring {job}: its final_iteration is 'x'" in " ".join(err.split()), err
    assert "Traceback" not in err and _runs(tmp_path) == [run_dir]


def test_an_old_record_without_settings_is_never_continued(tmp_path: Path) -> None:
    run_dir = tmp_path / "cartpole_balance" / "2026-01-01_00-00-00"
    run_dir.mkdir(parents=True)
    (run_dir / JOB_FILE).write_text(json.dumps({"run_id": "old", "source": "--run-id", "final_iteration": 5}))
    assert RunRecord.read(run_dir) is None
    assert not plan_run(small_train_config(log_root=tmp_path, run_id="old"), {}, None).continues


def test_nothing_is_created_for_a_refused_finish(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nowhere: no such directory"):
        train.parse_args(["cartpole-balance", "--finish", str(tmp_path / "nowhere")])
    assert not any(tmp_path.iterdir())


def test_a_new_run_beside_a_run_of_the_same_job_says_which_and_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"SLURM_JOB_ID": "77"}
    one = plan_run(small_train_config(seed=1, log_root=tmp_path), env, TORCHRUN)
    one.run_dir.mkdir(parents=True)
    one.record.write(one.run_dir)
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        two = plan_run(small_train_config(seed=2, log_root=tmp_path), env, TORCHRUN)
    assert not two.continues
    said = " ".join(caplog.text.split())
    assert f"this job (SLURM_JOB_ID slurm-77) already has run {one.run_dir}, which trains other settings" in said
    assert "--seed 2 (the run has 1)" in said


def test_finish_with_more_iterations_extends_the_run_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.max-iterations", "2"]
    argv += ["--agent.save-interval", "1", "--agent.eval-envs", "0", "--log-root", str(tmp_path)]
    code, _, err = run_main(train.main, argv)
    assert code == 0, err
    [run_dir] = _runs(tmp_path)
    # The run is over; --finish alone has nothing to train and says how to go further.
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    said = " ".join(err.split())
    # As runnable as the other printed commands: the entry point and task before the flags.
    assert (
        code == 0 and f"train cartpole-balance --finish {run_dir} --agent.max-iterations <more than 2> trains" in said
    )
    # From inside the run (a path without parents as typed: it failed with StopIteration).
    monkeypatch.chdir(run_dir)
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", "."])
    assert code == 0 and f"nothing to train: run {run_dir} " in " ".join(err.split()), err
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir), "--agent.max-iterations", "1"])
    assert code == 2 and "--finish extends a run, it does not shorten it" in err
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir), "--agent.max-iterations", "4"])
    said = " ".join(err.split())
    assert code == 0, err
    assert f"extending run {run_dir} from iteration 2 to 4" in said and "finished at iteration 4 of 4" in said
    assert _runs(tmp_path) == [run_dir] and (run_dir / "model_4.pt").is_file()
    record = RunRecord.read(run_dir)
    assert record is not None and record.final_iteration == 4 and record.over
    # The extended end is the run's end from now on: --finish alone has nothing left.
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 0 and "ended at iteration 4 (finished)" in " ".join(err.split())


def test_a_finished_run_is_said_to_be_named_by_finish_not_by_this_job(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A run begun under one torchrun invocation and finished under another: the log names --finish as the reason it
    # continues, and the run id as the one it began under (not this invocation's TORCHELASTIC_RUN_ID).
    cfg = small_train_config(log_root=tmp_path)
    begun = plan_run(cfg, {"TORCHELASTIC_RUN_ID": "first"}, TORCHRUN)
    run_dir = open_run_dir(begun)
    finish = dataclasses.replace(cfg, finish=run_dir)
    again = plan_run(finish, {"TORCHELASTIC_RUN_ID": "second"}, TORCHRUN)
    assert again.continues and again.by_finish and again.run_dir == run_dir
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        open_run_dir(again)
    assert f"continuing run {run_dir} (--finish; it began as run id torchrun-first) at iteration 1" in caplog.text
    assert "TORCHELASTIC_RUN_ID" not in caplog.text


def test_a_run_that_predates_a_setting_matches_a_start_that_leaves_it_at_the_tasks_default(tmp_path: Path) -> None:
    # A run recorded before --env.randomization.com-offset existed: finished or requeued by today's code, which names
    # it at its default (None: what the run trained with), the run continues; set to something else, it is another.
    from mjfleet.runs.fingerprint import recorded_values
    from mjfleet.train.plan import default_settings

    cfg = small_train_config("go1-velocity-flat", log_root=tmp_path)
    now = _settings(cfg)
    recorded = {k: v for k, v in now.items() if not k.startswith("env.randomization.com_offset")}
    defaults = default_settings(cfg)
    assert not same_training(recorded, now)  # without the task's defaults: "(the run has nothing)"
    assert same_training(recorded, now, defaults) and differences(recorded, now, defaults=defaults) == ""
    moved = dataclasses.replace(cfg.env.randomization, com_offset=(0.01, 0.0, 0.0))  # type: ignore[attr-defined]
    other = _settings(dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, randomization=moved)))
    assert not same_training(recorded, other, defaults)
    assert "--env.randomization.com-offset" in differences(recorded, other, defaults=defaults)
    # A setting added with a default other than what earlier runs trained with is read back at the earlier value.
    assert recorded_values({"rewards": {"effort": -0.1}}, "env")["pinch_tolerance"] is None
    assert recorded_values({"pinch_tolerance": 0.01}, "env")["pinch_tolerance"] == 0.01
    assert recorded_values({}, "agent")["learner"] == "rsl-rl-ppo"


def test_a_run_moved_elsewhere_is_finished_where_it_is(tmp_path: Path) -> None:
    # --finish writes into the run directory it names: the log root the run recorded may be gone or unusable.
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64", "--agent.max-iterations", "2"]
    argv += ["--agent.save-interval", "1", "--log-root", str(tmp_path / "logs")]
    run(train.parse_args(argv), _stopped_after_first_iteration())
    [first] = _runs(tmp_path / "logs")
    moved = tmp_path / "copied" / "cartpole_balance" / first.name
    moved.parent.mkdir(parents=True)
    first.rename(moved)
    (tmp_path / "blocked").write_text("")  # the recorded root now lies under a file: no run can be created there
    params = moved / "params" / "run.yaml"
    params.write_text(params.read_text().replace(str(tmp_path / "logs"), str(tmp_path / "blocked" / "logs")))
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(moved)])
    assert code == 0, err
    assert (moved / "model_2.pt").is_file()


def test_a_run_recorded_before_file_contents_counted_matches_the_file_as_it_is(tmp_path: Path) -> None:
    from mjfleet.runs.fingerprint import content_digests

    motion = tmp_path / "m.csv"
    motion.write_text("1,2,3\n")
    current = {"task": "t", "env.motion": str(motion)} | content_digests({"motion": motion})
    assert set(current) == {"task", "env.motion", "env.motion_sha256"}
    assert same_training({"task": "t", "env.motion": str(motion)}, current)  # recorded without the digest
    edited = {**current, "env.motion_sha256": "0" * 64}
    assert not same_training(current, edited)
    assert differences(current, edited).startswith("the content of --env.motion (sha256 000000000000; the run's ")


def test_a_checkpoint_to_resume_is_recorded_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded as typed, the same checkpoint named from another folder was "other settings" under one --run-id, and
    ``--finish`` from another folder looked for the checkpoint there."""
    from mjfleet.train.config import validate

    monkeypatch.chdir(tmp_path)
    relative = small_train_config(resume=Path("runs/model_3.pt"))
    validate(relative)
    assert relative.resume == tmp_path / "runs" / "model_3.pt"
    absolute = small_train_config(resume=tmp_path / "runs" / "model_3.pt")
    validate(absolute)
    assert same_training(_settings(relative), _settings(absolute))
    remote = small_train_config(resume=Path("wandb:team/project/abc123:model_5.pt"))
    validate(remote)
    assert str(remote.resume) == "wandb:team/project/abc123:model_5.pt"


def test_resume_says_where_its_environment_differs_from_the_checkpoints(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A CPU checkpoint resumed on a GPU with only its network sizes given trained at the GPU's action scale (four
    times the Menagerie Go1's on the CPU) without a word."""
    trained = small_train_config(iterations=1, log_root=tmp_path / "a")
    trained.env = dataclasses.replace(trained.env, episode_length_s=3.0)
    run(trained)
    [source] = _runs(tmp_path / "a")
    other = small_train_config(iterations=1, log_root=tmp_path / "b", resume=source, num_envs=32)
    with caplog.at_level(logging.WARNING, logger="mjfleet"):
        plan_run(other, {}, None)
    assert f"--resume {source / 'model_1.pt'}: its run trained in another environment: " in caplog.text
    assert "--env.episode-length-s 5.0 (the run has 3.0); give its values as flags" in caplog.text
    assert "num-envs" not in caplog.text  # another device's count of environments is no other environment
    caplog.clear()
    same = small_train_config(iterations=1, log_root=tmp_path / "b", resume=source)
    same.env = dataclasses.replace(same.env, episode_length_s=3.0)
    with caplog.at_level(logging.WARNING, logger="mjfleet"):
        plan_run(same, {}, None)
    assert "another environment" not in caplog.text


def test_a_run_that_recorded_its_checkpoint_as_typed_still_matches_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs recorded a relative --resume as typed before it was made absolute: their --finish, requeue or --run-id
    from the same folder was refused as "other settings"."""
    from mjfleet.train.config import validate

    monkeypatch.chdir(tmp_path)
    old = small_train_config(resume=Path("runs/model_3.pt"))
    recorded = _settings(old)  # as typed: relative
    now = small_train_config(resume=Path("runs/model_3.pt"))
    validate(now)
    assert recorded["resume"] == "runs/model_3.pt" and same_training(recorded, _settings(now))
    assert differences(recorded, _settings(now)) == ""
