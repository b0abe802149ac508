"""Checkpoint files: atomic writes, refusal of truncated or foreign files, newest-checkpoint and newest-run lookup."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from mjfleet.cli import play
from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import load_checkpoint, newest_run, resolve_checkpoint, save_atomic
from mjfleet.runs.source import resolve_play_checkpoint
from mjfleet.train.plan import plan_start

from .helpers import small_train_config

PAYLOAD = {"actor_state_dict": {}, "critic_state_dict": {}, "optimizer_state_dict": {}, "iter": 7}


def test_save_then_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "model_7.pt"
    save_atomic({**PAYLOAD, "x": torch.arange(3)}, path)
    data = load_checkpoint(path)
    assert data["iter"] == 7 and torch.equal(data["x"], torch.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["model_7.pt"]


def test_a_checkpoint_is_as_readable_as_any_file_the_process_creates(tmp_path: Path) -> None:
    """A team's shared run directory: checkpoints and ONNX exports came out 0o600 (``mkstemp``'s), readable by their
    writer alone, beside 0o644 event files."""
    import stat

    path = tmp_path / "model_7.pt"
    save_atomic(PAYLOAD, path)
    (tmp_path / "plain").write_text("")
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE((tmp_path / "plain").stat().st_mode)


def test_a_failed_save_keeps_the_previous_checkpoint_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    # save_atomic writes through mjfleet.files.write_atomic, the project's one atomic writer.
    path = tmp_path / "model_7.pt"
    save_atomic(PAYLOAD, path)
    before = path.read_bytes()
    with pytest.raises(Exception, match="pickle"):
        save_atomic({**PAYLOAD, "bad": lambda: None}, path)  # torch.save fails half-way
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model_7.pt"]


def test_truncated_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model_1.pt"
    save_atomic(PAYLOAD, path)
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(UsageError, match="corrupt or truncated"):
        load_checkpoint(path)


def test_an_onnx_export_or_another_file_is_not_called_corrupt(tmp_path: Path) -> None:
    # A new user resumes from the policy.onnx the run exported: the file is fine, it is the wrong kind.
    for name in ("policy.onnx", "model_3.onnx.json"):
        (tmp_path / name).write_bytes(b"onnx")
        with pytest.raises(UsageError, match="is an ONNX export: it holds the policy alone"):
            load_checkpoint(tmp_path / name)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UsageError, match=r"is not a checkpoint: name a model_<it>\.pt file or its run directory$"):
        load_checkpoint(tmp_path / "notes.txt")  # torch's exception name (IndexError for a YAML file) said nothing


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model_1.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(UsageError, match="not an mjfleet"):
        load_checkpoint(path)
    torch.save({"learner": "skrl-sac", "iter": 3}, path)  # an skrl checkpoint without its agent's modules
    with pytest.raises(UsageError, match=r"of learner skrl-sac lacks skrl, which its checkpoints hold \(a partial"):
        load_checkpoint(path)
    text = tmp_path / "notes.pt"
    text.write_text("hello")
    with pytest.raises(UsageError):
        load_checkpoint(text)


def test_resolve_picks_newest_by_iteration_not_name(tmp_path: Path) -> None:
    for i in (2, 10, 9):
        save_atomic({**PAYLOAD, "iter": i}, tmp_path / f"model_{i}.pt")
    (tmp_path / ".model_11.pt.abc.tmp").write_bytes(b"partial")
    assert resolve_checkpoint(tmp_path).name == "model_10.pt"
    with pytest.raises(UsageError, match="no model_"):
        resolve_checkpoint(_empty(tmp_path))
    with pytest.raises(UsageError, match="does not exist"):
        resolve_checkpoint(tmp_path / "nope.pt")


def _empty(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_play_and_resume_pick_the_same_newest_run_where_names_and_modification_times_disagree(tmp_path: Path) -> None:
    experiment = tmp_path / "cartpole_balance"  # <log_root>/<experiment> of cartpole-balance
    now = time.time()
    # (run directory, its checkpoint's iteration, modified how long ago): the run started last was written first.
    for name, iteration, age_s in (
        ("2026-01-01_09-00-00", 5, 0),
        ("2026-01-01_10-00-00-9", 3, 3600),
        ("2026-01-01_10-00-00-10", 2, 7200),  # the 11th run started in that second: digits compare as numbers
    ):
        path = experiment / name / f"model_{iteration}.pt"
        save_atomic({**PAYLOAD, "iter": iteration}, path)
        for touched in (path, path.parent):
            os.utime(touched, (now - age_s, now - age_s))
    (experiment / "2026-01-02_00-00-00").mkdir()  # a run being created: no checkpoint yet
    newest = experiment / "2026-01-01_10-00-00-10"
    (newest / "params").mkdir()
    (newest / "params" / "env.yaml").write_text("episode_length_s: 3.5\n")
    expected = newest / "model_2.pt"
    assert max(experiment.glob("*/model_*.pt"), key=lambda p: p.stat().st_mtime) != expected

    assert newest_run(experiment) == newest
    # train --resume <experiment dir>
    assert plan_start(small_train_config(log_root=tmp_path / "logs", resume=experiment)).checkpoint == expected
    # play without --checkpoint, and play --checkpoint <experiment dir>: that run's checkpoint and settings
    for extra in ([], ["--checkpoint", str(experiment)]):
        _, cfg, _ = play.parse_args(["cartpole-balance", "--log-root", str(tmp_path), *extra])
        assert cfg.checkpoint is not None and resolve_play_checkpoint(cfg.checkpoint) == expected
        assert cfg.env.episode_length_s == 3.5


def test_a_checkpoint_edited_by_hand_is_one_line(tmp_path: Path) -> None:
    """Its iteration not a count (a run went on at iteration -4), or layers its networks do not have (torch's
    "Missing key(s)" came as a traceback after the run directory existed)."""
    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    from .conftest import make_env

    for it in ("abc", -5, True):
        path = tmp_path / "model_7.pt"
        save_atomic({**PAYLOAD, "iter": it}, path)
        with pytest.raises(UsageError, match=r"model_7.pt: its iteration .* is not a count of iterations$"):
            load_checkpoint(path)
    cfg = small_train_config(num_envs=8, steps=4)
    runner = Runner(make_env(num_envs=8), cfg.agent, DistributedContext(device="cpu"), tmp_path)
    saved = runner.save_checkpoint()
    assert saved is not None
    data = torch.load(saved, weights_only=True)
    data["actor_state_dict"].pop(next(iter(data["actor_state_dict"])))
    torch.save(data, saved)
    other = Runner(make_env(num_envs=8), cfg.agent, DistributedContext(device="cpu"), None)
    with pytest.raises(UsageError, match=r"model_0.pt: its networks are not this run's \(Missing key\(s\)"):
        other.load(str(saved))
