# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Offscreen video of one world of a batched simulation (headless: ``MUJOCO_GL=egl``)."""

from __future__ import annotations

import contextlib
import copy
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("MUJOCO_GL", "egl")  # must precede the first GL context; EGL needs no display

import imageio.v2 as imageio
import mujoco
import numpy as np

from mjfleet.sim.simulation import Simulation

if TYPE_CHECKING:
    from mjfleet.envs.task import VideoMarker

logger = logging.getLogger(__name__)


GHOST_RGBA = np.array([0.3, 0.6, 1.0, 0.35], dtype=np.float32)
"""The ghost's colour: a translucent blue."""


def add_ghost(model: mujoco.MjModel, data: mujoco.MjData, pose: np.ndarray, scene: mujoco.MjvScene) -> None:
    """Draw ``model`` posed at ``pose`` (a ``qpos``; ``data`` is scratch) into ``scene``, translucent and tinted, as
    many of its geoms as the scene has room for: a reference motion over the robot (videos, the native viewer)."""
    data.qpos[:] = pose
    mujoco.mj_kinematics(model, data)
    first = scene.ngeom
    option = mujoco.MjvOption()  # the geom groups the robot is drawn with
    mujoco.mjv_addGeoms(model, data, option, mujoco.MjvPerturb(), mujoco.mjtCatBit.mjCAT_DYNAMIC, scene)
    for i in range(first, scene.ngeom):
        scene.geoms[i].rgba[:] = GHOST_RGBA


class VideoFile:
    """An H.264 mp4 encoded as frames arrive (none held in memory: a long ``play --video`` would hold gigabytes),
    into a hidden file beside ``path`` that :meth:`finish` puts in place once it reads back whole (imageio does not
    check ffmpeg's exit: a full disk left a file without its index, written last, reported as written, over the
    previous one)."""

    def __init__(self, path: Path, fps: float) -> None:
        """Creates the file now: a path that cannot be written raises :class:`OSError` before any frame (imageio
        starts ffmpeg, which opens it, at the first frame)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.fps, self.frames = path, fps, 0
        self._partial = path.with_name(f".{path.stem}.partial{path.suffix}")
        self._partial.open("wb").close()
        try:
            self._writer = imageio.get_writer(self._partial, fps=fps, macro_block_size=1)
        except BaseException:
            self._partial.unlink(missing_ok=True)
            raise
        self._failed: OSError | None = None

    def append(self, frame: np.ndarray) -> None:
        """Encode ``frame``; once the encoder has failed (ffmpeg gone: a broken pipe) frames are dropped and
        :meth:`finish` says why, so that what the episodes measured is still reported."""
        if self._failed is not None:
            return
        try:
            self._writer.append_data(frame)
        except OSError as e:
            self._failed = e
            return
        self.frames += 1

    def finish(self) -> Path:
        """Close the encoder and put the file in place; :class:`OSError` when it cannot be written whole."""
        try:
            if self._failed is not None:
                raise self._failed
            self._writer.close()
            # Opening reads the file's index; its duration says every frame is in it.
            with imageio.get_reader(self._partial, format="FFMPEG") as reader:  # type: ignore[attr-defined]
                seconds = float(reader.get_meta_data()["duration"])
            if abs(seconds * self.fps - self.frames) > 1:
                raise OSError(f"{seconds * self.fps:.0f} of {self.frames} frames could be read back")
            self._partial.replace(self.path)
        except (OSError, RuntimeError) as e:  # RuntimeError: ffmpeg could not write or read the file
            self._partial.unlink(missing_ok=True)
            raise OSError(f"the video could not be written whole ({str(e).strip().splitlines()[0]})") from e
        logger.info("wrote %d frames to %s", self.frames, self.path)
        return self.path

    def abort(self) -> None:
        """Drop what was encoded (the episodes did not finish)."""
        with contextlib.suppress(Exception):
            self._writer.close()
        self._partial.unlink(missing_ok=True)


class WorldVideo:
    """Renders world ``world`` of a :class:`Simulation` frame by frame: into :attr:`frames`, written as an mp4 by
    :meth:`write`, or into a :class:`VideoFile` as they come."""

    def __init__(
        self,
        sim: Simulation,
        world: int = 0,
        camera: str | None = None,
        height: int = 480,
        width: int = 640,
        ghost: Callable[[int], np.ndarray | None] | None = None,
        sink: VideoFile | None = None,
        markers: Callable[[int], list[VideoMarker]] | None = None,
    ) -> None:
        """``ghost``: given the world, a pose (``qpos``) drawn translucent over the robot in each frame, or none;
        ``sink``: the file each frame goes to (none kept in :attr:`frames`); ``markers``: given the world, the
        spheres drawn in each frame (a target, a goal)."""
        self.sim = sim
        self.sink = sink
        self._ghost = ghost
        self._markers = markers
        self.world = world
        # A copy that takes the world's own randomized values (a cube's size, ...) before each frame.
        model = self._model = copy.copy(sim.mj_model)
        self._ghost_data = mujoco.MjData(model) if ghost is not None else None
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        self._data = mujoco.MjData(model)
        self._renderer = mujoco.Renderer(model, height, width)
        self._camera: str | mujoco.MjvCamera
        if camera is not None:
            self._camera = camera
        else:
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            cam.trackbodyid = 1 if model.nbody > 1 else 0
            cam.distance, cam.elevation, cam.azimuth = 3.0, -20.0, 90.0
            self._camera = cam
        self.frames: list[np.ndarray] = []

    def capture(self) -> None:
        """Render the world's current state."""
        self.sim.world_model(self.world, self._model)
        self._data.qpos[:] = self.sim.qpos[self.world].cpu().numpy()
        self._data.qvel[:] = self.sim.qvel[self.world].cpu().numpy()
        mujoco.mj_forward(self._model, self._data)
        self._renderer.update_scene(self._data, camera=self._camera)
        self._add_ghost()
        self._add_markers()
        frame = self._renderer.render()
        if self.sink is not None:
            self.sink.append(frame)
        else:
            self.frames.append(frame.copy())

    def _add_ghost(self) -> None:
        """Draw the ghost pose's bodies into the scene, translucent and tinted."""
        pose = self._ghost(self.world) if self._ghost is not None else None
        if pose is not None and self._ghost_data is not None:
            add_ghost(self._model, self._ghost_data, pose, self._renderer.scene)

    def _add_markers(self) -> None:
        """Draw the task's markers into the scene as spheres (as many as the scene has room for)."""
        scene = self._renderer.scene
        for marker in self._markers(self.world) if self._markers is not None else []:
            if scene.ngeom >= scene.maxgeom:
                return
            mujoco.mjv_initGeom(
                scene.geoms[scene.ngeom],
                int(mujoco.mjtGeom.mjGEOM_SPHERE),
                np.array([marker.radius, 0.0, 0.0]),
                np.asarray(marker.pos, dtype=np.float64),
                np.eye(3).flatten(),
                np.asarray(marker.rgba, dtype=np.float32),
            )
            scene.ngeom += 1

    def write(self, path: Path, fps: float) -> Path:
        """Encode the captured frames as an mp4 at ``path`` (a :class:`VideoFile`); :class:`OSError` when the file
        cannot be written whole."""
        sink = VideoFile(path, fps)
        try:
            for frame in self.frames:
                sink.append(frame)
        except BaseException:
            sink.abort()
            raise
        return sink.finish()

    def close(self) -> None:
        """Free the GL context."""
        self._renderer.close()
