"""`--agent.logger wandb` writes a W&B run beside TensorBoard, honours WANDB_MODE=offline (no network), stores the
checkpoints in the run, and `wandb:<entity>/<project>/<run>` brings them back for `--resume` and `play`."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import struct
import time
from pathlib import Path

import pytest

from mjfleet.cli import play, train
from mjfleet.runs.source import LOCAL_DIR_ENV
from mjfleet.runtime.context import DistributedContext
from mjfleet.train.config import wandb_can_log
from mjfleet.train.worker import train_worker

from .helpers import make_run_dir, run_main, small_train_config


def _history_keys(records: Path) -> set[str]:
    """The metric names of the history records in an offline W&B run's ``.wandb`` file: a 7-byte header, then
    LevelDB's log format (32 KiB blocks of chunks, each a 7-byte header: CRC, length, kind; kinds 1 whole, 2 first,
    3 middle, 4 last), each record a ``wandb_internal_pb2.Record``. W&B no longer ships a reader of its own."""
    from wandb.proto import wandb_internal_pb2

    data = records.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    block, pos, payload, keys = 32768, 7, b"", set()
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        payload = chunk if kind in (1, 2) else payload + chunk
        if kind in (1, 4) and payload:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            if record.WhichOneof("record_type") == "history":
                keys.update(item.key or "/".join(item.nested_key) for item in record.history.item)
    return keys


@pytest.mark.slow
def test_wandb_offline_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="wandb is not installed (the offline GPU kit leaves it out)")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = small_train_config(iterations=2, log_root=tmp_path, video_interval=2, video_length=4)
    cfg.video_width, cfg.video_height = 64, 48
    cfg.agent = dataclasses.replace(cfg.agent, logger="wandb", wandb_project="mjfleet-tests")
    run_dir = make_run_dir(tmp_path, "wandb")
    train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    offline_runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1
    assert list(offline_runs[0].glob("*.wandb"))
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    files = offline_runs[0] / "files"
    for name in ("model_1.pt", "model_2.pt", "model_2.onnx", "model_2.onnx.json", "params/env.yaml"):
        assert (files / name).is_file(), name
    assert list((files / "media" / "videos").rglob("*.mp4")), "the training clip reaches W&B"
    # W&B's mirror watches the run directory, its own folder inside: a saved event file was copied again and again.
    assert not list(files.rglob("events.out.tfevents.*"))
    # The scalars reach W&B through its mirror of TensorBoard's writer, which a W&B release could change.
    (records,) = offline_runs[0].glob("*.wandb")
    logged = _history_keys(records)
    assert {"Train/mean_reward", "Episode/success", "Loss/value", "Perf/env_steps_per_s"} <= logged, sorted(logged)

    # Round trip through the run's files, read from the offline run directory instead of the server.
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path))
    run_id = offline_runs[0].name.rsplit("-", 1)[1]
    code, _, err = run_main(
        train.main,
        [
            "cartpole-balance",
            "--resume",
            f"wandb:someone/mjfleet-tests/{run_id}:1",
            *("--agent.max-iterations", "1", "--agent.num-steps-per-env", "8", "--env.num-envs", "16"),
            *("--gpu-ids", "None", "--log-root", str(tmp_path / "resumed"), "--agent.experiment-name", "resumed"),
        ],
    )
    assert code == 0, err
    downloaded = tmp_path / "resumed" / ".wandb_downloads" / "someone" / "mjfleet-tests" / run_id
    assert (downloaded / "model_1.pt").read_bytes() == (run_dir / "model_1.pt").read_bytes()
    (resumed,) = (tmp_path / "resumed" / "resumed").iterdir()
    assert [p.name for p in resumed.glob("model_*.pt")] == ["model_2.pt"]  # iteration 1 + 1 more

    code, out, err = run_main(
        play.main,
        [
            "cartpole-balance",
            *("--checkpoint", f"wandb:someone/mjfleet-tests/{run_id}:model_2.onnx"),
            *("--num-episodes", "2", "--gpu-ids", "None", "--log-root", str(tmp_path / "played")),
        ],
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["checkpoint"].endswith(f"{run_id}/model_2.onnx")
    assert result["episodes"] == 2


def test_wandb_logger_without_wandb_installed_is_one_line_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else find_spec(name, *a))
    argv = ["cartpole-balance", "--gpu-ids", "None", "--agent.logger", "wandb", "--log-root", str(tmp_path)]
    code, _, err = run_main(train.main, argv)
    assert code == 2, err
    assert err.strip().splitlines() == [
        "error: --agent.logger wandb: this Python cannot import wandb (install it, or log to tensorboard)"
    ]
    assert not any(tmp_path.iterdir()), "a run directory was made"


def test_wandb_logger_without_an_api_key_is_one_line_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It passed --dry-run and failed in the worker, after the run directory existed."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("WANDB_MODE", "WANDB_API_KEY", "NETRC", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    argv = ["cartpole-balance", "--gpu-ids", "None", "--agent.logger", "wandb", "--log-root", str(tmp_path / "logs")]
    code, _, err = run_main(train.main, [*argv, "--dry-run"])
    assert code == 2, err
    assert err.strip().splitlines() == [
        "error: --agent.logger wandb: no W&B API key here (run `wandb login`, or set WANDB_API_KEY; WANDB_MODE=offline"
        " logs without an account)"
    ]
    assert not (tmp_path / "logs").exists()
    (home / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password k\n")  # what `wandb login` writes
    assert run_main(train.main, [*argv, "--dry-run"])[0] == 0
    assert wandb_can_log({"WANDB_MODE": "offline"}) and wandb_can_log({"WANDB_API_KEY": "k", "HOME": str(tmp_path)})
    assert not wandb_can_log({"HOME": str(home), "WANDB_BASE_URL": "https://wandb.example.org"})  # another host


@pytest.mark.slow
def test_every_start_of_a_run_logs_to_its_one_wandb_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A continuation or restart of a run directory logs to the W&B run its first start opened (each start opened
    another, splitting the history and leaving the first reference on an old checkpoint). Offline, it says how the
    run reaches W&B (its wandb: reference finds nothing before)."""
    pytest.importorskip("wandb", reason="wandb is not installed (the offline GPU kit leaves it out)")
    from mjfleet.rl.reporting.metrics import WANDB_RUN_ID_FILE, MetricsWriter

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    caplog.set_level(logging.INFO, logger="mjfleet")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ids = []
    for start in range(2):
        if start:
            time.sleep(1.0)  # W&B names an offline start's folder to the second: two in one second share it
        writer = MetricsWriter(run_dir, use_wandb=True, project="mjfleet-tests")
        ids.append(writer._wandb_run.id)
        writer.close()
    assert ids[0] == ids[1] == (run_dir / WANDB_RUN_ID_FILE).read_text().strip()
    assert len(list((run_dir / "wandb").glob(f"offline-run-*-{ids[0]}"))) == 2
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"W&B run {ids[0]} offline")]
    assert len(said) == 2
    assert all("`wandb sync " in line and "then resume or play it with wandb:" in line for line in said)


