"""Pictures of the simulator's state through MuJoCo's renderer, on the same compiled model.

The renderer draws ``scene.mjmodel`` (the model ``sim_core`` simulates) with each selected env's
``qpos`` copied in on demand; envs are laid out on the scene's ``env_spacing`` grid, floor drawn once,
and task markers (targets, goals) are added as translucent spheres. Nothing here runs unless
``render()`` is called, so stepping never pays for it.

Headless OpenGL: ``sim_core`` picks ``MUJOCO_GL`` before MuJoCo is imported (``osmesa`` on a machine
without a GPU or display: Debian's ``libosmesa6``; ``egl`` where an NVIDIA device exists, with
``EGL_DEVICE_ID``), each only if its library is installed; a missing library gives an error naming the
package to install.
"""

from __future__ import annotations

import copy
import importlib
import os
import platform
import weakref
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from sim_core.gl_backend import headless_backend

__all__ = ["RenderConfig", "Marker", "SceneRenderer", "RenderUnavailableError"]


class RenderUnavailableError(RuntimeError):
    """No working headless OpenGL: the message names the missing system package."""


@dataclass(frozen=True)
class RenderConfig:
    width: int  # pixels
    height: int  # pixels
    lookat: tuple[float, float, float]  # camera target for one env, in the env's frame, m
    distance: float  # camera distance for one env, m (grows with the grid of several envs)
    azimuth: float  # degrees
    elevation: float  # degrees
    shadows: bool  # shadow maps (costs ~2x per frame with OSMesa on a CPU)
    reflections: bool  # floor reflections


@dataclass(frozen=True)
class Marker:
    """Spheres at ``pos`` (``(num_envs, 3)``, env frame, m) drawn in every rendered env."""

    pos: torch.Tensor
    radius: float
    rgba: tuple[float, float, float, float]


def _gl_help() -> str:
    backend = os.environ.get("MUJOCO_GL", "")
    if backend == "egl":
        return "MUJOCO_GL=egl needs libEGL and an NVIDIA driver (Debian: libegl1); or MUJOCO_GL=osmesa"
    if not backend:
        return (
            "no headless OpenGL library was found: install libEGL (Debian: libegl1) on a machine with an "
            "NVIDIA driver, or OSMesa (libosmesa6) and PyOpenGL"
        )
    return (
        "MUJOCO_GL=osmesa needs OSMesa: install Debian's libosmesa6 (apt-get install libosmesa6) and PyOpenGL"
    )


def _ensure_headless_backend() -> None:
    """If MuJoCo was imported before ``sim_core`` with no ``MUJOCO_GL``, it chose GLFW, which needs a
    display (and aborts the process without one). Switch to the headless backend before the first GL
    context exists; OpenGL itself is not loaded yet at that point, so the switch is clean."""
    from mujoco.rendering.classic import gl_context

    choice = headless_backend()
    if "MUJOCO_GL" in os.environ or choice is None:
        return
    os.environ["MUJOCO_GL"] = choice
    importlib.reload(gl_context)


def _glfw_without_display() -> bool:
    """MuJoCo's default backend (GLFW) chosen on a Linux machine with no display."""
    return (
        os.environ.get("MUJOCO_GL", "glfw") == "glfw"
        and platform.system() == "Linux"
        and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    )


