"""Model loading: morphs -> one ``mujoco.MjSpec`` -> compiled ``MjModel`` -> ``Model``; make Data.

The ``mujoco`` package is the MJCF/URDF compiler (defaults, frames, inertias, actuator shortcuts), so
the model the tests compare against is exactly the model that is simulated. Anything in the compiled
model that would change the physics and is not simulated raises ``UnsupportedModelError`` naming the
element (or warns, for a morph loaded with ``ignore_unsupported=True``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import mujoco
import numpy as np
import warp as wp

from . import appearance, materials, morphs
from .contact import pairs
from .engine.segments import inertial_slots
from .errors import UnsupportedModelError
from .types import CtrlMode, Data, JointType, Model, dof_qposadr

__all__ = ["EntityRange", "compile_scene", "model_from_mj", "initial_qpos", "make_data"]

_OPTION_FIELDS = ("timestep", "gravity", "integrator", "iterations", "ls_iterations")


@dataclass(frozen=True)
class EntityRange:
    """Where one entity's elements sit in the compiled model (contiguous ranges)."""

    body_start: int
    nbody: int
    jnt_start: int
    njnt: int


def _entity_spec(morph: morphs.Morph, material: materials.Rigid | None = None) -> mujoco.MjSpec | None:
    if isinstance(morph, morphs.URDF):
        spec = mujoco.MjSpec.from_file(morph.file)
        if not morph.fixed:
            roots = [b for b in spec.worldbody.bodies]
            if len(roots) != 1:
                raise UnsupportedModelError(f"URDF {morph.file}: fixed=False needs one root link")
            roots[0].add_freejoint()
        return spec
    if isinstance(morph, morphs.MJCF):
        spec = mujoco.MjSpec.from_file(morph.file)
        if morph.gravcomp is not None:
            for body in spec.bodies[1:]:  # all but the world body
                body.gravcomp = morph.gravcomp
        return spec
    if isinstance(morph, morphs.Plane):
        return None
    if isinstance(morph, morphs.Primitive):
        return _primitive_spec(morph, material)
    raise TypeError(f"morph: unsupported morph type {type(morph).__name__}")


def _primitive_spec(morph: morphs.Primitive, material: materials.Rigid | None) -> mujoco.MjSpec:
    """One body (free unless ``fixed``) holding one geom whose density sets the mass."""
    material = material or materials.Rigid()
    spec = mujoco.MjSpec()
    body = spec.worldbody.add_body()
    body.name = "base"
    if not morph.fixed:
        body.add_freejoint()
    geom = body.add_geom()
    if isinstance(morph, morphs.Box):
        geom.type, geom.size = mujoco.mjtGeom.mjGEOM_BOX, [x / 2 for x in morph.size]
    elif isinstance(morph, morphs.Sphere):
        geom.type, geom.size = mujoco.mjtGeom.mjGEOM_SPHERE, [morph.radius, 0.0, 0.0]
    else:
        geom.type, geom.size = mujoco.mjtGeom.mjGEOM_CAPSULE, [morph.radius, morph.length / 2, 0.0]
    geom.density = material.rho
    geom.rgba = list(morph.color)
    return spec


