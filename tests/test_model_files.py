"""A run records the text of the robot files it loaded; ``play`` and a continuation say when they load another."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from mjfleet.runs.model_files import ModelFile, differences, fingerprint, record, record_entry, recorded

FIXTURE = Path(__file__).with_name("fixtures") / "menagerie"


def test_a_file_is_told_apart_by_its_text_not_its_place(tmp_path: Path) -> None:
    first, moved = tmp_path / "a" / "go1.xml", tmp_path / "b" / "go1.xml"
    for path in (first, moved):
        path.parent.mkdir()
        path.write_text("<mujoco/>")
    trained = fingerprint([first])
    assert trained == [ModelFile(str(first), hashlib.sha256(b"<mujoco/>").hexdigest())]
    assert differences(trained, fingerprint([moved])) == []
    moved.write_text("<mujoco><option timestep='0.001'/></mujoco>")
    (line,) = differences(trained, fingerprint([moved]))
    assert line.startswith(f"the policy trained on {first} (sha256 {trained[0].sha256[:12]}), not on {moved}")


def test_the_record_is_written_once(tmp_path: Path) -> None:
    assert recorded(tmp_path) is None
    files = [ModelFile("/robots/g1.xml", "ab" * 32)]
    record(tmp_path, files)
    record(tmp_path, [ModelFile("/robots/g1.xml", "cd" * 32)])  # a continuation keeps what the run trained on
    assert recorded(tmp_path) == files


def test_a_run_records_its_robot_file_and_play_says_when_it_loads_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mjfleet.cli.play import main as play_main
    from mjfleet.cli.train import main as train_main

    from .helpers import run_main

    root = tmp_path / "menagerie"
    shutil.copytree(FIXTURE, root)
    monkeypatch.setenv("MENAGERIE_ROOT", str(root))
    robot = root / "unitree_go1" / "go1.xml"
    argv = ["unitree-go1-velocity-flat", "--gpu-ids", "None", "--env.num-envs", "8", "--agent.num-steps-per-env", "4"]
    argv += ["--agent.max-iterations", "1", "--agent.eval-envs", "0", "--log-root", str(tmp_path / "logs")]
    code, out, err = run_main(train_main, argv)
    assert code == 0, err
    digest = hashlib.sha256(robot.read_bytes()).hexdigest()
    assert f"model file: {robot} (sha256 {digest[:12]})" in " ".join((out + err).split())
    (run_dir,) = (tmp_path / "logs" / "unitree_go1_velocity_flat").iterdir()
    from mjfleet.tasks import registry

    record = registry.all_robots()["unitree_go1"]
    ((_, text),) = record_entry("robot", record).items()
    record_digest = hashlib.sha256(text.encode()).hexdigest()
    assert f"model from robot record 'unitree_go1' (sha256 {record_digest[:12]})" in " ".join((out + err).split())
    assert yaml.safe_load((run_dir / "params" / "model_files.yaml").read_text()) == [
        {"path": str(robot), "sha256": digest},
        {"path": "robot record 'unitree_go1'", "sha256": record_digest},
    ]

    play = ["unitree-go1-velocity-flat", "--checkpoint", str(run_dir), "--gpu-ids", "None", "--num-episodes", "1"]
    play += ["--env.episode-length-s", "0.1"]
    code, out, err = run_main(play_main, play)
    assert code == 0, err
    assert "the policy trained on" not in out + err
    robot.write_text(robot.read_text().replace("<mujoco", "<!-- edited -->\n<mujoco", 1))
    code, out, err = run_main(play_main, play)
    assert code == 0, err
    said = " ".join((out + err).split())
    assert f"the policy trained on {robot} (sha256 {digest[:12]}), not on {robot} (sha256" in said
    assert "robot record" not in said
    # A record changed in its package (its servos, home pose, zones, joints) is another robot too.
    import dataclasses

    monkeypatch.setitem(registry._ROBOTS, "unitree_go1", dataclasses.replace(record, deviation_joints=()))
    code, out, err = run_main(play_main, play)
    assert code == 0, err
    said = " ".join((out + err).split())
    changed = f"the policy trained on robot record 'unitree_go1' (sha256 {record_digest[:12]}), not on robot record"
    assert changed in said
