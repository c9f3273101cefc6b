"""Quaternion helpers shared by the generated kernels (Warp's ``wp.quat`` is (x, y, z, w))."""

import warp as wp

wp.set_module_options({"enable_backward": False})

__all__ = ["quat_integrate", "quat_wxyz"]


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
