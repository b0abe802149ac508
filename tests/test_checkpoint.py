"""Checkpoint files: atomic writes, refusal of truncated or foreign files, newest-checkpoint lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint import load_checkpoint, resolve_checkpoint, save_atomic

PAYLOAD = {"actor_state_dict": {}, "critic_state_dict": {}, "optimizer_state_dict": {}, "iter": 7}


def test_save_then_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "model_7.pt"
    save_atomic({**PAYLOAD, "x": torch.arange(3)}, path)
    data = load_checkpoint(path)
    assert data["iter"] == 7 and torch.equal(data["x"], torch.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["model_7.pt"]


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


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model_1.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(UsageError, match="not an mjfleet"):
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
