"""``bench``: both tables come out of real measurements (tiny sizes; the figures themselves are not asserted)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mjfleet.cli import bench

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="launches torchrunx workers"),
]

NUMBER = r"[\d,]+(?:\.\d+)?"


def _row(out: str, label: str) -> list[str]:
    """The cells of the table row whose first cell is ``label``."""
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if cells and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in:\n{out}")


def test_bench_prints_step_and_scaling_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # launched runs write under ./logs/bench
    monkeypatch.delenv("TORCHRUNX_LOG_DIR", raising=False)
    argv = ["cartpole-balance", "--gpu-ids", "None", "--num-envs", "16", "--steps", "3"]
    argv += ["--workers", "1", "2", "--launcher-overhead", "--train-num-envs", "32", "--train-iterations", "2"]
    bench.main(argv)
    out = capsys.readouterr().out

    steps = _row(out, "16")
    assert len(steps) == 7 and all(re.fullmatch(NUMBER, c) for c in steps[1:5])
    assert all(c.endswith("%") for c in steps[5:])

    rows = {label: _row(out, label) for label in ("1", "1 (torchrunx)", "2")}
    for label, cells in rows.items():
        assert len(cells) == 8, cells
        assert cells[1] == "32"
        assert re.fullmatch(NUMBER, cells[2]) and float(cells[2].replace(",", "")) > 0, label
        assert float(cells[7]) > 0  # wall seconds
    assert rows["1"][3] == "1.00x" and rows["1"][6] == "0.0%"  # the baseline, no collectives
    assert rows["1 (torchrunx)"][6] == "0.0%"  # one launched worker has no peers either
    assert float(rows["2"][6].rstrip("%")) > 0  # two workers do synchronise
    assert "Traceback" not in out
