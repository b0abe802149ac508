"""``scripts/compare_mjlab.sh --bundle`` (mjlab's offline site folder) and ``MJLAB_SITE``: which packages a bundle
keeps, and the one-line refusals. The package index is not used: a ``uv`` on ``PATH`` answers ``pip compile`` with a
fixed resolution and records what ``pip install`` was asked for."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_mjlab.sh"

RESOLVED = """mjlab==1.6.0
mujoco==3.11.0
mujoco-warp==3.11.0
nvidia-cublas==13.4.1.3
PyYAML==6.0.4
rsl-rl-lib==5.4.2
torch==2.11.0
triton==3.6.0
warp-lang==1.19.0
"""

FAKE_UV = f"""#!/usr/bin/env bash
# pip compile ... -o FILE: write the fixed resolution there; pip install ... -r FILE: copy FILE to $FAKE_UV_LOG.
out=""; req=""
while [ $# -gt 0 ]; do
  case "$1" in -o) out="$2"; shift ;; -r) req="$2"; shift ;; esac
  shift
done
if [ -n "$out" ]; then printf '%s' '{RESOLVED}' >"$out"; fi
if [ -n "$req" ]; then cp "$req" "$FAKE_UV_LOG"; fi
"""


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    uv = bin_dir / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_UV_LOG": str(tmp_path / "installed.txt")}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env={**environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_bundle_leaves_out_torch_cuda_and_what_the_site_beside_it_holds(tmp_path: Path) -> None:
    beside = tmp_path / "mjfleet-site"
    for dist in ("warp_lang-1.19.0", "pyyaml-6.0.4", "mujoco-4.0.0"):  # mujoco at another version: kept
        (beside / f"{dist}.dist-info").mkdir(parents=True)
    result = _run(tmp_path, "--bundle", str(tmp_path / "bundle"), "--python", "3.12", "--beside", str(beside))
    assert result.returncode == 0, result.stderr
    installed = (tmp_path / "installed.txt").read_text().split()
    assert installed == ["mjlab==1.6.0", "mujoco==3.11.0", "mujoco-warp==3.11.0", "rsl-rl-lib==5.4.2"]
    assert "4 packages" in result.stdout


def test_without_beside_only_torch_and_the_cuda_libraries_stay_out(tmp_path: Path) -> None:
    result = _run(tmp_path, "--bundle", str(tmp_path / "bundle"))
    assert result.returncode == 0, result.stderr
    installed = (tmp_path / "installed.txt").read_text().split()
    assert "warp-lang==1.19.0" in installed and "PyYAML==6.0.4" in installed
    assert not [r for r in installed if r.startswith(("torch==", "triton==", "nvidia-"))]


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = _run(tmp_path, "--bundle", str(tmp_path / "bundle"), "--beside", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.strip().endswith("is not a folder")
    assert not (tmp_path / "bundle").exists()
    empty = tmp_path / "empty-site"
    empty.mkdir()
    no_mjlab = _run(tmp_path, "--device", "cpu", MJLAB_SITE=str(empty))
    assert no_mjlab.returncode == 2 and "has no mjlab/ (make it with --bundle)" in no_mjlab.stderr
    assert len(no_mjlab.stderr.strip().splitlines()) == 1
    unknown = _run(tmp_path, "--bogus")
    assert unknown.returncode == 2 and "unknown option --bogus" in unknown.stderr