def compile_scene(
    entity_morphs: list[morphs.Morph],
    *,
    timestep: float,
    gravity: tuple[float, float, float],
    entity_materials: list[materials.Rigid | None] | None = None,
) -> tuple[mujoco.MjModel, list[EntityRange], mujoco.MjSpec]:
    """Attach every morph to one scene spec and compile it.

    ``entity_materials`` (one per morph, None for the default): a primitive's density sets its mass;
    the friction coefficient is applied to every geom of the entity.

    Returns the compiled model (timestep ``timestep``, MuJoCo's ``implicitfast`` integrator, as the
    simulator integrates), per morph the range of bodies and joints it owns, and the spec itself.
    """
    scene = mujoco.MjSpec()
    scene.modelname = "sim_core_scene"
    scene.option.timestep = timestep
    scene.option.gravity = list(gravity)
    scene.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    appearance.add_appearance(scene)
    counts = []
    entity_materials = entity_materials or [None] * len(entity_morphs)
    for i, (morph, material) in enumerate(zip(entity_morphs, entity_materials, strict=True)):
        spec = _entity_spec(morph, material)
        if spec is None:  # a plane: a static world geom
            geom = scene.worldbody.add_geom()
            geom.name = f"e{i}/plane"
            geom.type = mujoco.mjtGeom.mjGEOM_PLANE
            geom.size = [0.0, 0.0, 1.0]
            geom.pos = list(morph.pos)
            geom.quat = list(morph.quat)
            geom.material = "sim_core/floor"
            _set_friction([geom], material)
            counts.append((0, 0))
            continue
        _set_friction(spec.geoms, material)
        for field in _OPTION_FIELDS:  # the scene's options win; copying them avoids attach conflicts
            setattr(spec.option, field, getattr(scene.option, field))
        counts.append((len(spec.bodies) - 1, len(spec.joints)))
        frame = scene.worldbody.add_frame()
        frame.pos = list(morph.pos)
        frame.quat = list(morph.quat)
        scene.attach(spec, prefix=f"e{i}/", frame=frame)
    mjm = scene.compile()
    ranges, body, jnt = [], 1, 0
    for nb, nj in counts:
        ranges.append(EntityRange(body, nb, jnt, nj))
        body, jnt = body + nb, jnt + nj
    assert body == mjm.nbody and jnt == mjm.njnt, "entity ranges do not cover the compiled model"
    for i, morph in enumerate(entity_morphs):
        _check_supported(mjm, ranges[i], morph)
    _check_scene_options(mjm)
    return mjm, ranges, scene


def _set_friction(geoms, material: materials.Rigid | None) -> None:
    """The material's sliding friction on every geom (torsional and rolling keep their values)."""
    if material is not None:
        for geom in geoms:
            geom.friction = [material.friction, *list(geom.friction)[1:]]


def _name(mjm: mujoco.MjModel, obj: mujoco.mjtObj, i: int) -> str:
    name = mujoco.mj_id2name(mjm, obj, i)
    return repr(name) if name else f"#{i}"


def _check_supported(mjm: mujoco.MjModel, rng: EntityRange, morph: morphs.Morph) -> None:
    """Raise (or warn) for every element of this entity that changes physics and is not simulated."""
    problems = []
    bodies = range(rng.body_start, rng.body_start + rng.nbody)
    joints = range(rng.jnt_start, rng.jnt_start + rng.njnt)
    for j in joints:
        jt = int(mjm.jnt_type[j])
        if jt == mujoco.mjtJoint.mjJNT_BALL:
            problems.append(f"joint {_name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j)}: ball joints")
        if mjm.jnt_stiffness[j] != 0:
            problems.append(f"joint {_name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j)}: joint stiffness")
        dofs = range(mjm.jnt_dofadr[j], mjm.jnt_dofadr[j] + (6 if jt == 0 else 1))
        if np.any(mjm.dof_frictionloss[list(dofs)] != 0):
            problems.append(f"joint {_name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j)}: frictionloss")
        if mjm.jnt_actgravcomp[j]:
            problems.append(f"joint {_name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j)}: actuatorgravcomp")
    for b in bodies:  # gravity compensation is simulated when a whole kinematic tree shares one value
        root = int(mjm.body_rootid[b])
        if mjm.body_gravcomp[b] != mjm.body_gravcomp[root] and mjm.body_dofnum[root] + mjm.body_dofnum[b] > 0:
            problems.append(
                f"body {_name(mjm, mujoco.mjtObj.mjOBJ_BODY, b)}: gravcomp differs from its tree root's"
            )
    colliding = pairs.colliding_geoms(mjm)
    for g in range(mjm.ngeom):
        if mjm.geom_bodyid[g] not in bodies:
            continue
        if colliding[g] and int(mjm.geom_type[g]) not in pairs.GEOM_TYPES:
            kind = mujoco.mjtGeom(int(mjm.geom_type[g])).name[7:].lower()
            problems.append(f"geom {_name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g)}: {kind} collision geom")
    jnt_dofs = set()
    for j in joints:
        ndof = 6 if mjm.jnt_type[j] == JointType.FREE else 1
        jnt_dofs.update(range(mjm.jnt_dofadr[j], mjm.jnt_dofadr[j] + ndof))
    for a in range(mjm.nu):
        if mjm.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT:
            if mjm.jnt_dofadr[mjm.actuator_trnid[a, 0]] not in jnt_dofs:
                continue
        elif rng.njnt == 0:
            continue
        problems += [
            f"actuator {_name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a)}: {p}" for p in _actuator_problems(mjm, a)
        ]
    if problems:
        msg = f"{type(morph).__name__} {getattr(morph, 'file', '')}: unsupported elements: " + "; ".join(
            problems
        )
        if getattr(morph, "ignore_unsupported", False):
            warnings.warn(msg + " (ignored as asked)", stacklevel=3)
        else:
            raise UnsupportedModelError(msg + ". Pass ignore_unsupported=True to load without them.")


