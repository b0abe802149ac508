"""Every user error of the CLIs: one line on stderr, exit code 2, no traceback, no run directory."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from mjfleet.cli import bench, list_tasks, play, train
from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import save_atomic
from mjfleet.tasks.registry import get_task
from mjfleet.train import api, prepare, run
from mjfleet.train import supervisor as train_supervisor

from .helpers import run_main, small_train_config


def gpu_less_env() -> dict[str, str]:
    """The environment of the CLI processes these tests start: no GPU is visible to them on any machine."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(autouse=True)
def gpu_less_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs on a machine without GPUs, whatever this machine has: the no-CUDA error paths are
    asserted everywhere, CUDA machines included."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def _usage_error(capsys: pytest.CaptureFixture[str], main: object, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)  # type: ignore[operator]
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["cartpole-balanse"], "did you mean cartpole-balance"),
        (["walker-run"], "unknown task 'walker-run'"),
        ([], "usage: train <task>"),
        (["cartpole-balance", "--gpu-ids", "0"], "no CUDA GPUs are visible"),
        (["cartpole-balance", "--gpu-ids", "0", "1"], "no CUDA GPUs are visible"),
        (["cartpole-balance", "--gpu-ids", "all"], "no CUDA GPUs are visible"),
        (["cartpole-balance", "--gpu-ids", "-1"], "negative"),
        (["cartpole-balance", "--gpu-ids", "zero"], "not a GPU index"),
        (["cartpole-balance", "--gpu-ids", "0", "0"], "more than once"),
        (["cartpole-balance", "--env.num-envs", "0"], "--env.num-envs must be at least 1"),
        (["cartpole-balance", "--env.num-envs", "many"], "'many' (expected --env.num-envs INT)"),
        # rsl-rl-lib's ValueError came from the worker, after the run directory existed.
        (["cartpole-balance", "--agent.policy.activation", "nonsense"], "invalid choice 'nonsense' for argument"),
        (
            ["cartpole-balance", "--env.sim.use-graph", "False"],
            "False (--env.sim.use-graph is an on/off flag and takes no value: --env.sim.use-graph or"
            " --env.sim.no-use-graph)",
        ),
        (["cartpole-balance", "--stop-when", "success", ">=", "0.9"], "quote the condition as one word"),
        (["cartpole-balance", "--resume", "~nosuchuser4242/model_5.pt"], "--resume ~nosuchuser4242/model_5.pt:"),
        (["cartpole-balance", "--agent.max-iterations", "-5"], "--agent.max-iterations"),
        (["cartpole-balance", "--env.episode-length-s", "nan"], "--env.episode-length-s must be positive"),
        (["cartpole-balance", "--env.sim.threads", "0"], "--env.sim.threads must be at least 1 (got 0;"),
        (["cartpole-balance", "--env.sim.nconmax", "-5"], "--env.sim.nconmax must be at least 1 (got -5;"),
        (["cartpole-balance", "--env.sim.divergence-speed", "-1"], "--env.sim.divergence-speed must be positive"),
        # MuJoCo takes them: the training robot fell through the floor, or the error came after the run existed.
        (["cartpole-balance", "--env.sim.training-contacts.impratio", "0"], "impratio must be positive (got 0.0)"),
        (
            ["cartpole-balance", "--env.sim.training-contacts.timestep-scale", "3", "--env.sim.decimation", "4"],
            "--env.sim.training-contacts.timestep-scale 3 must divide --env.sim.decimation 4",
        ),
        (["cartpole-balance", "--no-such-flag"], "error: Unrecognized option: --no-such-flag (see"),
        # The value typed after a misspelt flag is not a second unknown option.
        (["cartpole-balance", "--agent.num-step-per-env", "10"], "Unrecognized option: --agent.num-step-per-env; did"),
        (["cartpole-balance", "--foo", "3", "--bar", "x"], "Unrecognized options: --foo, --bar (see"),
        (["cartpole-balance", "--agent.algorithm.gama", "0.9"], "; did you mean --agent.algorithm.gamma"),
        (["cartpole-balance", "--stop-when", "success=0.9"], "--stop-when 'success=0.9' is not a condition"),
        (["cartpole-balance", "--stop-when", "success>=high"], "'high' is not a number"),
        (["cartpole-balance", "--stop-when", "success>="], "--stop-when 'success>=': no number after the comparison"),
        # What a shell leaves of an unquoted success>=0.95 (it wrote a file named =0.95).
        (["cartpole-balance", "--stop-when", "success"], "(quote it: --stop-when 'success>=0.95'; unquoted, the shell"),
        (["cartpole-balance", "--stop-when", "success>=95"], "success is a share of episodes, from 0 to 1 (0.95 for"),
        (["cartpole-balance", "--stop-when", "Episode/success<-1"], "success is a share of episodes"),
        (["cartpole-balance", "--stop-when", "success>=1", "--stop-when-iterations", "0"], "at least 1 (got 0)"),
        (["cartpole-balance", "--stop-when", "speed>1"], "logs no statistic 'speed'; use success, return, length or"),
        # The one overrode the other without a word (3 workers planned).
        (
            ["cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "2", "--workers-per-host", "3"],
            "--workers-per-host 3 and --cpu-workers 2 disagree",
        ),
        # The evaluation runs the full command ranges: never met on the CPU, met at once on a GPU (its level is 1).
        (
            ["go1-velocity-flat", "--env.commands.curriculum.start", "0.5", "--stop-when", "Metrics/command_level>=1"],
            "the evaluation episodes (the deterministic policy, as play runs it) log no 'Metrics/command_level'",
        ),
        (["cartpole-balance", "--stop-when", "Episode/success_privileged>2"], "success is a share of episodes"),
        # Read as the working directory: "not a run directory", or runs written under it unasked.
        (["cartpole-balance", "--finish="], "--finish is empty: give a path"),
        (["cartpole-balance", "--log-root", ""], "--log-root is empty: give a path"),
        (["cartpole-balance", "--resume", " "], "--resume is empty: give a path"),
    ],
)
def test_train_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], expected: str) -> None:
    line = _usage_error(capsys, train.main, [*argv, "--log-root", str(tmp_path)] if argv else argv)
    assert expected in line
    assert not any(tmp_path.rglob("*")), "no run directory may be created for a rejected command"


