"""Choose MuJoCo's headless OpenGL backend before MuJoCo is imported (it reads ``MUJOCO_GL`` once).

Only when the user has not chosen (``MUJOCO_GL`` unset), on Linux: ``egl`` where an NVIDIA device
exists (``/dev/nvidia0``) or ``EGL_DEVICE_ID`` is set, else ``osmesa`` when there is no display; each
only if its library is installed. MuJoCo imports the chosen backend's bindings as it is imported, and
a backend whose library is missing breaks ``import mujoco`` (PyOpenGL raises): with neither library
the choice stays MuJoCo's default, and rendering alone reports what is missing. Rendering is the only
user of the choice; simulation never touches OpenGL.
"""

import os
import platform
import sys
from ctypes.util import find_library


def headless_backend() -> str | None:
    """The backend to use when the user chose none, or None to keep MuJoCo's default (GLFW)."""
    if platform.system() != "Linux":
        return None
    if (os.path.exists("/dev/nvidia0") or "EGL_DEVICE_ID" in os.environ) and find_library("EGL"):
        return "egl"
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") and find_library("OSMesa"):
        return "osmesa"
    return None


if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules and (_choice := headless_backend()):
    os.environ["MUJOCO_GL"] = _choice