def test_a_wandb_run_that_cannot_start_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wandb = pytest.importorskip("wandb", reason="wandb is not installed (the offline GPU kit leaves it out)")
    from mjfleet.errors import UsageError
    from mjfleet.rl.reporting.metrics import MetricsWriter

    def refuse(**_: object) -> None:
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "init", refuse)
    with pytest.raises(UsageError, match=r"cannot start the W&B run: No API key configured\. .*WANDB_MODE=offline"):
        MetricsWriter(tmp_path, use_wandb=True)


def test_a_wandb_run_that_cannot_reach_the_servers_may_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that timed out is exit code 1 (a restart may get through), not 2 (bad input, never retried)."""
    wandb = pytest.importorskip("wandb", reason="wandb is not installed (the offline GPU kit leaves it out)")
    from mjfleet.errors import is_retryable
    from mjfleet.rl.reporting.metrics import MetricsWriter

    def time_out(**_: object) -> None:
        raise wandb.errors.CommError("Run initialization has timed out after 90.0 sec.")

    monkeypatch.setattr(wandb, "init", time_out)
    with pytest.raises(ConnectionError, match=r"cannot reach W&B: Run initialization has timed out") as caught:
        MetricsWriter(tmp_path, use_wandb=True)
    assert is_retryable(caught.value)


def test_storing_files_in_wandb_prints_no_link_notice_and_passes_other_warnings(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """W&B's ``save`` warns after each file it links (wandb's own LinkStats emits it here, as ``save`` does)."""
    pytest.importorskip("wandb", reason="wandb is not installed (the offline GPU kit leaves it out)")
    from wandb.errors import term
    from wandb.errors.term import termwarn
    from wandb.sdk.lib.filesystem import LinkStats

    from mjfleet.rl.reporting.metrics import _without_link_notices  # pyright: ignore[reportPrivateUsage]

    # An earlier run with WANDB_SILENT=true in this process left wandb's terminal silent.
    monkeypatch.setattr(term, "_silent", False)
    monkeypatch.setattr(term, "_show_warnings", True)
    capfd.readouterr()
    with _without_link_notices():
        LinkStats(n_symlink=1).emit_warnings()
        LinkStats(n_hardlink=3).emit_warnings()
        termwarn("the disk is full")
    err = capfd.readouterr().err
    assert "into the W&B run directory" not in err and "the disk is full" in err, err
    LinkStats(n_symlink=1).emit_warnings()
    assert "Symlinked 1 file into the W&B run directory" in capfd.readouterr().err  # the check sees it