def test_stop_when_offers_the_privileged_success_only_where_it_is_logged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A stop on a statistic the task never logs would never stop the run."""
    line = _usage_error(
        capsys, train.main, ["cartpole-balance", "--stop-when", "succes>0.9", "--log-root", str(tmp_path)]
    )
    assert line.endswith("use success, return, length or one of Metrics/pole_up_fraction")
    lift = ["yam-lift-cube", "--gpu-ids", "None", "--stop-when", "succes>0.9", "--log-root", str(tmp_path)]
    assert "Episode/success_privileged" in _usage_error(capsys, train.main, lift)  # starts with the cube in the hand
    # Only the training episodes have such starts: on the evaluation episodes the condition was never met.
    lift[4] = "Episode/success_privileged>0.9"
    assert "log no 'Episode/success_privileged'" in _usage_error(capsys, train.main, lift)
    train.main([*lift, "--agent.eval-envs", "0", "--dry-run"])  # the training episodes do log it
    assert not any(tmp_path.rglob("*"))


def test_a_task_that_overrides_training_start_alone_still_reports_its_privileged_success_apart() -> None:
    """A package task written before ``has_training_starts``: its in-hand successes stay out of ``Episode/success``."""
    from mjfleet.envs.task import PRIVILEGED_SUCCESS, declared_stat_keys
    from mjfleet.tasks.cartpole.cartpole import CartpoleTask, balance_config

    class Started(CartpoleTask):
        def training_start(self, env):  # type: ignore[no-untyped-def]
            return None

    assert PRIVILEGED_SUCCESS in declared_stat_keys(Started, balance_config())
    assert PRIVILEGED_SUCCESS not in declared_stat_keys(CartpoleTask, balance_config())


def test_a_network_of_no_layers_and_a_lone_stop_streak_are_said_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No hidden layers passed ``--dry-run`` and failed in rsl_rl after the run existed (an IndexError, exit 1);
    ``--stop-when-iterations`` without a condition was ignored without a word."""
    base = ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path / "logs"), "--dry-run"]
    for net in ("actor", "critic"):
        line = _usage_error(capsys, train.main, [*base, f"--agent.policy.{net}-hidden-dims"])
        assert f"--agent.policy.{net}-hidden-dims names no layer" in line
    train.main([*base, "--stop-when-iterations", "3"])
    assert "--stop-when-iterations 3 has no effect without --stop-when" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


def test_train_resume_missing_or_corrupt(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path / "logs")]
    assert "does not exist" in _usage_error(capsys, train.main, [*base, "--resume", str(tmp_path / "nope.pt")])
    bad = tmp_path / "model_3.pt"
    save_atomic({"actor_state_dict": {}, "critic_state_dict": {}, "optimizer_state_dict": {}, "iter": 3}, bad)
    bad.write_bytes(bad.read_bytes()[:40])
    assert "corrupt or truncated" in _usage_error(capsys, train.main, [*base, "--resume", str(bad)])
    empty = tmp_path / "empty_run"
    empty.mkdir()
    assert "no model_" in _usage_error(capsys, train.main, [*base, "--resume", str(empty)])
    assert not (tmp_path / "logs").exists()


def test_train_resume_with_other_networks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def mlp(*widths: int) -> dict[str, torch.Tensor]:  # an rsl_rl MLP's weights: Linear, activation, Linear, ...
        return {f"mlp.{2 * i}.weight": torch.zeros(o, n) for i, (n, o) in enumerate(itertools.pairwise(widths))}

    saved = tmp_path / "model_3.pt"
    normaliser = {"obs_normalizer._mean": torch.zeros(1, 5), "obs_normalizer.count": torch.tensor(0)}
    nets = {"actor_state_dict": {**normaliser, **mlp(5, 64, 64, 1)}, "critic_state_dict": mlp(5, 64, 64, 1)}
    save_atomic({**nets, "optimizer_state_dict": {}, "iter": 3}, saved)
    base = ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path / "logs"), "--resume", str(saved)]
    line = _usage_error(capsys, train.main, [*base, "--agent.policy.critic-hidden-dims", "32", "32"])
    assert "its critic has hidden layers 64 64, this run's 32 32" in line
    assert "--agent.policy.critic-hidden-dims 64 64" in line
    # Another normalisation: torch's strict load raised in every worker, after the run directory existed.
    line = _usage_error(capsys, train.main, [*base, "--agent.policy.no-obs-normalization"])
    assert "its networks normalise their observations, this run's would not" in line
    assert "pass --agent.policy.obs-normalization to continue it" in line
    assert not (tmp_path / "logs").exists()
    assert train.main([*base, "--dry-run"]) is None  # the task's own networks (64 64, normalised) fit
    # Its run trained another function with the same layers: its weights would go on in ELU networks without a word.
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "agent.yaml").write_text("policy:\n  activation: tanh\n")
    line = _usage_error(capsys, train.main, base)
    assert "its run trained with --agent.policy.activation tanh, this run's is elu" in line
    assert train.main([*base, "--agent.policy.activation", "tanh", "--dry-run"]) is None
    # A package learner's layout is its own: nothing is said of its normaliser.
    from mjfleet.rl.checkpoint.files import normalises_observations

    assert normalises_observations({**nets, "learner": "my-ppo", "iter": 3}) is None


