"""Choose MuJoCo's headless OpenGL backend before MuJoCo is imported (it reads ``MUJOCO_GL`` once).

Only when the user has not chosen (``MUJOCO_GL`` unset), on Linux: ``egl`` where an NVIDIA device
exists (``/dev/nvidia0``) or ``EGL_DEVICE_ID`` is set, else ``osmesa`` when there is no display.
Rendering is the only user of the choice; simulation never touches OpenGL.
"""

import os
import platform
import sys


def headless_backend() -> str | None:
    """The backend to use when the user chose none, or None to keep MuJoCo's default (GLFW)."""
    if platform.system() != "Linux":
        return None
    if os.path.exists("/dev/nvidia0") or "EGL_DEVICE_ID" in os.environ:
        return "egl"
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        return "osmesa"
    return None


if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules and (_choice := headless_backend()):
    os.environ["MUJOCO_GL"] = _choice
