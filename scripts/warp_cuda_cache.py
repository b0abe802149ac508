"""Warp's CUDA kernels for mjfleet's tasks, compiled ahead of time on a machine without a GPU.

The first run of a task on a GPU compiles every MuJoCo Warp kernel module it launches (NVRTC, one module after
another, inside the run); Go1's took 57 s of compiling on a 2-core CPU. Where GPU time is scarce (a cluster
allocation that starts with an empty kernel cache, say), that is better done before: Warp's NVRTC works without a
driver, and a module's cache name is a hash of its kernels and options, not of the machine. So:

    python scripts/warp_cuda_cache.py build OUT.tar.xz [--tasks T ...] [--arch 90] [--formats cubin ptx]
    python scripts/warp_cuda_cache.py install OUT.tar.xz     # on the GPU machine: into Warp's kernel cache
    python scripts/warp_cuda_cache.py report OUT.tar.xz      # after the runs: which modules were compiled there

``build`` runs each task's environment with the Warp backend on the CPU and records every kernel module launched and
the block size it asked for (the CPU runs every kernel with one thread per block; CUDA with the block size asked
for, 256 by default, and each block size is a module variant of its own). It then compiles those module variants
for the CUDA architecture (``--arch``; 90 is the H100) as CUBIN and PTX (Warp loads PTX where the driver is at
least as new as its NVRTC and CUBIN otherwise) and packs them as Warp's cache lays them out. A kernel that MuJoCo
Warp only builds on CUDA (a few choose their code by device) is not in the archive: the GPU compiles it as before.
A module found in the cache is loaded instead of compiled; nothing else changes, so a stale archive only costs
the compile it failed to save. ``install`` refuses an archive of another warp-lang version (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import io
import json
import logging
import lzma
import os
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mjfleet.errors import UsageError, exits_on_usage_error

MANIFEST = "MANIFEST.json"
CUDA_DEFAULT_BLOCK_DIM = 256  # what wp.launch uses on CUDA when no block_dim is given

logger = logging.getLogger("warp_cuda_cache")


@contextmanager
def recorded_launches() -> Iterator[set[tuple[Any, int]]]:
    """Every (module, CUDA block size) launched through ``wp.launch``/``wp.launch_tiled`` inside the block.

    The block size is the one asked for, resolved as on CUDA, not the 1 the CPU runs with.
    """
    import warp as wp

    seen: set[tuple[Any, int]] = set()
    originals = {name: getattr(wp, name) for name in ("launch", "launch_tiled")}
    launch_signature = inspect.signature(originals["launch"])

    def cuda_block_dim(requested: Any) -> int:
        return int(requested) if requested is not None and int(requested) > 0 else CUDA_DEFAULT_BLOCK_DIM

    def launch(*args: Any, **kwargs: Any) -> Any:
        bound = launch_signature.bind(*args, **kwargs)
        seen.add((bound.arguments["kernel"].module, cuda_block_dim(bound.arguments.get("block_dim"))))
        return originals["launch"](*args, **kwargs)

    def launch_tiled(*args: Any, **kwargs: Any) -> Any:
        kernel = kwargs["kernel"] if "kernel" in kwargs else args[0]
        seen.add((kernel.module, cuda_block_dim(kwargs.get("block_dim"))))
        return originals["launch_tiled"](*args, **kwargs)

    wp.launch, wp.launch_tiled = launch, launch_tiled  # MuJoCo Warp looks both up on `wp` at every call
    try:
        yield seen
    finally:
        wp.launch, wp.launch_tiled = originals["launch"], originals["launch_tiled"]


DEFAULT_TASKS = (
    "cartpole-balance",
    "go1-velocity-flat",
    "humanoid-velocity-flat",
    "unitree-go1-velocity-flat",
    "unitree-g1-velocity-flat",
    "yam-reach",
    "yam-lift-cube",
    "unitree-g1-tracking",
)
"""The tasks a GPU session runs first (their Menagerie files from mujoco-menagerie or MENAGERIE_ROOT; a task whose
files are missing is skipped with a line)."""


def run_tasks(tasks: list[str], num_envs: int, steps: int, mjlab_export: Path | None = None) -> set[tuple[Any, int]]:
    """Run each task's environment with the Warp backend on the CPU: stepping (eager, then a captured graph, as
    the GPU runs it), resetting every world; then the model of an mjlab export, stepped as
    ``scripts/mjlab_compare/model_side.py`` steps it. Return what was launched."""
    import torch

    from mjfleet.envs.env import MjEnv
    from mjfleet.sim.warp_runtime import init_warp
    from mjfleet.tasks.registry import get_task

    init_warp("cpu")
    with recorded_launches() as seen:
        for task_id in tasks:
            spec = get_task(task_id)
            cfg = dataclasses.replace(spec.env_cfg(), num_envs=num_envs)
            try:
                cfg.prepare_assets()
            except UsageError as e:  # a Menagerie robot whose files are not here: its kernels compile on the GPU
                logger.warning("%s skipped: %s", task_id, e)
                continue
            cfg.sim = dataclasses.replace(cfg.sim, backend="warp", use_graph=True)
            env = MjEnv(spec.load_task_class()(cfg), device="cpu", seed=0)
            actions = torch.zeros(num_envs, env.num_actions)
            for _ in range(steps):
                env.step(actions)
            env.reset_all()
            env.sim.step()
            logger.info("%s: %d module variants launched so far", task_id, len(seen))
        if mjlab_export is not None:
            step_mjlab_export(mjlab_export, num_envs, steps)
            logger.info("%s: %d module variants launched so far", mjlab_export, len(seen))
    return seen


def step_mjlab_export(export: Path, num_envs: int, steps: int) -> None:
    """Step mjlab's Go1 model as ``model_side.py`` does on the GPU (its options and sizes decide the kernels)."""
    from mjfleet.sim.config import SimConfig

    path = Path(__file__).resolve().parent / "mjlab_compare" / "model_side.py"
    spec = importlib.util.spec_from_file_location("mjlab_model_side", path)
    assert spec is not None and spec.loader is not None
    model_side = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model_side)
    try:
        report = json.loads((export / "mjlab.json").read_text())
        model = model_side.load_model(export / "scene", report)
    except (OSError, ValueError, KeyError) as e:
        raise UsageError(f"--mjlab-export {export}: not an export of scripts/compare_mjlab.sh ({e})") from None
    cfg = SimConfig(backend="warp", decimation=report["decimation"], nconmax=report["nconmax"], njmax=report["njmax"])
    model_side.physics_rate(model, report, num_envs, "cpu", steps, cfg)


