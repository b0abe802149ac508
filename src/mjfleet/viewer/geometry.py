# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Triangle meshes of a MuJoCo model's visible geoms, in their body frames, for viewers that draw meshes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import mujoco
import numpy as np

VISIBLE_GROUPS = (0, 1, 2)
"""Geom groups MuJoCo's own viewer shows by default (menagerie robots put collision-only geoms in group 3)."""

INFINITE_PLANE_HALF_SIZE = 50.0
"""Half extent drawn for planes declared infinite (size 0), metres."""


@dataclass
class GeomMesh:
    """One geom as triangles in its body's frame."""

    geom: int
    """Geom id."""
    name: str
    """Geom name, or ``geom<id>`` when unnamed."""
    body: int
    """Body the geom moves with (0: the static world)."""
    vertices: np.ndarray
    """``(V, 3)`` float32, in the body frame."""
    faces: np.ndarray
    """``(F, 3)`` uint32 vertex indices."""
    rgba: tuple[float, float, float, float]
    """Colour in [0, 1]."""


def _sphere(rings: int = 8, segments: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Unit UV sphere; ``rings`` is even so a capsule can split it at the equator."""
    theta = np.linspace(0.0, np.pi, rings + 1)
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    verts = np.stack((np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)), axis=-1).reshape(-1, 3)
    faces = []
    for r in range(rings):
        for s in range(segments):
            a, b = r * segments + s, r * segments + (s + 1) % segments
            c, d = a + segments, b + segments
            faces += [(a, c, b), (b, c, d)]
    return verts, np.asarray(faces)


def _cylinder(segments: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Cylinder of radius 1 from z=-1 to z=1 with closed caps."""
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack((np.cos(phi), np.sin(phi)), axis=-1)
    bottom = np.column_stack((ring, -np.ones(segments)))
    top = np.column_stack((ring, np.ones(segments)))
    verts = np.vstack((bottom, top, [(0.0, 0.0, -1.0), (0.0, 0.0, 1.0)]))
    faces = []
    cb, ct = 2 * segments, 2 * segments + 1
    for s in range(segments):
        n = (s + 1) % segments
        faces += [(s, n, segments + s), (n, segments + n, segments + s), (cb, n, s), (ct, segments + s, segments + n)]
    return verts, np.asarray(faces)


def _box() -> tuple[np.ndarray, np.ndarray]:
    """Cube from -1 to 1."""
    verts = np.array([(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
    faces = [
        (0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5),  # x = -1, x = 1
        (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6),  # y = -1, y = 1
        (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3),  # z = -1, z = 1
    ]  # fmt: skip
    return verts, np.asarray(faces)


def _heightfield(model: mujoco.MjModel, hfield: int) -> tuple[np.ndarray, np.ndarray]:
    nrow, ncol = int(model.hfield_nrow[hfield]), int(model.hfield_ncol[hfield])
    sx, sy, sz, _ = model.hfield_size[hfield]
    adr = int(model.hfield_adr[hfield])
    heights = np.asarray(model.hfield_data[adr : adr + nrow * ncol]).reshape(nrow, ncol) * sz
    xs, ys = np.linspace(-sx, sx, ncol), np.linspace(-sy, sy, nrow)
    gx, gy = np.meshgrid(xs, ys)  # row-major like the data: rows along y
    verts = np.stack((gx, gy, heights), axis=-1).reshape(-1, 3)
    idx = np.arange(nrow * ncol).reshape(nrow, ncol)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    faces = np.concatenate((np.stack((a, b, d), -1), np.stack((a, d, c), -1)))
    return verts, faces


def _quat_to_matrix(quat: np.ndarray) -> np.ndarray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    return mat.reshape(3, 3)


def _local_shape(model: mujoco.MjModel, geom: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Vertices in the geom's own frame, or None for types not drawn (SDF)."""
    kind, size = int(model.geom_type[geom]), np.asarray(model.geom_size[geom], dtype=float)
    g = mujoco.mjtGeom
    if kind == g.mjGEOM_SPHERE:
        verts, faces = _sphere()
        return verts * size[0], faces
    if kind == g.mjGEOM_ELLIPSOID:
        verts, faces = _sphere()
        return verts * size, faces
    if kind == g.mjGEOM_CAPSULE:
        verts, faces = _sphere()
        verts = verts * size[0]
        verts[:, 2] += np.where(verts[:, 2] >= 0.0, size[1], -size[1])  # split at the equator into two caps
        return verts, faces
    if kind == g.mjGEOM_CYLINDER:
        verts, faces = _cylinder()
        return verts * np.array([size[0], size[0], size[1]]), faces
    if kind == g.mjGEOM_BOX:
        verts, faces = _box()
        return verts * size, faces
    if kind == g.mjGEOM_PLANE:
        hx = size[0] if size[0] > 0 else INFINITE_PLANE_HALF_SIZE
        hy = size[1] if size[1] > 0 else INFINITE_PLANE_HALF_SIZE
        verts = np.array([(-hx, -hy, 0.0), (hx, -hy, 0.0), (hx, hy, 0.0), (-hx, hy, 0.0)])
        return verts, np.array([(0, 1, 2), (0, 2, 3)])
    if kind == g.mjGEOM_HFIELD:
        return _heightfield(model, int(model.geom_dataid[geom]))
    if kind == g.mjGEOM_MESH:
        mesh = int(model.geom_dataid[geom])
        v0, nv = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
        f0, nf = int(model.mesh_faceadr[mesh]), int(model.mesh_facenum[mesh])
        return np.asarray(model.mesh_vert[v0 : v0 + nv], dtype=float), np.asarray(model.mesh_face[f0 : f0 + nf])
    return None


DEFAULT_GEOM_RGBA = np.array([0.5, 0.5, 0.5, 1.0], dtype=np.float32)
"""A geom's ``rgba`` where its XML gives none: only then does its material's colour show (MuJoCo's rule)."""


def geom_meshes(model: mujoco.MjModel, geoms: Iterable[int] | None = None) -> list[GeomMesh]:
    """Every visible geom (groups 0-2, not fully transparent) as a triangle mesh in its body's frame; of ``geoms``
    only, where given."""
    meshes = []
    for geom in range(model.ngeom) if geoms is None else geoms:
        rgba = np.asarray(model.geom_rgba[geom], dtype=float)
        material = int(model.geom_matid[geom])
        if material >= 0 and np.array_equal(rgba, DEFAULT_GEOM_RGBA):  # MuJoCo's rule: a geom's own rgba wins
            rgba = np.asarray(model.mat_rgba[material], dtype=float)
        if int(model.geom_group[geom]) not in VISIBLE_GROUPS or rgba[3] <= 0.0:
            continue
        shape = _local_shape(model, geom)
        if shape is None:
            continue
        verts, faces = shape
        rot = _quat_to_matrix(model.geom_quat[geom])
        in_body = verts @ rot.T + np.asarray(model.geom_pos[geom], dtype=float)
        meshes.append(
            GeomMesh(
                geom=geom,
                name=model.geom(geom).name or f"geom{geom}",
                body=int(model.geom_bodyid[geom]),
                vertices=in_body.astype(np.float32),
                faces=faces.astype(np.uint32),
                rgba=(float(rgba[0]), float(rgba[1]), float(rgba[2]), float(rgba[3])),
            )
        )
    return meshes