class SceneRenderer:
    """Renders envs of a built ``sim_core`` scene; create it lazily, on the first ``render()``."""

    def __init__(self, scene, cfg: RenderConfig):
        self.scene, self.cfg = scene, cfg
        self.model = copy.copy(scene.mjmodel)  # its geom sizes are set per env drawn
        self.data = mujoco.MjData(self.model)
        _ensure_headless_backend()
        if _glfw_without_display():  # GLFW would abort the whole process, not raise
            raise RenderUnavailableError(f"rendering is unavailable (GLFW needs a display). {_gl_help()}")
        try:
            self.renderer = mujoco.Renderer(self.model, cfg.height, cfg.width)
        except Exception as e:  # the GL backend could not start
            raise RenderUnavailableError(f"rendering is unavailable ({e}). {_gl_help()}") from e
        # Frees the GL context when this object is collected, or at exit if it is still alive then,
        # while the modules the GL bindings need are still loaded: MuJoCo's own ``Renderer.__del__``
        # runs too late at interpreter shutdown and OSMesa's free raises there.
        self._release = weakref.finalize(self, self.renderer.close)
        self.camera = mujoco.MjvCamera()
        self._option, self._perturb = mujoco.MjvOption(), mujoco.MjvPerturb()  # the same for every env

    def render(self, envs_idx, markers: list[Marker] = ()) -> np.ndarray:
        """``(height, width, 3)`` uint8 image of the envs in ``envs_idx`` (a list of indices)."""
        solver = self.scene.sim.rigid_solver
        idx = torch.as_tensor(list(envs_idx), dtype=torch.long, device=solver.device)
        qpos = solver.state.qpos[idx].detach().cpu().numpy().astype(np.float64)  # (k, nq)
        has_sizes = solver.params.geom_size.shape[1] > 0  # per-env geom sizes exist with contacts
        sizes = solver.params.geom_size[idx].cpu().numpy() if has_sizes else None  # (k, ngeom, 3)
        offsets = self.scene.envs_offset[idx].cpu().numpy() if len(idx) > 1 else np.zeros((1, 3))
        offsets = offsets - offsets.mean(axis=0)
        marker_pos = [m.pos[idx].detach().cpu().numpy() for m in markers]
        scn = self.renderer.scene
        for k in range(len(idx)):
            self.data.qpos[:] = qpos[k]
            if sizes is not None:  # per-env sizes (``set_size``)
                self.model.geom_size[:] = sizes[k]
            mujoco.mj_kinematics(self.model, self.data)
            if k == 0:
                self._set_camera(offsets)
                self.renderer.update_scene(self.data, self.camera, scene_option=self._option)
                scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = self.cfg.shadows
                scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = self.cfg.reflections
                start = 0
            else:
                start = scn.ngeom
                mujoco.mjv_addGeoms(
                    self.model, self.data, self._option, self._perturb, mujoco.mjtCatBit.mjCAT_ALL, scn
                )
            self._shift_and_drop_planes(scn, start, offsets[k], keep_planes=k == 0)
            for m, pos in zip(markers, marker_pos, strict=True):
                self._add_sphere(scn, pos[k] + offsets[k], m.radius, m.rgba)
        return self.renderer.render().copy()

    def _set_camera(self, offsets: np.ndarray) -> None:
        c = self.cfg
        extent = float(np.abs(offsets[:, :2]).max()) if len(offsets) > 1 else 0.0
        self.camera.lookat[:] = c.lookat
        self.camera.distance = c.distance + 2.2 * extent
        self.camera.azimuth, self.camera.elevation = c.azimuth, c.elevation

    @staticmethod
    def _shift_and_drop_planes(scn, start: int, offset: np.ndarray, keep_planes: bool) -> None:
        """Move geoms ``start:`` by ``offset``; the floor is drawn once (the first env's, enlarged to
        the grid), the other envs' copies are sunk far below it."""
        for g in range(start, scn.ngeom):
            geom = scn.geoms[g]
            if geom.type == mujoco.mjtGeom.mjGEOM_PLANE:
                if keep_planes:
                    geom.size[:2] = np.maximum(geom.size[:2], 3.0)
                else:
                    geom.pos[2] -= 1000.0
            else:
                geom.pos[:] = geom.pos + offset

    @staticmethod
    def _add_sphere(scn, pos: np.ndarray, radius: float, rgba) -> None:
        if scn.ngeom >= scn.maxgeom:
            return
        mujoco.mjv_initGeom(
            scn.geoms[scn.ngeom],
            mujoco.mjtGeom.mjGEOM_SPHERE,
            np.array([radius, 0.0, 0.0]),
            np.asarray(pos, dtype=np.float64),
            np.eye(3).reshape(-1),
            np.asarray(rgba, dtype=np.float32),
        )
        scn.ngeom += 1

    def close(self) -> None:
        """Free the GL context now (idempotent)."""
        self._release()
