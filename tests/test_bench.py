"""``bench``: both tables come out of real measurements (tiny sizes; the figures themselves are not asserted)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mjfleet.cli import bench
from mjfleet.errors import UsageError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="launches torchrunx workers"),
]

NUMBER = r"[\d,]+(?:\.\d+)?"


def _rows(out: str, label: str) -> list[list[str]]:
    """The cells of every table row whose first cell is ``label``."""
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if cells and cells[0] == label:
            rows.append(cells)
    return rows


def _row(out: str, label: str) -> list[str]:
    """The cells of the first table row whose first cell is ``label``."""
    rows = _rows(out, label)
    assert rows, f"no row {label!r} in:\n{out}"
    return rows[0]


def test_bench_prints_step_and_scaling_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # where launched runs were once left
    monkeypatch.delenv("TORCHRUNX_LOG_DIR", raising=False)
    argv = ["cartpole-balance", "--gpu-ids", "None", "--num-envs", "16", "--steps", "3"]
    # No --launcher-overhead: it adds one more launch (~20 s here) through the same launched path as row "2".
    argv += ["--workers", "1", "2", "--train-num-envs", "32", "--train-iterations", "2"]
    bench.main([*argv, "--backends", "mujoco"])
    out = capsys.readouterr().out

    steps = _row(out, "16")
    assert len(steps) == 6 and steps[1].startswith("mujoco (")
    assert all(re.fullmatch(NUMBER, c) for c in steps[2:4]) and steps[4].endswith("%") and steps[5] == "-"

    rows = {label: _row(out, label) for label in ("1", "2")}
    for label, cells in rows.items():
        assert len(cells) == 9, cells
        assert cells[1] == "mujoco" and cells[2] == "32"
        assert re.fullmatch(NUMBER, cells[3]) and float(cells[3].replace(",", "")) > 0, label
        assert float(cells[8]) > 0  # wall seconds
    assert rows["1"][4] == "1.00x" and rows["1"][7] == "0.0%"  # the baseline, no collectives
    assert float(rows["2"][7].rstrip("%")) > 0  # two workers do synchronise
    assert "Traceback" not in out
    assert not list(tmp_path.iterdir()), "the launched measurements' run directories are gone with them"


def test_bench_shows_both_backends_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--num-envs", "16", "--steps", "3", "--workers", "1"]
    bench.main([*argv, "--train-num-envs", "16", "--train-iterations", "2", "--backends", "warp", "mujoco"])
    out = capsys.readouterr().out
    backends = [cells[1] for cells in _rows(out, "16")]
    assert backends[:2] == ["warp eager", "warp graph"] and backends[2].startswith("mujoco (")
    mujoco = _rows(out, "16")[2]
    assert re.fullmatch(NUMBER + "x", mujoco[5])  # its env step against Warp's graph-captured one
    assert [cells[1] for cells in _rows(out, "1")] == ["warp", "mujoco"]
    assert [cells[4] for cells in _rows(out, "1")] == ["1.00x", "1.00x"]  # each backend its own baseline


def test_bench_refuses_a_json_path_it_cannot_write_before_measuring(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(SystemExit) as caught:
        bench.main(["cartpole-balance", "--gpu-ids", "None", "--json", str(blocked / "out.json")])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert f"--json {blocked / 'out.json'}: cannot create its folder" in err and "Traceback" not in err


def test_bench_refuses_empty_lists_of_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    """``--num-envs`` with no value crashed the contact-cost table (an IndexError) and printed empty tables else."""
    for argv in (["--contact-costs", "--num-envs"], ["--gpu-ids", "None", "--num-envs", "--steps", "2"], ["--workers"]):
        with pytest.raises(SystemExit) as exc:
            bench.main(["cartpole-balance", *argv])
        assert exc.value.code == 2
        assert "--num-envs and --workers need at least one value each" in capsys.readouterr().err


def test_the_backends_a_device_runs_and_none_is_one_line() -> None:
    backends_for = bench.backends_for
    assert backends_for("cpu", ("warp", "mujoco", "warp")) == ["warp", "mujoco"]
    assert backends_for("cuda", ("warp", "mujoco")) == ["warp"]  # the default on a GPU: MuJoCo C is left out
    with pytest.raises(UsageError, match="--backends mujoco: MuJoCo C runs on the CPU; measure it with --gpu-ids None"):
        backends_for("cuda", ("mujoco",))  # it measured nothing and exited 0