def test_a_policy_without_its_runs_settings_plays_on_the_tasks_defaults(tmp_path: Path) -> None:
    """An exported policy copied into a folder of its own: the settings of runs that predate a setting (the lift
    unfiltered, the G1 at one action scale for every joint) were taken for the missing record."""
    lone = tmp_path / "policy.onnx"
    lone.write_bytes(b"an exported graph")  # parsing reads no graph
    for task, setting, of_old_runs in (
        ("yam-lift-cube", "action_filter", 1.0),
        ("unitree-g1-tracking", "action_scale_of_force", 0.0),
    ):
        _, cfg, _ = play.parse_args([task, "--gpu-ids", "None", "--checkpoint", str(lone)])
        default = getattr(get_task(task).env_cfg(), setting)
        assert default != of_old_runs and getattr(cfg.env, setting) == default, task


def test_play_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    no_runs = ["cartpole-balance", "--log-root", str(tmp_path)]
    said = _usage_error(capsys, play.main, no_runs)
    assert (
        "no trained run of cartpole-balance" in said and "train one (train cartpole-balance), point --log-root" in said
    )
    assert "does not exist" in _usage_error(
        capsys, play.main, ["cartpole-balance", "--checkpoint", str(tmp_path / "x.pt"), "--gpu-ids", "None"]
    )
    assert "unknown task" in _usage_error(capsys, play.main, ["cartpole"])
    # It read as the working directory, which "holds no model_<iteration>.pt checkpoint".
    assert "--checkpoint is empty" in _usage_error(capsys, play.main, ["cartpole-balance", "--checkpoint", ""])
    assert "at least 1" in _usage_error(
        capsys, play.main, ["cartpole-balance", "--agent", "zero", "--num-episodes", "0"]
    )
    assert "--seed must be between 0 and 4294967295 (got 99999999999)" in _usage_error(  # was torch's traceback
        capsys, play.main, ["cartpole-balance", "--agent", "zero", "--gpu-ids", "None", "--seed", "99999999999"]
    )
    zero = ["cartpole-balance", "--agent", "zero", "--gpu-ids", "None"]
    assert "--env.sim.decimation must be at least 1" in _usage_error(
        capsys, play.main, [*zero, "--env.sim.decimation", "0"]
    )
    videos = tmp_path / "videos"
    zero_wide = ["cartpole-balance", "--agent", "zero", "--video", "--video-width", "0"]
    assert "--video-width" in _usage_error(capsys, play.main, [*zero_wide, "--video-path", str(videos / "v.mp4")])
    assert not videos.exists()
    # A video path that cannot be written is refused before the episodes play, not after.
    zero = ["cartpole-balance", "--agent", "zero", "--video", "--video-path"]
    assert "must name an .mp4 file" in _usage_error(capsys, play.main, [*zero, str(tmp_path / "v.txt")])
    assert "is a folder" in _usage_error(capsys, play.main, [*zero, str(tmp_path)])
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert "cannot write under" in _usage_error(capsys, play.main, [*zero, str(blocked / "sub" / "v.mp4")])
    # The environment settings train refuses, play refuses too (episodes of length 0 read success 1.0).
    baseline = ["cartpole-balance", "--agent", "zero", "--gpu-ids", "None"]
    for flag, value in (
        ("--env.episode-length-s", "0"),
        ("--env.episode-length-s", "inf"),
        ("--env.clip-actions", "-1"),
    ):
        assert f"{flag} must be positive" in _usage_error(capsys, play.main, [*baseline, flag, value])


def test_a_baseline_is_played_as_a_policy_is_judged() -> None:
    # play --agent zero|random without a run: the task's judged settings, as for a policy (the lift's starts with the
    # cube in the hand counted as its successes; the tracking task kept its training starts and contact model).
    _, cfg, _ = play.parse_args(["yam-lift-cube", "--agent", "zero", "--gpu-ids", "None", "--num-episodes", "2"])
    judged = get_task("yam-lift-cube").env_cfg().as_judged()
    assert cfg.env == dataclasses.replace(judged, num_envs=2)
    assert cfg.env != dataclasses.replace(get_task("yam-lift-cube").env_cfg(), num_envs=2)


def test_train_renders_headless_unless_told_otherwise() -> None:
    """mujoco picks its GL platform when imported: train sets ``MUJOCO_GL=egl`` first, as play does, so training
    videos render without a display; a platform the user chose stands."""
    code = "import os, mjfleet.cli.train; print(os.environ['MUJOCO_GL'])"
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    chosen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert chosen.stdout.strip() == "egl"
    mine = subprocess.run(
        [sys.executable, "-c", code], env={**env, "MUJOCO_GL": "osmesa"}, capture_output=True, text=True, check=True
    )
    assert mine.stdout.strip() == "osmesa"


def test_bench_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "unknown task" in _usage_error(capsys, bench.main, ["nope"])
    assert "must be positive" in _usage_error(capsys, bench.main, ["cartpole-balance", "--num-envs", "0"])
    assert "--train-num-envs" in _usage_error(capsys, bench.main, ["cartpole-balance", "--train-num-envs", "0"])
    assert "is a directory" in _usage_error(capsys, bench.main, ["cartpole-balance", "--json", str(tmp_path)])


