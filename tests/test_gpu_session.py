"""``scripts/gpu_session.sh``, the driver of a GPU machine reached one command at a time: a kit that arrives in
parts over several commands, and jobs that outlive the command that started them. Runs on the CPU: nothing here
needs a GPU."""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil
import pytest
import warp

from .helpers import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_session.sh"
KIT = "mjfleet-gpu-kit"


def _session(tmp_path: Path, *args: str, out: Path | None = None, timeout: float = 120) -> tuple[int, str]:
    env = {
        **os.environ,
        "MJFLEET_JOBS": str(tmp_path / "jobs"),
        "MJFLEET_KIT_STORE": str(tmp_path / "store"),
        "MJFLEET_SITE": str(tmp_path / "site"),
        "MJFLEET_PYTHON": sys.executable,
        "MJFLEET_KIT_IMPORTS": "kitprobe",  # the package of the test kit: importing it proves SITE is on the path
        "MJFLEET_GL_ROOT": str(tmp_path / "root"),  # where the kit's EGL loader packages are unpacked (not /)
        "PYTHONDONTWRITEBYTECODE": "1",  # as on the machines here: imports alone write no bytecode
    }
    env.pop("OUT", None)
    if out is not None:
        env["OUT"] = str(out)
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout + done.stderr


def _kit(tmp_path: Path, parts: int) -> list[Path]:
    """A kit as ``gpu_kit.sh`` lays it out: ``site/`` as xz-compressed tar in parts, plus their checksums."""
    site = tmp_path / "build" / "site"
    site.mkdir(parents=True)
    (site / "kitprobe.py").write_text("__version__ = '1.0'\n")
    (site / "MJFLEET_GPU_KIT.txt").write_text("kitprobe-1.0-py3-none-any.whl\n")
    # A stand-in for the EGL loader package: a real .deb holding one library file.
    package = tmp_path / "build" / "libegl1"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        "Package: libegl1\nVersion: 1.0\nArchitecture: amd64\nMaintainer: test <t@example.com>\nDescription: t\n"
    )
    (package / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    (package / "usr" / "lib" / "x86_64-linux-gnu" / "libEGL.so.1").write_text("not really a library\n")
    gl = tmp_path / "build" / "gl"
    gl.mkdir()
    subprocess.run(["dpkg-deb", "--build", str(package), str(gl / "libegl1.deb")], check=True, capture_output=True)
    packed = tmp_path / "build" / "kit.tar.xz"
    with lzma.open(packed, "wb") as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        tar.add(site, arcname="site")
        tar.add(gl, arcname="gl")
    data = packed.read_bytes()
    size = -(-len(data) // parts)
    out = tmp_path / "kit"
    out.mkdir()
    paths, sums = [], []
    for i in range(parts):
        path = out / f"{KIT}.tar.xz.part-a{'abcdefgh'[i]}"
        path.write_bytes(data[i * size : (i + 1) * size])
        paths.append(path)
        sums.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")
    (out / f"{KIT}.sha256").write_text("".join(sums))
    return paths


def _carried(tmp_path: Path, name: str, *parts: Path) -> Path:
    """What one device call carries: some parts and the checksum file."""
    folder = tmp_path / name
    folder.mkdir()
    for part in (*parts, parts[0].parent / f"{KIT}.sha256"):
        (folder / part.name).write_bytes(part.read_bytes())
    return folder


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build a stand-in package")
def test_the_kit_arrives_over_several_commands_then_installs_once(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    parts = _kit(tmp_path, 3)
    code, out = _session(tmp_path, "receive", str(_carried(tmp_path, "call1", parts[0])), str(tmp_path / "site"))
    assert code == 3, out
    assert f"1 of 3 parts received; missing: {parts[1].name} {parts[2].name}" in out
    assert not (tmp_path / "site").exists()

    code, out = _session(tmp_path, "receive", str(_carried(tmp_path, "call2", *parts[1:])), str(tmp_path / "site"))
    assert code == 0, out
    assert "installed 1 packages into" in out and "kitprobe" in out and "CUDA available" in out
    assert "kitprobe     1.0" in out
    assert "unpacked the EGL/GL loaders (1 packages)" in out
    assert (tmp_path / "root" / "usr" / "lib" / "x86_64-linux-gnu" / "libEGL.so.1").is_file()
    # Compiled once at install, so PYTHONDONTWRITEBYTECODE cannot make every process compile the kit's sources again.
    assert list((tmp_path / "site" / "__pycache__").glob("kitprobe.*.pyc")), out

    code, out = _session(tmp_path, "receive", str(tmp_path / "nothing-carried"), str(tmp_path / "site"))
    assert code == 0 and "already installed" in out, out


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build a stand-in package")
def test_a_damaged_part_is_named_not_installed(tmp_path: Path) -> None:
    parts = _kit(tmp_path, 2)
    carried = _carried(tmp_path, "call", *parts)
    damaged = carried / parts[1].name
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"\0")
    code, out = _session(tmp_path, "receive", str(carried), str(tmp_path / "site"))
    assert code == 1, out
    assert f"{parts[1].name}: FAILED" in out and "carry it again" in out
    assert not (tmp_path / "site").exists()


def _warp_cache_archive(tmp_path: Path, warp_version: str) -> Path:
    """What ``scripts/warp_cuda_cache.py build`` writes: Warp's cache layout plus a manifest (a stand-in binary)."""
    built = tmp_path / f"built-{warp_version}"
    module = built / "wp_probe_1234567"
    module.mkdir(parents=True)
    (module / "wp_probe_1234567.sm90.cubin").write_bytes(b"cubin")
    (module / "wp_probe_1234567.meta").write_text("{}")
    archive = tmp_path / f"cache-{warp_version}" / "mjfleet-warp-cache.tar.xz"
    archive.parent.mkdir()
    pack = load_script(REPO / "scripts" / "warp_cuda_cache.py").pack
    pack(built, archive, {"warp": warp_version, "arch": 90, "modules": ["wp_probe_1234567"]})
    return archive


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build a stand-in package")
def test_a_carried_warp_kernel_cache_is_installed_once_after_the_kit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path / "warp-cache"))
    warp_cache = tmp_path / "warp-cache" / warp.config.version  # Warp keeps each version's kernels apart
    (tmp_path / "root").mkdir()
    parts = _kit(tmp_path, 2)
    call1 = _carried(tmp_path, "call1", parts[0])
    archive = _warp_cache_archive(tmp_path, warp.config.version)
    shutil.copy(archive, call1)
    code, out = _session(tmp_path, "receive", str(call1), str(tmp_path / "site"))
    assert code == 3 and not (tmp_path / "warp-cache").exists(), out  # kept until the kit is in: installing needs warp

    code, out = _session(tmp_path, "receive", str(_carried(tmp_path, "call2", parts[1])), str(tmp_path / "site"))
    assert code == 0, out
    assert f"1 modules for sm_90 installed into {warp_cache}" in out
    assert (warp_cache / "wp_probe_1234567" / "wp_probe_1234567.sm90.cubin").read_bytes() == b"cubin"

    code, out = _session(tmp_path, "receive", str(tmp_path / "nothing"), str(tmp_path / "site"))
    assert code == 0 and "already installed" in out and "modules for sm_90" not in out, out

    # Another warp-lang's kernels would never be found: refused, and the session goes on without them.
    code, out = _session(
        tmp_path, "receive", str(_warp_cache_archive(tmp_path, "0.0.1").parent), str(tmp_path / "site")
    )
    assert code == 0, out
    assert "holds kernels of warp-lang 0.0.1" in out and "kernels compile on first use" in out


