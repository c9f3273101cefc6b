"""Quaternion helpers: Warp functions for the generated kernels (Warp's ``wp.quat`` is (x, y, z,
w)) and NumPy ones for the host, which folds the model's frames into the kernels ((w, x, y, z), as
MuJoCo's)."""

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False})

__all__ = ["quat_integrate", "quat_wxyz", "qmul_np", "rotate_np", "quat_to_mat_np"]


@wp.func
def quat_integrate(q: wp.quat, w_local: wp.vec3, dt: float) -> wp.quat:
    """Rotate q by the body-frame angular velocity ``w_local`` for ``dt`` (MuJoCo's quatIntegrate)."""
    angle = wp.length(w_local) * dt
    if angle == 0.0:
        return q
    axis = wp.normalize(w_local)
    return wp.normalize(q * wp.quat_from_axis_angle(axis, angle))


@wp.func
def quat_wxyz(q: wp.quat) -> wp.vec4:
    """Warp's (x, y, z, w) quaternion as a (w, x, y, z) 4-vector."""
    return wp.vec4(q[3], q[0], q[1], q[2])


def qmul_np(a, b):
    """(w, x, y, z) quaternion product on the host."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def rotate_np(q, v):
    """Rotate v by the (w, x, y, z) quaternion q on the host."""
    w, u = q[0], np.asarray(q[1:])
    v = np.asarray(v, np.float64)
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_to_mat_np(q) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalized first)."""
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
