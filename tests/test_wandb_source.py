"""`wandb:<entity>/<project>/<run>[:<checkpoint>]` references: parsing, choosing and downloading files, one-line
errors. The W&B server is replaced by a stand-in of the public API's run object (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mjfleet.cli import play
from mjfleet.errors import UsageError
from mjfleet.runs.source import LOCAL_DIR_ENV, ApiRunFiles, WandbRef, fetch, parse_ref

from .helpers import run_main


class _File:
    def __init__(self, store: dict[str, bytes], name: str) -> None:
        self.store, self.name = store, name

    def download(self, root: str, replace: bool = False) -> None:
        target = Path(root) / self.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.store[self.name])


class _ApiRun:
    """What mjfleet uses of ``wandb.apis.public.Run``: ``files()`` and ``file(name).download(root, replace)``."""

    def __init__(self, store: dict[str, bytes]) -> None:
        self.store = store

    def files(self) -> list[_File]:
        return [_File(self.store, n) for n in self.store]

    def file(self, name: str) -> _File:
        return _File(self.store, name)


STORE = {
    "model_50.pt": b"50",
    "model_100.pt": b"100",
    "model_100.onnx": b"onnx",
    "model_100.onnx.json": b"{}",
    "params/env.yaml": b"num_envs: 4\n",
    "output.log": b"",
}


def test_parse_ref() -> None:
    assert parse_ref("wandb:me/proj/abc123") == WandbRef("me", "proj", "abc123", None)
    assert parse_ref("wandb:me/proj/abc123:model_7.pt").file == "model_7.pt"
    assert parse_ref("wandb:me/proj/abc123:7").file == "model_7.pt"
    for bad in ("wandb:proj/abc", "wandb:me/proj/abc/x", "wandb:me//abc", "wandb:me/proj/abc:../x.pt"):
        with pytest.raises(UsageError):
            parse_ref(bad)


def test_fetch_newest_named_and_missing(tmp_path: Path) -> None:
    files = ApiRunFiles(_ApiRun(STORE))
    newest = fetch("wandb:me/proj/r1", tmp_path, files)
    assert newest == tmp_path / "me" / "proj" / "r1" / "model_100.pt"
    assert newest.read_bytes() == b"100"
    assert (newest.parent / "params" / "env.yaml").read_bytes() == b"num_envs: 4\n"
    assert fetch("wandb:me/proj/r1:50", tmp_path, files).read_bytes() == b"50"
    onnx = fetch("wandb:me/proj/r1:model_100.onnx", tmp_path, files)
    assert onnx.with_name("model_100.onnx.json").is_file()
    with pytest.raises(UsageError, match=r"has no file model_7\.pt \(checkpoints: model_50\.pt, model_100\.pt"):
        fetch("wandb:me/proj/r1:7", tmp_path, files)
    # The newest are listed, whatever order the run's storage lists them in (as text: model_300 before model_50).
    many = ApiRunFiles(_ApiRun({f"model_{i}.pt": b"" for i in sorted(map(str, range(50, 350, 50)))}))
    with pytest.raises(
        UsageError, match=r"\(checkpoints: model_100\.pt, model_150\.pt, model_200\.pt, model_250\.pt, model_300\.pt\)"
    ):
        fetch("wandb:me/proj/r1:7", tmp_path, many)
    with pytest.raises(UsageError, match=r"holds no model_<iteration>\.pt"):
        fetch("wandb:me/proj/r1", tmp_path, ApiRunFiles(_ApiRun({"output.log": b""})))


def test_bad_references_exit_2_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path))
    for ref, message in (
        ("wandb:nope", "is not wandb:<entity>/<project>/<run>"),
        ("wandb:me/proj/missing", f"no W&B run missing below {LOCAL_DIR_ENV}"),
    ):
        code, _, err = run_main(play.main, ["cartpole-balance", "--checkpoint", ref, "--log-root", str(tmp_path)])
        assert code == 2
        assert message in err
        assert len(err.strip().splitlines()) == 1, err


def test_an_offline_run_of_several_starts_offers_the_files_of_every_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continued run logs each start to its own offline directory of the same run id: a checkpoint of the first
    start is found, and a file both hold is the newest start's."""
    for stamp, files in (
        ("20261205_100000", {"model_1.pt": b"1", "params/env.yaml": b"old"}),
        ("20261205_110000", {"model_2.pt": b"2", "params/env.yaml": b"new"}),
    ):
        for name, data in files.items():
            path = tmp_path / "run" / "wandb" / f"offline-run-{stamp}-abc123" / "files" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path))
    assert fetch("wandb:me/proj/abc123:model_1.pt", tmp_path / "down").read_bytes() == b"1"
    newest = fetch("wandb:me/proj/abc123", tmp_path / "down")
    assert newest.name == "model_2.pt" and (newest.parent / "params" / "env.yaml").read_bytes() == b"new"


def test_a_listing_that_fails_midway_is_one_line(tmp_path: Path) -> None:
    class Broken:
        def names(self) -> list[str]:
            raise ConnectionError("Connection reset by peer")

        def download(self, name: str, dest: Path) -> Path:
            raise AssertionError

    with pytest.raises(UsageError, match="cannot list the files of W&B run me/proj/abc123: Connection reset"):
        fetch("wandb:me/proj/abc123", tmp_path, files=Broken())
