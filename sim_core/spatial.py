"""Spatial algebra helpers shared by the generated kernels.

Spatial vectors are ``wp.spatial_vector`` laid out (angular, linear) and expressed in the world frame
about the world origin: a twist is ``(w, v)`` with ``v`` the velocity of the body-fixed point at the
origin; a wrench is ``(torque about the origin, force)``. A rigid body's spatial inertia about the
origin is carried as ``(m, h, I)``: mass, first moment ``h = m c`` (``c`` the center of mass) and the
rotational inertia about the origin ``I = I_c + m (|c|^2 1 - c c^T)``; composites are plain sums.
"""

import warp as wp

wp.set_module_options({"enable_backward": False})

__all__ = [
    "spatial",
    "motion_cross",
    "force_cross",
    "inertia_mul",
    "body_inertia",
    "quat_integrate",
    "quat_wxyz",
]


@wp.func
def spatial(w: wp.vec3, v: wp.vec3) -> wp.spatial_vector:
    """The spatial vector (w, v)."""
    return wp.spatial_vector(w[0], w[1], w[2], v[0], v[1], v[2])


@wp.func
def motion_cross(a: wp.spatial_vector, b: wp.spatial_vector) -> wp.spatial_vector:
    """Twist a x twist b: ``(wa x wb, wa x vb + va x wb)``."""
    wa = wp.spatial_top(a)
    va = wp.spatial_bottom(a)
    wb = wp.spatial_top(b)
    vb = wp.spatial_bottom(b)
    w = wp.cross(wa, wb)
    v = wp.cross(wa, vb) + wp.cross(va, wb)
    return wp.spatial_vector(w[0], w[1], w[2], v[0], v[1], v[2])


@wp.func
def force_cross(a: wp.spatial_vector, f: wp.spatial_vector) -> wp.spatial_vector:
    """Twist a x* wrench f: ``(wa x tau + va x force, wa x force)``."""
    wa = wp.spatial_top(a)
    va = wp.spatial_bottom(a)
    tau = wp.spatial_top(f)
    fl = wp.spatial_bottom(f)
    t = wp.cross(wa, tau) + wp.cross(va, fl)
    g = wp.cross(wa, fl)
    return wp.spatial_vector(t[0], t[1], t[2], g[0], g[1], g[2])


@wp.func
def inertia_mul(m: float, h: wp.vec3, inertia: wp.mat33, s: wp.spatial_vector) -> wp.spatial_vector:
    """Spatial inertia ``(m, h, I)`` times twist s: ``(I w + h x v, m v - h x w)``."""
    w = wp.spatial_top(s)
    v = wp.spatial_bottom(s)
    t = inertia * w + wp.cross(h, v)
    f = m * v - wp.cross(h, w)
    return wp.spatial_vector(t[0], t[1], t[2], f[0], f[1], f[2])


@wp.func
def body_inertia(m: float, com: wp.vec3, rot: wp.mat33, principal: wp.vec3) -> wp.mat33:
    """Rotational inertia about the origin of a body with principal moments ``principal`` in frame
    ``rot`` (world from principal axes) and center of mass ``com``."""
    ic = rot * wp.diag(principal) * wp.transpose(rot)
    cc = wp.dot(com, com)
    return ic + m * (wp.diag(wp.vec3(cc, cc, cc)) - wp.outer(com, com))


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
