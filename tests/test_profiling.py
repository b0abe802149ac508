"""Where an iteration's time goes: parts timed exclusive of the parts inside them, nothing timed while the profile is
off, and ``bench --profile`` showing a real training iteration part by part."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from mjfleet.cli import bench
from mjfleet.profiling import Profile


def test_a_part_counts_its_own_time_not_the_parts_inside_it() -> None:
    profile = Profile()
    profile.start("cpu")
    with profile.part("outer"):
        time.sleep(0.02)
        with profile.part("inner"):
            time.sleep(0.03)
    profile.end_iteration()
    (parts,) = profile.iterations
    assert 0.02 <= parts["outer"] < 0.03 and 0.03 <= parts["inner"] < 0.04
    assert parts["other"] < 0.005  # the iteration is its parts


def test_nothing_is_timed_while_the_profile_is_off() -> None:
    profile = Profile()
    assert isinstance(profile.part("update"), nullcontext)
    profile.end_iteration()
    assert profile.iterations == []


def test_bench_profile_shows_the_training_and_the_evaluation_part_by_part(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    argv = ["go1-velocity-flat", "--gpu-ids", "None", "--profile", "--train-num-envs", "64", "--train-iterations", "3"]
    bench.main([*argv, "--json", str(out)])
    report = json.loads(out.read_text())
    parts = report["parts_s"]
    for name in ("policy (training)", "physics (training)", "update", "storage and returns"):
        assert parts[name] > 0, name
    # On the CPU the evaluation runs in a simulation of its own: its physics and policy are parts of their own.
    assert parts["physics (evaluation)"] > 0 and parts["policy (evaluation)"] > 0
    iteration = report["num_envs"] * report["steps_per_env"] / report["env_steps_per_s"]
    assert 0.9 * iteration < sum(parts.values()) < 1.5 * iteration


def test_bench_profile_says_which_evaluation_counts_in_the_trainings_parts_and_takes_one_backend(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Cart-pole's evaluation steps once per training step, inside the training simulation: its 16 environments'
    # policy calls and physics are in the training's parts, which the title now says.
    argv = ["cartpole-balance", "--gpu-ids", "None", "--profile", "--train-num-envs", "64", "--train-iterations", "2"]
    bench.main([*argv, "--backends", "warp"])
    out = " ".join(capsys.readouterr().out.split())
    assert "64 environments x" in out and "16 evaluation environments in the training's parts" in out
    assert "warp)" in out  # the backend named, not the device's default
    with pytest.raises(SystemExit) as caught:
        bench.main([*argv, "--backends", "mujoco", "warp"])
    assert caught.value.code == 2


def test_bench_without_the_robots_files_is_one_line_whichever_table_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # With --skip-steps the missing files were a failed training row and exit code 1.
    monkeypatch.delenv("MENAGERIE_ROOT", raising=False)
    monkeypatch.setenv("MENAGERIE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MENAGERIE_BASE_URL", (tmp_path / "nowhere").as_uri())  # fails at once, no network
    with pytest.raises(SystemExit) as caught:
        bench.main(["yam-reach", "--gpu-ids", "None", "--skip-steps", "--train-iterations", "2"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "Menagerie robot 'i2rt_yam' is not on this machine" in err and "Traceback" not in err