def _check_scene_options(mjm: mujoco.MjModel) -> None:
    problems = [f"{name}" for name in ("neq", "ntendon", "nflex") if getattr(mjm, name) > 0]
    if problems:
        names = {"neq": "equality constraints", "ntendon": "tendons", "nflex": "flexes"}
        raise UnsupportedModelError(
            "scene: unsupported elements: "
            + ", ".join(names[p] for p in problems)
            + " (sim_core simulates kinematic trees of hinge, slide and free joints)"
        )


def _actuator_problems(mjm: mujoco.MjModel, a: int) -> list[str]:
    out = []
    if mjm.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
        out.append("transmission other than a joint")
    if mjm.actuator_dyntype[a] != mujoco.mjtDyn.mjDYN_NONE:
        out.append("activation dynamics")
    if mjm.actuator_gaintype[a] != mujoco.mjtGain.mjGAIN_FIXED:
        out.append("non-fixed gain")
    gear = mjm.actuator_gear[a]
    if gear[0] != 1 or np.any(gear[1:] != 0):
        out.append(f"gear {gear.tolist()} (only 1 is supported)")
    if _actuator_mode(mjm, a) is None:
        out.append(
            f"gain/bias {mjm.actuator_gainprm[a, :3].tolist()}/"
            f"{mjm.actuator_biasprm[a, :3].tolist()} is not a motor, position or velocity servo"
        )
    return out


def _actuator_mode(mjm: mujoco.MjModel, a: int) -> tuple[CtrlMode, float, float] | None:
    """(mode, kp, kv) for a motor / position / velocity actuator, else None."""
    gain = float(mjm.actuator_gainprm[a, 0])
    b = mjm.actuator_biasprm[a, :3]
    if mjm.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE:
        return (CtrlMode.FORCE, 0.0, 0.0) if gain == 1 else None
    if mjm.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_AFFINE or b[0] != 0:
        return None
    if b[1] == -gain and b[1] != 0:
        return CtrlMode.POSITION, gain, float(-b[2])
    if b[1] == 0 and b[2] == -gain:
        return CtrlMode.VELOCITY, 0.0, gain
    return None