def compile_variants(
    variants: set[tuple[Any, int]], arch: int, formats: list[str], out: Path, workers: int
) -> list[tuple[str, float]]:
    """Compile each module variant for ``arch`` into ``out/<module id>/``, Warp's cache layout; (id, seconds) each."""
    import warp as wp

    def one(module: Any, block_dim: int) -> tuple[str, float]:
        start = time.perf_counter()
        options = module.resolve_options(wp.config, block_dim=block_dim)
        ident = module.get_module_identifier(block_dim=block_dim)
        for fmt in formats:
            # Warp's own ahead-of-time entry point compiles the module's default block size only.
            module._compile(None, out / ident, output_arch=arch, use_ptx=fmt == "ptx", options=options)
        return ident, time.perf_counter() - start

    ordered = sorted(variants, key=lambda v: (v[0].name, v[1]))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # the native compile runs outside Warp's codegen lock
        return list(pool.map(lambda v: one(*v), ordered))


def pack(src: Path, archive: Path, manifest: dict[str, Any]) -> None:
    """``src``'s module folders (CUDA binaries and metadata, not the sources) and the manifest, xz-compressed."""
    data = json.dumps(manifest, indent=1, sort_keys=True).encode()
    with lzma.open(archive, "wb", preset=6) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for path in sorted(src.rglob("*")):
            if path.is_file() and path.suffix in (".cubin", ".ptx", ".meta"):
                tar.add(path, arcname=str(path.relative_to(src)))


def read_manifest(archive: Path) -> dict[str, Any]:
    """The manifest of an archive ``build`` wrote."""
    try:
        with tarfile.open(archive, "r:xz") as tar:
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise KeyError(MANIFEST)
            return json.loads(member.read())
    except (OSError, tarfile.TarError, KeyError, json.JSONDecodeError, lzma.LZMAError) as e:
        raise UsageError(f"{archive} is not an archive of warp_cuda_cache.py build ({e})") from None


def warp_cache_dir() -> Path:
    """Warp's kernel cache for the installed warp-lang, as ``wp.init()`` resolves it (``WARP_CACHE_PATH`` or the
    per-version default)."""
    import warp as wp

    from mjfleet.sim.warp_runtime import init_warp

    init_warp("cpu")
    assert wp.config.kernel_cache_dir is not None  # set by wp.init()
    return Path(wp.config.kernel_cache_dir)