def test_jobs_outlive_the_command_and_report_their_exit(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    code, text = _session(
        tmp_path, "start", "probe", sys.executable, "-c", "import mjfleet, sys; print(mjfleet.__file__); sys.exit(3)"
    )
    assert code == 0 and "started probe" in text, text
    code, text = _session(tmp_path, "wait", "60", "probe", out=out)
    assert code == 1, text
    assert "probe: exit 3 after" in text
    # The job ran from its own copy of the checkout, which a later command replacing the checkout cannot touch.
    copied = tmp_path / "jobs" / "probe.repo" / "src" / "mjfleet" / "__init__.py"
    assert str(copied) in text and str(copied) in (out / "probe.log").read_text()


def test_wait_returns_at_its_limit_and_stop_ends_the_job(tmp_path: Path) -> None:
    code, text = _session(tmp_path, "start", "sleeper", "sleep", "300")
    assert code == 0, text
    began = time.monotonic()
    code, text = _session(tmp_path, "wait", "1", "sleeper")
    assert code == 3 and "sleeper: running for" in text, text
    code, text = _session(tmp_path, "stop", "sleeper")
    assert "sleeper: exit 130 after" in text or "sleeper: gone" in text, text
    assert time.monotonic() - began < 30
    code, text = _session(tmp_path, "jobs")
    assert code == 0 and "sleeper: " in text and "running" not in text


def test_stop_reaches_a_command_that_timeout_moved_into_its_own_process_group(tmp_path: Path) -> None:
    # gpu_acceptance.sh runs each phase under timeout(1), which gives its command a process group of its own.
    token = f"{time.time_ns() % 10**6}.25"
    code, text = _session(tmp_path, "start", "phase", "bash", "-c", f"timeout 300 sleep {token}; exit 5")
    assert code == 0, text
    began = time.monotonic()
    time.sleep(0.5)
    code, text = _session(tmp_path, "stop", "phase")
    assert time.monotonic() - began < 20, text
    assert "phase: running" not in text, text
    sleepers = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", token]]
    assert not sleepers, "the command under timeout outlived stop"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["start", "../x", "true"], "NAME: letters, digits"),
        (["start", "ok"], "no command given"),
        (["wait", "soon", "x"], "usage: scripts/gpu_session.sh wait SECONDS"),
        (["wait", "5", "never-started"], "no job named never-started"),
        (["frobnicate"], "receive DIR [SITE]"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    code, text = _session(tmp_path, *args)
    assert code == 2 and message in text, text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage: scripts/gpu_kit.sh OUT_DIR"),
        (["out", "--part-mib", "0"], "positive integer"),
        (["out", "--arch", "sm90"], "compute capability like 90"),
        (["a", "b"], "one OUT_DIR"),
    ],
)
def test_kit_builder_refuses_bad_arguments_before_building(tmp_path: Path, args: list[str], message: str) -> None:
    # Building the kit downloads ~300 MB from PyPI (docs/gpu.md); only its argument checks run here.
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_kit.sh"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not any(tmp_path.iterdir())