def model_from_mj(mjm: mujoco.MjModel) -> Model:
    """Turn a compiled, checked ``MjModel`` into a ``Model``."""
    nv = mjm.nv
    kp, kv = np.zeros(nv), np.zeros(nv)
    frange = np.tile([-np.inf, np.inf], (nv, 1))
    mode = np.full(nv, int(CtrlMode.FORCE), np.int32)
    for a in range(mjm.nu):
        if mjm.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        am = _actuator_mode(mjm, a)
        if am is None:
            continue
        d = mjm.jnt_dofadr[mjm.actuator_trnid[a, 0]]
        if mode[d] != CtrlMode.FORCE or kp[d] or kv[d]:
            raise UnsupportedModelError(
                f"actuator {_name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a)}: a second actuator on "
                f"dof {d}; sim_core drives each dof with at most one actuator"
            )
        mode[d], kp[d], kv[d] = int(am[0]), am[1], am[2]
        if mjm.actuator_forcelimited[a]:
            frange[d] = mjm.actuator_forcerange[a]
    names = lambda obj, n: tuple(mujoco.mj_id2name(mjm, obj, i) or "" for i in range(n))  # noqa: E731
    jnt_type = mjm.jnt_type.astype(np.int32)
    return Model(
        nq=mjm.nq,
        nv=nv,
        nbody=mjm.nbody,
        njnt=mjm.njnt,
        body_parentid=mjm.body_parentid.copy(),
        body_pos=mjm.body_pos.copy(),
        body_quat=mjm.body_quat.copy(),
        body_ipos=mjm.body_ipos.copy(),
        body_iquat=mjm.body_iquat.copy(),
        body_mass=mjm.body_mass.copy(),
        body_gravcomp=mjm.body_gravcomp.copy(),
        body_inertia=mjm.body_inertia.copy(),
        body_jntadr=mjm.body_jntadr.copy(),
        body_jntnum=mjm.body_jntnum.copy(),
        body_names=names(mujoco.mjtObj.mjOBJ_BODY, mjm.nbody),
        jnt_type=jnt_type,
        jnt_qposadr=mjm.jnt_qposadr.copy(),
        jnt_dofadr=mjm.jnt_dofadr.copy(),
        jnt_bodyid=mjm.jnt_bodyid.copy(),
        jnt_pos=mjm.jnt_pos.copy(),
        jnt_axis=mjm.jnt_axis.copy(),
        jnt_limited=mjm.jnt_limited.astype(bool) & (jnt_type != JointType.FREE),
        jnt_range=mjm.jnt_range.copy(),
        jnt_names=names(mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt),
        dof_parentid=mjm.dof_parentid.copy(),
        dof_bodyid=mjm.dof_bodyid.copy(),
        dof_jntid=mjm.dof_jntid.copy(),
        dof_armature=mjm.dof_armature.copy(),
        dof_damping=mjm.dof_damping.copy(),
        dof_kp=kp,
        dof_kv=kv,
        dof_force_range=frange,
        dof_ctrl_mode=mode,
        qpos0=mjm.qpos0.copy(),
        mjmodel=mjm,
    )


def initial_qpos(model: Model) -> np.ndarray:
    """(nq,) the reference configuration ``qpos0`` with limited joints clamped into their range
    (MuJoCo's qpos0 puts e.g. the Panda's joint4 at 0, outside its [-3.07, -0.07] range)."""
    q = model.qpos0.copy()
    for j in np.nonzero(model.jnt_limited)[0]:
        a = model.jnt_qposadr[j]
        q[a] = np.clip(q[a], *model.jnt_range[j])
    return q


def make_data(model: Model, nworld: int, device) -> Data:
    """Allocate Data for ``nworld`` envs at ``initial_qpos``, at rest, holding that pose where a
    position actuator drives a dof."""

    def rows(values, dtype=wp.float32):
        return wp.array(np.tile(np.asarray(values), (nworld, 1)), dtype=dtype, device=device)

    nv = model.nv
    zeros = np.zeros(nv)
    adr = dof_qposadr(model)
    return Data(
        qpos=rows(initial_qpos(model)),
        qvel=rows(zeros),
        xpos=wp.zeros((nworld, model.nbody), dtype=wp.vec3, device=device),
        xquat=wp.zeros((nworld, model.nbody), dtype=wp.vec4, device=device),
        qfrc_actuator=rows(zeros),
        qfrc_applied=rows(zeros),
        ctrl_mode=rows(model.dof_ctrl_mode, wp.int32),
        ctrl_position=rows(np.where(adr >= 0, initial_qpos(model)[adr], 0.0)),
        ctrl_velocity=rows(zeros),
        ctrl_force=rows(zeros),
        dof_kp=rows(model.dof_kp),
        dof_kv=rows(model.dof_kv),
        dof_force_lo=rows(np.maximum(model.dof_force_range[:, 0], -3.0e38)),
        dof_force_hi=rows(np.minimum(model.dof_force_range[:, 1], 3.0e38)),
        dof_damping=rows(model.dof_damping),
        body_inertial=wp.ones((nworld, max(1, len(inertial_slots(model)))), dtype=wp.vec4, device=device),
    )