def build(args: argparse.Namespace) -> None:
    import warp as wp

    from mjfleet.sim.warp_runtime import init_warp

    init_warp("cpu")
    from warp._src.context import runtime

    supported = sorted(runtime.nvrtc_supported_archs) if runtime is not None else []
    if args.arch not in supported:
        raise UsageError(f"--arch {args.arch}: this warp-lang's NVRTC compiles for {supported or 'nothing'}")
    if args.mjlab_export is not None and not (args.mjlab_export / "mjlab.json").is_file():
        raise UsageError(f"--mjlab-export {args.mjlab_export}: no mjlab.json (scripts/compare_mjlab.sh writes it)")
    sources = args.tasks + ([str(args.mjlab_export)] if args.mjlab_export else [])
    start = time.perf_counter()
    variants = run_tasks(args.tasks, args.num_envs, args.steps, args.mjlab_export)
    recorded_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        timings = compile_variants(variants, args.arch, args.formats, Path(tmp), args.workers)
        compile_s = time.perf_counter() - start
        manifest = {
            "warp": wp.config.version,
            "arch": args.arch,
            "formats": args.formats,
            "tasks": sources,
            "modules": sorted(ident for ident, _ in timings),
            "compile_s": {ident: round(s, 2) for ident, s in timings},
        }
        pack(Path(tmp), args.archive, manifest)
    serial = sum(s for _, s in timings)
    logger.info(
        "%d module variants of %s for sm_%d (%s): recorded in %.0f s, compiled in %.0f s (%.0f s one after another, "
        "%d workers); %s, %.1f MiB",
        len(timings),
        ", ".join(sources),
        args.arch,
        "+".join(args.formats),
        recorded_s,
        compile_s,
        serial,
        args.workers,
        args.archive,
        args.archive.stat().st_size / 2**20,
    )


def install(args: argparse.Namespace) -> None:
    import warp as wp

    manifest = read_manifest(args.archive)
    if manifest["warp"] != wp.config.version:
        raise UsageError(f"{args.archive} holds kernels of warp-lang {manifest['warp']}, this is {wp.config.version}")
    target = warp_cache_dir()
    with tarfile.open(args.archive, "r:xz") as tar:
        members = [m for m in tar.getmembers() if m.name != MANIFEST]
        tar.extractall(target, members=members, filter="data")
    logger.info("%d modules for sm_%s installed into %s", len(manifest["modules"]), manifest["arch"], target)


def report(args: argparse.Namespace) -> None:
    manifest = read_manifest(args.archive)
    archived = set(manifest["modules"])
    target = warp_cache_dir()
    suffixes = (f".sm{manifest['arch']}.cubin", f".sm{manifest['arch']}.ptx")
    here = {p.parent.name for p in target.glob("*/*") if p.name.endswith(suffixes)} - archived
    logger.info(
        "%d modules of the archive in %s; %d compiled on this machine (not in the archive)%s",
        len(archived),
        target,
        len(here),
        ":" if here else "",
    )
    for ident in sorted(here):
        logger.info("  %s", ident)


@exits_on_usage_error
def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    parser = argparse.ArgumentParser(prog="warp_cuda_cache.py", description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="record the tasks' kernels on the CPU and compile them for a CUDA architecture")
    b.add_argument("archive", type=Path, help="the .tar.xz to write")
    b.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    b.add_argument("--arch", type=int, default=90, help="CUDA compute capability as an integer (90: H100)")
    b.add_argument("--formats", nargs="+", choices=("cubin", "ptx"), default=["cubin", "ptx"])
    b.add_argument("--num-envs", type=int, default=4, help="worlds per task while recording (no kernel depends on it)")
    b.add_argument("--steps", type=int, default=5, help="env steps per task while recording")
    b.add_argument(
        "--mjlab-export", type=Path, help="also the model of this scripts/compare_mjlab.sh export (mjlab's Go1)"
    )
    b.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="modules compiled at once")
    for name, text in (
        ("install", "extract into Warp's kernel cache"),
        ("report", "which CUDA modules this machine compiled itself, not found in the archive"),
    ):
        s = sub.add_parser(name, help=text)
        s.add_argument("archive", type=Path)
    args = parser.parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace], None]] = {"build": build, "install": install, "report": report}
    commands[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