def test_list_tasks_prints_ids_and_descriptions(capsys: pytest.CaptureFixture[str]) -> None:
    list_tasks.main([])
    out = capsys.readouterr().out.splitlines()
    ids = [line.split()[0] for line in out]
    assert {"cartpole-balance", "cartpole-swingup"} <= set(ids)
    assert all(len(line.split(maxsplit=1)) == 2 for line in out)
    # An argument is refused (a train flag typed here printed the table as if taken); --help says what it does.
    # The robot records --env.robot takes by name (the option's help sent users here for them).
    list_tasks.main(["--robots"])
    robots = dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines())
    assert {"go1", "unitree_go1", "unitree_g1"} <= set(robots) and "Menagerie" in robots["unitree_go1"]
    assert "list-tasks takes no arguments but --robots (got --bogus extra)" in _usage_error(
        capsys, list_tasks.main, ["--bogus", "extra"]
    )
    list_tasks.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: list-tasks [--robots]")


def test_play_random_baseline_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    play.main(["cartpole-balance", "--agent", "random", "--num-episodes", "20", "--gpu-ids", "None"])
    summary = json.loads(capsys.readouterr().out.strip())
    assert summary["episodes"] == 20 and summary["success_rate"] < 0.5
    assert {"mean_return", "mean_length", "success_rate", "pole_up_fraction"} <= set(summary)


