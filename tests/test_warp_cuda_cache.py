"""``scripts/warp_cuda_cache.py``: Warp kernels recorded on the CPU, compiled for a CUDA architecture without a GPU
(Warp's NVRTC needs no driver), packed as Warp's cache lays them out, installed and reported on the GPU machine."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import warp as wp

from mjfleet.sim.warp_runtime import init_warp

from .helpers import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "warp_cuda_cache.py"


cache = load_script(SCRIPT)


@wp.kernel
def _scale(x: wp.array(dtype=float), s: float):  # pyright: ignore[reportInvalidTypeForm]
    i = wp.tid()
    x[i] = x[i] * s


def _run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "WARP_CACHE_PATH": str(cache_dir), "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _nvrtc() -> bool:
    init_warp("cpu")
    from warp._src.context import runtime

    return bool(runtime is not None and runtime.nvrtc_supported_archs and 90 in runtime.nvrtc_supported_archs)


def test_launches_are_recorded_with_the_block_size_cuda_would_run() -> None:
    init_warp("cpu")
    x = wp.ones(8, dtype=float, device="cpu")
    originals = (wp.launch, wp.launch_tiled)
    with cache.recorded_launches() as seen:
        wp.launch(_scale, dim=8, inputs=[x, 2.0], device="cpu")
        wp.launch(_scale, dim=8, inputs=[x, 2.0], device="cpu", block_dim=64)
        wp.launch_tiled(_scale, dim=[8], inputs=[x, 2.0], device="cpu", block_dim=32)
    assert seen == {(_scale.module, 256), (_scale.module, 64), (_scale.module, 32)}
    assert x.numpy().tolist() == [8.0] * 8  # the launches ran (the CPU with one thread per block)
    assert (wp.launch, wp.launch_tiled) == originals


@pytest.mark.slow
def test_a_task_run_on_the_cpu_records_mujoco_warps_modules() -> None:
    seen = cache.run_tasks(["cartpole-balance"], num_envs=2, steps=2)
    names = {module.name for module, _ in seen}
    assert {"mujoco_warp._src.smooth", "mujoco_warp._src.forward"} <= names, names
    # Tile kernels ask for their own block size: each size is a module variant of its own on CUDA.
    assert any(block_dim != 256 for _, block_dim in seen), seen


@pytest.mark.skipif(not _nvrtc(), reason="this warp-lang has no NVRTC for sm_90")
def test_compiled_variants_pack_install_and_report(tmp_path: Path) -> None:
    built = tmp_path / "built"
    timings = cache.compile_variants({(_scale.module, 256), (_scale.module, 64)}, 90, ["ptx"], built, workers=2)
    idents = sorted(ident for ident, _ in timings)
    assert len(set(idents)) == 2  # two block sizes, two cache entries
    for ident in idents:
        assert (built / ident / f"{ident}.sm90.ptx").read_text().lstrip().startswith("//")  # real PTX
        assert (built / ident / f"{ident}.meta").is_file()
    assert _scale.module.get_module_identifier(block_dim=64) in idents
    assert _scale.module.get_module_identifier(block_dim=256) in idents

    archive = tmp_path / "mjfleet-warp-cache.tar.xz"
    manifest = {"warp": wp.config.version, "arch": 90, "formats": ["ptx"], "tasks": [], "modules": idents}
    cache.pack(built, archive, manifest)
    with tarfile.open(archive, "r:xz") as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names and not [n for n in names if n.endswith((".cu", ".o", ".cpp"))]

    warp_cache_path = tmp_path / "warp-cache"
    warp_cache = warp_cache_path / wp.config.version  # Warp keeps each version's kernels apart under WARP_CACHE_PATH
    done = _run("install", str(archive), cache_dir=warp_cache_path)
    assert done.returncode == 0, done.stderr
    assert f"2 modules for sm_90 installed into {warp_cache}" in done.stderr
    for ident in idents:
        assert (warp_cache / ident / f"{ident}.sm90.ptx").is_file()

    done = _run("report", str(archive), cache_dir=warp_cache_path)
    assert "2 modules of the archive" in done.stderr and "0 compiled on this machine" in done.stderr, done.stderr
    compiled_here = warp_cache / "wp_other_1234567"
    compiled_here.mkdir()
    (compiled_here / "wp_other_1234567.sm90.cubin").write_bytes(b"\0")
    done = _run("report", str(archive), cache_dir=warp_cache_path)
    assert "1 compiled on this machine" in done.stderr and "wp_other_1234567" in done.stderr, done.stderr


def test_an_archive_of_another_warp_version_or_none_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "old.tar.xz"
    (tmp_path / "built").mkdir()
    cache.pack(tmp_path / "built", archive, {"warp": "0.0.1", "arch": 90, "modules": ["wp_x_1234567"]})
    done = _run("install", str(archive), cache_dir=tmp_path / "warp-cache")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {archive} holds kernels of warp-lang 0.0.1, this is {wp.config.version}"
    ]
    assert not (tmp_path / "warp-cache").exists()

    (tmp_path / "junk.tar.xz").write_bytes(b"not an archive")
    done = _run("install", str(tmp_path / "junk.tar.xz"), cache_dir=tmp_path / "warp-cache")
    assert done.returncode == 2 and "is not an archive of warp_cuda_cache.py build" in done.stderr


def test_an_architecture_nvrtc_cannot_compile_for_is_refused_before_recording(tmp_path: Path) -> None:
    done = _run("build", str(tmp_path / "out.tar.xz"), "--arch", "91", cache_dir=tmp_path / "warp-cache")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: --arch 91: this warp-lang's NVRTC compiles for ["), done.stderr
    assert not (tmp_path / "out.tar.xz").exists()


def test_an_mjlab_export_without_its_report_is_refused_before_recording(tmp_path: Path) -> None:
    done = _run(
        "build", str(tmp_path / "out.tar.xz"), "--mjlab-export", str(tmp_path), cache_dir=tmp_path / "warp-cache"
    )
    assert done.returncode == 2
    message = f"error: --mjlab-export {tmp_path}: no mjlab.json (scripts/compare_mjlab.sh writes it)"
    assert done.stderr.strip() == message
