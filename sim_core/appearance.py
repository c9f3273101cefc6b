"""What a compiled scene looks like in pictures: sky, floor texture and lights (no part in the physics)."""

from __future__ import annotations

import mujoco

__all__ = ["add_appearance"]


def _add_texture(scene: mujoco.MjSpec, name, kind, builtin, rgb1, rgb2, width, height) -> None:
    tex = scene.add_texture()
    tex.name, tex.type, tex.builtin = name, kind, builtin
    tex.rgb1, tex.rgb2, tex.width, tex.height = rgb1, rgb2, width, height


def add_appearance(scene: mujoco.MjSpec) -> None:
    """Visual-only elements for pictures: a sky gradient, a checkered floor material, two lights.
    (Lights, textures and materials take no part in the physics.)"""
    t, b = mujoco.mjtTexture, mujoco.mjtBuiltin
    sky, grid = ([0.55, 0.68, 0.82], [0.12, 0.14, 0.18]), ([0.66, 0.69, 0.73], [0.56, 0.59, 0.64])
    _add_texture(scene, "sim_core/sky", t.mjTEXTURE_SKYBOX, b.mjBUILTIN_GRADIENT, *sky, 256, 1536)
    _add_texture(scene, "sim_core/grid", t.mjTEXTURE_2D, b.mjBUILTIN_CHECKER, *grid, 512, 512)
    floor = scene.add_material()
    floor.name, floor.texrepeat, floor.reflectance = "sim_core/floor", [8.0, 8.0], 0.05
    floor.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "sim_core/grid"
    scene.visual.headlight.ambient = [0.35, 0.35, 0.35]
    scene.visual.headlight.diffuse = [0.45, 0.45, 0.45]
    for pos, direction in (([0.0, 0.0, 4.0], [0.0, 0.0, -1.0]), ([2.0, -2.0, 3.0], [-0.5, 0.5, -0.7])):
        light = scene.worldbody.add_light()
        light.pos, light.dir = pos, direction
        light.diffuse, light.specular = [0.6, 0.6, 0.6], [0.15, 0.15, 0.15]
        light.castshadow = pos[2] > 3.5