def test_play_says_what_it_plays_and_how_far_it_got(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 episodes of 20 s on the CPU take minutes: play said nothing until its summary."""
    from mjfleet.rl.evaluation import episodes

    monkeypatch.setattr(episodes, "PROGRESS_INTERVAL_S", 0.0)
    play.main(["cartpole-balance", "--agent", "zero", "--num-episodes", "3", "--gpu-ids", "None"])
    out, err = capsys.readouterr()
    said = err.splitlines()
    assert said[0].endswith(
        "INFO     playing 3 episodes of cartpole-balance (up to 5 s each, 3 environments) with zero actions on cpu"
    )
    assert said[1].endswith("0 of 3 episodes ended after 0 of at most 251 steps (0 s)")
    assert json.loads(out)["episodes"] == 3


@pytest.mark.parametrize(
    ("main", "argv"),
    [(play.main, ["--checkpoint", "/no/such/run"]), (train.main, ["--finish", "/no/such/run"])],
    ids=["play", "train"],
)
def test_help_shows_even_where_the_run_named_cannot_be_read(
    capsys: pytest.CaptureFixture[str], main: object, argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["cartpole-balance", *argv, "--help"])  # type: ignore[operator]
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("usage: ")


def test_play_says_which_options_had_no_effect(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A video path without --video exited 0 and wrote no file, without a word."""
    play.main(["cartpole-balance", "--agent", "zero", "--gpu-ids", "None", "--num-episodes", "1",
               "--video-path", str(tmp_path / "a.mp4"), "--video-width", "320", "--viewer-port", "9000"])  # fmt: skip
    err = capsys.readouterr().err
    assert "--video-path, --video-width have no effect without --video" in err
    assert "--viewer-port has no effect without --viewer" in err
    assert not (tmp_path / "a.mp4").exists()


def test_a_config_built_in_python_is_checked_as_the_command_line_builds_one(tmp_path: Path) -> None:
    """Wrong types and a generic environment passed `prepare()`, to fail in `run()` after its run directory existed
    (an AttributeError deep in the task, `str / str` in the plan, `--gpu-ids N o n e`)."""
    from mjfleet.envs.config import EnvConfig

    def refused(**changes: object) -> str:
        with pytest.raises(UsageError) as exc:
            prepare(dataclasses.replace(small_train_config(log_root=tmp_path), **changes))  # type: ignore[arg-type]
        return str(exc.value)

    assert refused(env=EnvConfig()) == (
        "TrainConfig.env is EnvConfig; cartpole-balance takes CartpoleConfig"
        " (get_task('cartpole-balance').defaults() gives the task's settings)"
    )
    assert (
        refused(gpu_ids="None") == "TrainConfig.gpu_ids is 'None', not one of 'auto', 'all' or tuple[int, ...] or None"
    )
    assert refused(seed=1.5) == "TrainConfig.seed is 1.5, not int"
    assert refused(task="") == "unknown task ''; run list-tasks to see them"
    prepared = prepare(dataclasses.replace(small_train_config(), log_root=str(tmp_path), stop_when="success>=0.9"))
    assert prepared.cfg.log_root == tmp_path and str(prepared.cfg.stop_when) == "Eval/success >= 0.9"
    assert not any(tmp_path.iterdir())


def test_console_scripts_are_the_entry_points_that_survive_a_ctrl_c_while_loading() -> None:
    import tomllib

    from mjfleet.cli import entry

    scripts = tomllib.loads(Path(__file__).parents[1].joinpath("pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {
        name: f"mjfleet.cli.entry:{name.replace('-', '_')}" for name in ("train", "play", "list-tasks", "bench")
    }
    assert all(callable(getattr(entry, name.replace("-", "_"))) for name in scripts)


def test_a_ctrl_c_while_a_command_loads_or_runs_exits_130_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from mjfleet.cli import entry

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(entry.importlib, "import_module", interrupted)  # torch and MuJoCo loading
        with pytest.raises(SystemExit) as loading:
            entry.play()
    assert loading.value.code == 130
    monkeypatch.setattr(play, "play", interrupted)  # the episodes playing
    with pytest.raises(SystemExit) as playing:
        play.main(["cartpole-balance", "--agent", "zero", "--gpu-ids", "None"])
    assert playing.value.code == 130
    monkeypatch.setattr(list_tasks, "task_table", interrupted)
    with pytest.raises(SystemExit) as listing:
        list_tasks.main([])
    assert listing.value.code == 130


@pytest.mark.slow
def test_console_script_error_has_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mjfleet.cli.train", "cartpole-balance", "--gpu-ids", "7"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=gpu_less_env(),
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_parsing_planning_and_listing_load_no_simulator_or_torch() -> None:
    # A mistyped command must be answered at once, and a launcher process needs only torchrunx: the heavy
    # imports (seconds each) belong to the workers.
    code = (
        "import sys\n"
        "from mjfleet.cli import bench, list_tasks, play, train\n"
        "from mjfleet.train import prepare\n"
        "from mjfleet.tasks.registry import all_tasks\n"
        "assert len(all_tasks()) >= 6\n"
        "for task in ('cartpole-balance', 'go1-velocity-rough'):\n"
        "    cfg = train.parse_args([task, '--gpu-ids', 'None', '--cpu-workers', '2', '--log-root', sys.argv[1]])\n"
        "    assert prepare(cfg).launch_plan is not None\n"
        "heavy = sorted(m for m in ('torch', 'warp', 'mujoco', 'mujoco_warp', 'rsl_rl', 'tensordict', 'torchrunx')\n"
        "               if m in sys.modules)\n"
        "print(heavy)\n"
    )
    with tempfile.TemporaryDirectory() as logs:
        result = subprocess.run(
            [sys.executable, "-c", code, logs], capture_output=True, text=True, env=gpu_less_env(), timeout=120
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- help -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("main", "command", "options"),
    [
        (train.main, "train", ["--gpu-ids", "--cpu-workers", "--launcher", "--hostnames", "--resume", "--log-root"]),
        (train.main, "train", ["--max-restarts", "--dry-run", "--env.num-envs", "--agent.max-iterations"]),
        (play.main, "play", ["--checkpoint", "--gpu-ids", "--num-episodes", "--video", "--env.num-envs"]),
        (bench.main, "bench", ["--gpu-ids", "--num-envs", "--workers", "--launcher-overhead"]),
    ],
)
def test_help_without_a_task_lists_every_option_and_the_task_ids(
    capsys: pytest.CaptureFixture[str], main: object, command: str, options: list[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])  # type: ignore[operator]
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {command} <task>")
    for option in options:
        assert f"{option} " in out or f"{option}," in out, option
    assert "\n  cartpole-balance  " in out and "\n  go1-velocity-rough  " in out
    assert "--task" not in out


def test_task_help_shows_the_task_defaults_without_a_task_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        train.main(["go1-velocity-rough", "-h"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: train go1-velocity-rough")
    assert "--env.terrain.kind" in out and "--hostnames" in out
    assert "--task" not in out


@pytest.mark.parametrize("task", ["go1-velocity-flat", "humanoid-velocity-flat"])
def test_a_run_on_the_cpu_takes_the_tasks_cpu_ppo_defaults_and_flags_still_win(task: str) -> None:
    spec = get_task(task)
    assert spec.cpu_agent_cfg is not None and spec.cpu_agent_cfg() != spec.agent_cfg()
    assert train.parse_args([task, "--gpu-ids", "None"]).agent == spec.cpu_agent_cfg()
    assert train.parse_args([task, "--gpu-ids", "0"]).agent == spec.agent_cfg()
    mine = train.parse_args([task, "--gpu-ids", "None", "--agent.algorithm.desired-kl", "0.01"])
    assert mine.agent.algorithm.desired_kl == 0.01
    assert mine.agent.policy == spec.cpu_agent_cfg().policy
    # The same defaults where bench measures training on the CPU; a task without CPU defaults keeps its one set.
    measured = bench._train_config(task, bench.BenchConfig(), "cpu", 1, False, "mujoco").agent
    assert (measured.policy, measured.algorithm) == (spec.cpu_agent_cfg().policy, spec.cpu_agent_cfg().algorithm)
    cartpole = get_task("cartpole-balance")
    assert train.parse_args(["cartpole-balance", "--gpu-ids", "None"]).agent == cartpole.agent_cfg()


def test_a_run_on_the_cpu_takes_the_tasks_cpu_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from mjfleet.tasks import registry

    spec = get_task("cartpole-balance")

    def fewer() -> object:
        return dataclasses.replace(spec.env_cfg(), num_envs=256)

    monkeypatch.setitem(registry._REGISTRY, spec.id, dataclasses.replace(spec, cpu_env_cfg=fewer))
    assert train.parse_args(["cartpole-balance", "--gpu-ids", "None"]).env.num_envs == 256
    assert train.parse_args(["cartpole-balance", "--gpu-ids", "0"]).env.num_envs == spec.env_cfg().num_envs
    assert train.parse_args(["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "64"]).env.num_envs == 64
    assert bench._train_config("cartpole-balance", bench.BenchConfig(), "cpu", 1, False, "mujoco").env.num_envs == 256


def test_the_go1_tracks_with_heavier_weights_on_the_cpu_only() -> None:
    from mjfleet.tasks.locomotion.config import LocomotionConfig
    from mjfleet.tasks.locomotion.presets import GO1_CPU_TRACKING

    def tracking(*argv: str) -> tuple[float, float]:
        env = train.parse_args(["go1-velocity-flat", *argv]).env
        assert isinstance(env, LocomotionConfig)
        return env.rewards.track_lin_vel_xy, env.rewards.track_yaw_rate

    gpu = tracking("--gpu-ids", "0")
    assert tracking("--gpu-ids", "None") == GO1_CPU_TRACKING == (1.5 * gpu[0], 1.5 * gpu[1])
    assert tracking("--gpu-ids", "None", "--env.rewards.track-yaw-rate", "0.75") == (GO1_CPU_TRACKING[0], 0.75)


def test_task_help_on_the_cpu_shows_the_cpu_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    spec = get_task("go1-velocity-flat")
    assert spec.cpu_agent_cfg is not None
    hidden = " ".join(map(str, spec.cpu_agent_cfg().policy.actor_hidden_dims))
    for argv, cpu in ((["--gpu-ids", "None", "--help"], True), (["--gpu-ids", "0", "--help"], False)):
        with pytest.raises(SystemExit) as exc:
            train.main(["go1-velocity-flat", *argv])
        assert exc.value.code == 0
        out = " ".join(capsys.readouterr().out.split())
        assert (train.CPU_DEFAULTS_NOTE in out) == cpu
        assert (f"(default: {hidden})" in out) == cpu, out


@pytest.mark.parametrize(
    "argv",
    [
        [train.main, "go1-velocity-rough"],
        [train.main, "yam-lift-cube"],
        [train.main, "unitree-g1-tracking"],
        [train.main, "cartpole-balance"],
        [play.main, "go1-velocity-flat"],
        [bench.main, "go1-velocity-flat"],
    ],
    ids=["train-rough", "train-lift", "train-tracking", "train-cartpole", "play", "bench"],
)
def test_help_shows_code_in_single_backticks_as_a_terminal_reads_it(
    capsys: pytest.CaptureFixture[str], argv: list[object]
) -> None:
    main, task_id = argv
    with pytest.raises(SystemExit) as exc:
        main([task_id, "--help"])  # type: ignore[operator]
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "`--" in out or "`None`" in out  # code is still marked
    assert "``" not in out, [line for line in out.splitlines() if "``" in line][:3]


def test_task_help_says_what_a_success_is(capsys: pytest.CaptureFixture[str]) -> None:
    for task_id, definition in (
        ("unitree-g1-tracking", "Timed out (the motion's end, or the episode's length) without a termination."),
        ("cartpole-balance", "The episode reached its time limit with the pole up."),
    ):
        with pytest.raises(SystemExit):
            train.main([task_id, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert f"Success (`success` of --stop-when, play's success_rate): {definition}" in out
    spec = dataclasses.replace(get_task("cartpole-balance"), task_class="mjfleet.tasks.cartpole.cartpole:Nothing")
    assert spec.success_doc() == ""


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["train", "go1-velocity-rough", "--help"],
        ["train", "--help"],
        ["play", "--help"],
        ["bench", "--help"],
        ["list_tasks"],
    ],
)
def test_output_into_a_closed_pipe_ends_quietly(argv: list[str]) -> None:
    # ``train <task> --help | head -3``: the reader is gone before the output is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", f"mjfleet.cli.{argv[0]}", *argv[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=gpu_less_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# --- the Python API -------------------------------------------------------------------------------------------------


def test_the_api_refuses_what_the_cli_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = small_train_config(num_envs=0, log_root=tmp_path)
    for entry in (prepare, run):
        with pytest.raises(UsageError, match=r"^--env\.num-envs must be at least 1 \(got 0\)$"):
            entry(cfg)
    with pytest.raises(UsageError, match=r"--agent\.run-name 'a/b' must be"):
        run(small_train_config(log_root=tmp_path, agent=dataclasses.replace(cfg.agent, run_name="a/b")))
    line = _usage_error(capsys, train.main, ["cartpole-balance", "--env.num-envs", "0", "--log-root", str(tmp_path)])
    assert line == "error: --env.num-envs must be at least 1 (got 0)"
    assert not any(tmp_path.rglob("*"))


def test_the_planned_run_is_the_one_that_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHRUNX_LOG_DIR", raising=False)
    prepared = prepare(small_train_config(log_root=tmp_path, cpu_workers=2, max_restarts=1))
    assert prepared.launch_plan is not None and prepared.launch_plan.world_size == 2
    assert prepared.run is not None
    assert prepared.launch_plan.log_dir == prepared.run.run_dir / "torchrunx"
    assert f"run directory: {prepared.run.run_dir} (not created" in api.describe(prepared)
    assert not prepared.run.run_dir.exists()
    launched: list[tuple[Path, object]] = []

    def fake_launch(cfg: object, run_dir: Path, plan: object, start: object, stop: object) -> list[str]:
        launched.append((run_dir, plan))
        return ["done"]

    monkeypatch.setattr(train_supervisor, "launch_training", fake_launch)
    assert run(prepared) == ["done"]  # type: ignore[comparison-overlap]
    assert launched == [(prepared.run.run_dir, prepared.launch_plan)] and launched[0][1] is prepared.launch_plan
    assert prepared.run.run_dir.is_dir()
    run(prepared)  # its directory exists now: never two runs in one directory, the second takes the next name
    moved = prepared.run.run_dir.with_name(f"{prepared.run.run_dir.name}-1")
    assert launched[1][0] == moved and launched[1][1].log_dir == moved / "torchrunx"


def test_an_off_policy_learner_takes_the_tasks_recipe_and_flags_still_win(capsys: pytest.CaptureFixture[str]) -> None:
    for learner in ("skrl-sac", "skrl-td3"):
        cfg = train.parse_args(["cartpole-balance", "--gpu-ids", "None", "--agent.learner", learner])
        group = getattr(cfg.agent, learner.removeprefix("skrl-"))
        assert (cfg.env.num_envs, cfg.agent.num_steps_per_env, cfg.agent.eval_envs) == (64, 8, 16)
        assert (group.batch_size, group.gradient_steps, cfg.agent.max_iterations) == (512, 16, 3000)
    assert train.parse_args(["cartpole-swingup", "--agent.learner", "skrl-sac"]).agent.max_iterations == 6000
    ppo = train.parse_args(["cartpole-balance", "--gpu-ids", "None"])
    assert (ppo.env.num_envs, ppo.agent.num_steps_per_env, ppo.agent.max_iterations) == (1024, 32, 80)
    flagged = [
        "cartpole-balance",
        "--agent.learner",
        "skrl-sac",
        "--env.num-envs",
        "128",
        "--agent.sac.batch-size",
        "64",
    ]
    cfg = train.parse_args(flagged)
    assert (cfg.env.num_envs, cfg.agent.sac.batch_size, cfg.agent.sac.gradient_steps) == (128, 64, 16)
    with pytest.raises(SystemExit) as exc:
        train.main(["cartpole-balance", "--agent.learner", "skrl-td3", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert train.OFF_POLICY_NOTE.format(learner="skrl-td3") in out and "(default: 64)" in out


def test_go1_velocity_flat_takes_its_off_policy_recipe_on_the_cpu_and_not_on_gpus() -> None:
    cpu = train.parse_args(["go1-velocity-flat", "--gpu-ids", "None", "--agent.learner", "fast-td3"])
    c = cpu.agent.fast_td3
    assert (cpu.env.num_envs, cpu.agent.num_steps_per_env, cpu.agent.eval_envs) == (64, 4, 16)
    assert (c.batch_size, c.gradient_steps, c.gamma, c.noise_min, c.noise_max) == (512, 16, 0.97, 0.2, 0.8)
    gpu = train.parse_args(["go1-velocity-flat", "--gpu-ids", "0", "--agent.learner", "fast-td3"])
    assert (gpu.env.num_envs, gpu.agent.fast_td3.batch_size, gpu.agent.fast_td3.gamma) == (1024, 4096, 0.99)
    ppo = train.parse_args(["go1-velocity-flat", "--gpu-ids", "None"])
    assert (ppo.env.num_envs, ppo.agent.num_steps_per_env) == (896, 24)


def test_the_start_line_and_help_name_every_default_that_differs_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:

    differences = get_task("go1-velocity-flat").cpu_differences()
    assert "env.rewards.track_lin_vel_xy 2.25 (GPU: 1.5)" in differences
    assert "agent.policy.actor_hidden_dims 64 64 (GPU: 128 128 128)" in differences
    code, out, err = run_main(train.main, ["go1-velocity-flat", "--gpu-ids", "None", "--dry-run"])
    said = " ".join((out + err).split())
    assert code == 0 and all(d in said for d in differences), said
    with pytest.raises(SystemExit):
        train.main(["go1-velocity-flat", "--gpu-ids", "None", "--help"])
    assert "env.rewards.track_yaw_rate 1.125 (GPU: 0.75)" in " ".join(capsys.readouterr().out.split())
    assert get_task("cartpole-balance").cpu_differences() == []
    # A default a flag replaced is not what the run takes: the start line leaves it out.
    code, out, err = run_main(
        train.main, ["go1-velocity-flat", "--gpu-ids", "None", "--env.num-envs", "16", "--dry-run"]
    )
    said = " ".join((out + err).split())
    assert code == 0 and "env.num_envs 896" not in said and "env.rewards.track_yaw_rate 1.125 (GPU: 0.75)" in said


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "launched"])
def test_resuming_another_tasks_checkpoint_is_one_line_and_says_whose_it_is(tmp_path: Path, workers: int) -> None:
    """Launched workers find the bad input as the process itself does: one line, exit 2, no run directory left."""
    from .helpers import run_main

    tiny = ["--gpu-ids", "None", "--env.num-envs", "16", "--agent.num-steps-per-env", "8", "--agent.eval-envs", "0"]
    code, _, err = run_main(
        train.main, ["cartpole-balance", *tiny, "--agent.max-iterations", "1", "--log-root", str(tmp_path)]
    )
    assert code == 0, err
    (checkpoint,) = tmp_path.glob("cartpole_balance/*/model_1.pt")
    go1 = ["go1-velocity-flat", *tiny, "--agent.max-iterations", "1", "--log-root", str(tmp_path / "go1")]
    go1 += ["--agent.policy.actor-hidden-dims", "64", "64", "--agent.policy.critic-hidden-dims", "64", "64"]
    code, _, err = run_main(train.main, [*go1, "--cpu-workers", str(workers), "--resume", str(checkpoint)])
    assert code == 2, err
    (line,) = [x for x in err.strip().splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: checkpoint {checkpoint}: its networks do not fit this task's observations and")
    assert "(size mismatch for" in line
    assert "Traceback" not in err
    assert "a checkpoint of cartpole-balance, resumed as go1-velocity-flat" in " ".join(err.split())
    assert not (tmp_path / "go1").exists(), "the rejected run's directory and the folders made for it are removed"


def test_a_rejected_start_keeps_a_run_directory_that_records_an_earlier_attempts_failure(tmp_path: Path) -> None:
    """A relaunch that finds bad input (a download that failed) must not delete the record of why the first attempt
    failed: its restarts.log and worker logs."""
    from types import SimpleNamespace

    experiment = tmp_path / "logs" / "exp"
    for name, restarted in (("kept", True), ("removed", False)):
        run_dir = experiment / name
        (run_dir / "torchrunx").mkdir(parents=True)
        if restarted:
            (run_dir / train_supervisor.RESTART_LOG).write_text("restart 1 of 1: worker rank 0 failed: ...\n")
        prepared = SimpleNamespace(run=SimpleNamespace(continues=False))
        api._remove_unborn_run(prepared, run_dir, tmp_path)  # type: ignore[arg-type]
        assert run_dir.exists() == restarted, name
    assert experiment.exists()  # the kept run is still in it


def test_play_without_a_checkpoint_says_null_and_a_video_it_cannot_render_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mjfleet.render import video

    zero = ["cartpole-balance", "--agent", "zero", "--num-episodes", "1", "--gpu-ids", "None"]
    play.main(zero)
    assert json.loads(capsys.readouterr().out)["checkpoint"] is None

    def no_gl(*_: object, **__: object) -> None:
        raise ImportError("Cannot initialize a EGL device display. This likely means that your EGL driver does not")

    monkeypatch.setattr(video.WorldVideo, "__init__", no_gl)
    line = _usage_error(capsys, play.main, [*zero, "--video", "--video-path", str(tmp_path / "v.mp4")])
    assert "--video: cannot render (Cannot initialize a EGL device display." in line and "libegl1" in line


def test_play_videos_show_the_step_each_episode_ended_in(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lengths: list[int] = []

    class Recorder:  # what a frame of world 0 would show: the step its episode is at
        def __init__(self, env: MjEnv, *_: object) -> None:
            self.capture = lambda: lengths.append(int(env.episode_length_buf[0]))
            self.sink = self

        def finish(self) -> Path:
            return tmp_path / "v.mp4"

        def close(self) -> None:
            pass

    monkeypatch.setattr(play, "_recorder", Recorder)
    argv = ["cartpole-balance", "--agent", "zero", "--num-episodes", "2", "--env.num-envs", "1", "--video"]
    play.main([*argv, "--env.episode-length-s", "0.1", "--gpu-ids", "None"])  # 5 steps an episode: it times out
    assert json.loads(capsys.readouterr().out)["episodes"] == 2
    assert lengths == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]  # each episode's last step, not the next one's start


def test_a_baseline_in_a_runs_settings_names_no_checkpoint_and_keeps_off_its_video(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--agent random --checkpoint <run>`` reported the checkpoint as played and recorded over the policy's video."""
    [result] = run(small_train_config(iterations=1, log_root=tmp_path))
    run_dir = Path(result.run_dir)
    paths: list[Path] = []

    class Recorder:
        def __init__(self, env: MjEnv, camera: object, cfg: object, path: Path) -> None:
            paths.append(path)
            self.capture = lambda: None

    monkeypatch.setattr(play, "_recorder", Recorder)
    monkeypatch.setattr(play, "_close", lambda recorder, keep: paths[-1])
    argv = ["cartpole-balance", "--checkpoint", str(run_dir), "--num-episodes", "1", "--gpu-ids", "None", "--video"]
    play.main([*argv, "--agent", "random"])
    shown = json.loads(capsys.readouterr().out)
    assert shown["checkpoint"] is None and shown["settings_of"] == str(run_dir / "model_1.pt")
    play.main(argv)
    assert json.loads(capsys.readouterr().out)["checkpoint"] == str(run_dir / "model_1.pt")
    assert paths == [run_dir / "videos" / "play_random.mp4", run_dir / "videos" / "play.mp4"]


def test_a_ctrl_c_before_the_run_exists_exits_130_without_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While train parses and plans (seconds: imports, the robot's files), a Ctrl-C printed KeyboardInterrupt's
    traceback and the process died of the signal."""

    def interrupted(cfg: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "prepare", interrupted)
    with pytest.raises(SystemExit) as exc:
        train.main(["cartpole-balance", "--gpu-ids", "None"])
    assert exc.value.code == 130 and "Traceback" not in capsys.readouterr().err


def test_help_takes_each_settings_paragraph_as_one_text_to_wrap() -> None:
    """tyro kept the source's line break before a line starting with a backtick or a parenthesis: `--help` read as
    ragged short lines ("small tasks do not fill a large" / "GPU. Above 1 ...")."""
    from tyro import _docstrings

    import mjfleet.cli.args  # noqa: F401  (joins them)
    from mjfleet.train.config import TrainConfig

    text = _docstrings.get_field_docstring(TrainConfig, "workers_per_gpu", ())
    assert text is not None and "\n" not in text and "do not fill a large GPU. Above 1" in text
    from mjfleet.cli.args import _joined_paragraphs

    assert _joined_paragraphs("one\n    `two`\n\n(three)\n  four") == "one `two`\n\n(three) four"


def test_the_dry_run_of_one_worker_says_its_evaluation_and_its_stop(tmp_path: Path) -> None:
    """It said neither: the 128 evaluation environments on top and the condition a run stops at."""
    argv = ["cartpole-balance", "--gpu-ids", "None", "--dry-run", "--log-root", str(tmp_path)]
    code, out, err = run_main(train.main, [*argv, "--stop-when", "success>=0.95", "--stop-when-iterations", "3"])
    assert code == 0, err
    said = out + err
    assert (
        "in-process training on cpu, 1024 envs and 128 evaluation environments, 36,864 env-steps per iteration" in said
    )
    assert "stops sooner once --stop-when Eval/success >= 0.95 holds for 3 iterations in a row" in said
