#!/usr/bin/env python
"""Throughput benchmark of ``sim_core`` (batched Franka Panda + ground plane) against MuJoCo C.

What it measures
----------------
For each batch size ``n_envs`` (default 1, 64, 1024, 4096, 16384):

* **sim_core**: one scene built with ``n_envs`` envs: ``arm`` is a ``Plane`` and the bundled
  ``franka_panda`` MJCF; ``arm_cube`` adds a free 5 cm cube on the floor in front of the arm (contacts
  of the hand and finger pads with the floor and the cube, of the cube with the floor).
  After ``--warmup`` (200) untimed steps of random targets, which take the envs from the tidy
  start (cube at rest, hand above it) to the contact load of random commands (pads struck
  into the floor and the cube, cubes knocked about: a step there costs sim_core about 1.6 times
  what the first 100 cost; the next few hundred are its heaviest, and later ones, as the cubes
  drift, up to 1.2x cheaper again), the state is saved. Each timed round starts from that state
  (restored untimed, so both simulators time the same stretch of the same envs: a round that
  went on from where the last one stopped would time a lighter stretch at the sizes with more
  steps), ``sc.synchronize()`` is called and the clock starts; every timed
  step draws FRESH uniform random position targets inside each joint's range
  (``scene.mjmodel.jnt_range``) with ``torch.rand`` on the simulation device, passes them to
  ``franka.control_dofs_position`` and calls ``scene.step()``. ``sc.synchronize()`` is called
  again before the clock is read at the end. Result: env-steps/s = n_envs * steps / seconds.
  Target generation and the control call are inside the timed region. Contacts are on in both
  simulators (the random targets swing the arm into the floor and the cube now and then).
  ``cube_held`` is ``arm_cube`` with the cube in a grasp, the load a trained Lift or Push policy
  drives the env into: the warm-up closes the pads on the cube (joint targets from inverse
  kinematics: above it, down, close, lift it 10 cm) and then, like every timed step, draws the
  arm's targets uniformly within 0.02 rad of the pose that holds it, the fingers' targets shut.
  It times at most 100 steps (1 s) per round, over which sim_core keeps every cube held and MuJoCo
  most of them (its soft friction lets some slip, depending on the round's targets; the run prints
  the share each still holds).
* **MuJoCo C reference**: ``mujoco.rollout`` on the SAME compiled model (``scene.mjmodel``: same
  timestep = dt / substeps, same integrator; minus its visual-only geoms, which only pictures use)
  from the ``n_envs`` states sim_core's warm-up left (each env's qpos and qvel, so both simulate
  the same configurations), with uniform random controls from the same box as sim_core's targets
  (within ``actuator_ctrlrange``) for every env and step. That API takes the controls for the whole rollout
  up front, so they (and the output buffers) are prepared outside the timed region.

* **MuJoCo Warp** (``mujoco-warp``, ``pip install -e ".[bench]"``; on by default with ``--device
  cuda`` where it is installed, ``--mjwarp`` elsewhere): the same compiled model as the MuJoCo C
  column, from the same warm-up states, every world with fresh uniform random controls from the
  same box each step, drawn on the device by a Warp kernel (counter-based, so a CUDA graph can
  replay it). On CUDA one step (the draw and ``mujoco_warp.step``) is captured into a CUDA graph
  and replayed, as sim_core replays its own; contacts up to ``MJW_NCONMAX`` per world.

Threads: ``--threads K`` (default 1) runs both simulators on K host threads of the CPU: sim_core's
step shares its envs among K threads (``SimOptions(cpu_threads=K)``), and rollout gets a pool of K
threads with K ``MjData`` (K = 1: the calling thread only). ``--mj-nthread K`` sets MuJoCo's alone
(for a CUDA run against every host core). On the CPU torch gets K threads too, so the timed target
draws run on the same K threads as sim_core's step and the sim_core column uses K threads in all.
The script sets ``OMP_WAIT_POLICY=PASSIVE`` (unless it is set), so torch's OpenMP workers sleep
rather than spin on a core between the timed target draws.

Each size runs ``--repeats`` rounds (default 3) alternating the simulators and keeps each one's
best round, so a slow moment of a shared machine does not land on one side only.

The number of steps per size is chosen so each size does ~300k env-steps (``--quick``: ~20k), with
at least a few steps per size and a cap on the step count at small ``n_envs`` (a Python loop of
``scene.step()`` at n_envs=1 is much slower per env-step); ``--steps N`` forces N steps for both.

Unless ``--skip-compile`` is given, it also measures start-up time: a child Python process
(``sys.executable -c ...``) imports ``sim_core``, calls ``init``, builds the Franka scene, steps
once and synchronizes. It runs twice with the same fresh temporary ``WARP_CACHE_PATH`` (Warp's
kernel cache) and ``WARPGYM_CACHE`` (generated kernel sources): first with both empty (cold:
code generation + Warp compile), then again (warm: everything loaded from the caches). The times
reported are measured inside the child, from before ``import sim_core`` to after the first step.

How to run
----------
    export WARP_CACHE_PATH=/tmp/wpcache      # optional; Warp's kernel cache for the main process
    python scripts/bench_sim.py                          # full run, CPU
    python scripts/bench_sim.py --quick --n-envs 1 64 1024
    python scripts/bench_sim.py --device cuda --skip-compile          # with MuJoCo Warp if installed
    python scripts/bench_sim.py --threads 2 --scene arm_cube --skip-compile   # both on 2 threads
    python scripts/bench_sim.py --scene arm_cube cube_held --n-envs 1024 4096 16384 --skip-compile
    python scripts/bench_sim.py --n-envs 4096 --steps 200 --mj-nthread 2 --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

# torch's OpenMP workers spin for a while after each parallel op (the timed target draws at >= 4096
# envs) and would take a core from the simulators' own threads; passive, they sleep. Read once, when
# torch loads its OpenMP library, so it is set before the import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import warp as wp  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

DEFAULT_N_ENVS = (1, 64, 1024, 4096, 16384)
SCENES = ("arm", "arm_cube", "cube_held")


@dataclass
class SizeResult:
    scene: str
    n_envs: int
    sim_steps: int
    sim_seconds: float
    sim_env_steps_per_s: float
    sim_finite: bool
    mj_steps: int
    mj_seconds: float
    mj_env_steps_per_s: float
    build_seconds: float
    mjw_seconds: float | None = None  # MuJoCo Warp, sim_steps steps
    mjw_env_steps_per_s: float | None = None

    @property
    def ratio(self) -> float:
        return self.sim_env_steps_per_s / self.mj_env_steps_per_s

    @property
    def mjw_ratio(self) -> float | None:
        return self.sim_env_steps_per_s / self.mjw_env_steps_per_s if self.mjw_env_steps_per_s else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--n-envs",
        type=int,
        nargs="+",
        default=list(DEFAULT_N_ENVS),
        help="batch sizes to run (default: %(default)s)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="timed steps per size for both simulators (default: auto, ~300k env-steps)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=200,
        help="untimed steps of random targets before timing; both simulators then start from the "
        "states they reach (default: 200, by which the contact load has settled)",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--scene",
        choices=SCENES,
        nargs="+",
        default=list(SCENES),
        help="arm: floor + Franka; arm_cube: floor + Franka + a free cube; cube_held: arm_cube with "
        "the cube held between the pads (default: all three)",
    )
    p.add_argument("--quick", action="store_true", help="short run (~20k env-steps per size)")
    p.add_argument(
        "--skip-compile",
        action="store_true",
        help="skip the cold-compile / warm-start subprocess measurement",
    )
    p.add_argument(
        "--compile-n-envs",
        type=int,
        default=1,
        help="n_envs of the scene built in the start-up measurement (default: 1)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="host threads of both simulators on the CPU (sim_core's cpu_threads, rollout's pool)",
    )
    p.add_argument(
        "--mj-nthread",
        type=int,
        default=None,
        help="threads for mujoco.rollout alone (default: --threads)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rounds per size, alternating sim_core and MuJoCo; each side's best round is kept",
    )
    p.add_argument(
        "--gpu-scratch",
        choices=("env-minor", "env-major"),
        default="env-minor",
        help="layout of sim_core's contact-solver scratch on a GPU (sim_core.contact.buffers.env_minor; "
        "env-major: each env's in one piece, to compare)",
    )
    p.add_argument(
        "--mjwarp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time MuJoCo Warp (default: with --device cuda, if mujoco_warp is installed)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=str, default=None, help="also write the results to this file")
    p.add_argument("--png", type=str, default="bench_sim.png", help="plot file ('' for none)")
    args = p.parse_args(argv)
    if any(n < 1 for n in args.n_envs):
        p.error("--n-envs values must be >= 1")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be >= 1")
    if args.threads < 1:
        p.error("--threads must be >= 1")
    if args.mj_nthread is None:
        args.mj_nthread = args.threads
    if args.mj_nthread < 1:
        p.error("--mj-nthread must be >= 1")
    if args.mjwarp is None:
        args.mjwarp = args.device == "cuda" and importlib.util.find_spec("mujoco_warp") is not None
    elif args.mjwarp and importlib.util.find_spec("mujoco_warp") is None:
        p.error('--mjwarp: mujoco_warp is not installed (pip install -e ".[bench]")')
    return args


def step_counts(n_envs: int, args: argparse.Namespace, kind: str) -> tuple[int, int]:
    """(sim_core steps, MuJoCo steps) for one batch size; ``cube_held``: at most ``HOLD_STEPS``."""
    if args.steps is not None:
        return args.steps, args.steps
    target, min_steps, sim_cap, mj_cap = (20_000, 3, 50, 2_000) if args.quick else (300_000, 5, 1_000, 20_000)
    if kind == "cube_held":
        sim_cap = mj_cap = HOLD_STEPS
    want = math.ceil(target / n_envs)
    return max(min_steps, min(sim_cap, want)), max(min_steps, min(mj_cap, want))


def machine_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "mujoco": mujoco.__version__,
        "device": device,
    }
    if hasattr(os, "sched_getaffinity"):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    try:
        import warp as wp

        info["warp"] = wp.config.version
    except Exception:  # informational only
        info["warp"] = "?"
    if device == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def dof_ranges(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """Lower/upper range of every hinge/slide joint (the Franka's 9 dofs), in joint order."""
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    idx = [j for j in range(model.njnt) if int(model.jnt_type[j]) in scalar]
    if not idx:
        raise RuntimeError("the model has no hinge/slide joints")
    rng = np.asarray(model.jnt_range[idx], dtype=np.float64)
    limited = np.asarray(model.jnt_limited[idx], dtype=bool)
    if not limited.all():
        raise RuntimeError(f"joints {np.asarray(idx)[~limited].tolist()} have no range")
    return rng[:, 0].copy(), rng[:, 1].copy()


def ctrl_ranges(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """Control range of every actuator (the joint's range where ctrlrange is not limited)."""
    lo = np.asarray(model.actuator_ctrlrange[:, 0], dtype=np.float64).copy()
    hi = np.asarray(model.actuator_ctrlrange[:, 1], dtype=np.float64).copy()
    for a in range(model.nu):
        if not model.actuator_ctrllimited[a]:
            j = int(model.actuator_trnid[a, 0])
            lo[a], hi[a] = model.jnt_range[j]
    return lo, hi


CUBE_POS = (0.5, 0.0, 0.025)  # a 5 cm cube on the floor in front of the arm, within its reach
HOME = (0.0, 0.1, 0.0, -2.4, 0.0, 2.5, 0.785)  # hand pointing down ~17 cm above the cube, fingers along y
PAD_POINT = (0.0, 0.0, 0.1034)  # between the fingertips, in the hand's frame (m)
HOLD_LIFT = 0.10  # m: cube_held lifts the cube this far off the floor
HOLD_JITTER = 0.02  # rad: cube_held's arm targets are drawn uniformly this far around the holding pose
# cube_held times at most this many steps (1 s): MuJoCo's soft friction lets the cube creep down the
# pads, and after 2 s of jitter it has dropped 7% of them (a lighter load); sim_core's sticks
HOLD_STEPS = 100


@dataclass
class Drive:
    """How the arm is driven: the untimed warm-up, then fresh uniform random joint targets in the
    box ``[lo, hi]`` (9 dofs, one per actuator) every step, for both simulators.

    ``script``: the warm-up's scripted phases ``(targets (9,), steps)`` before its ``random_steps``
    steps of random targets from the box."""

    lo: np.ndarray
    hi: np.ndarray
    script: list[tuple[np.ndarray, int]]
    random_steps: int


def _ik(model: mujoco.MjModel, q: np.ndarray, point: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """Arm joint angles (from ``q``, 9 dofs) that put the hand's ``PAD_POINT`` at ``point`` with the
    hand's orientation ``rot`` (3x3): damped least squares on MuJoCo's Jacobian of the hand."""
    data, hand = mujoco.MjData(model), model.body("e1/hand").id
    q = q.copy()
    jp, jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    for _ in range(200):
        data.qpos[:9] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        r = data.xmat[hand].reshape(3, 3)
        p = data.xpos[hand] + r @ np.asarray(PAD_POINT)
        err = np.concatenate([point - p, 0.5 * sum(np.cross(r[:, i], rot[:, i]) for i in range(3))])
        mujoco.mj_jac(model, data, jp, jr, p, hand)
        jac = np.vstack([jp, jr])[:, :7]
        q[:7] += jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), err)
    return q


def drive(kind: str, model: mujoco.MjModel, warmup: int) -> Drive:
    """``arm``, ``arm_cube``: targets anywhere in the joints' ranges, after ``warmup`` steps of the
    same. ``cube_held``: the pads close on the cube (scripted: above it, down, close, lift it
    ``HOLD_LIFT``), then the arm's targets jitter by up to ``HOLD_JITTER`` around the pose that
    holds it, the fingers' targets stay shut (``warmup`` steps of that, then timed): the contact
    load of a grasp, every step."""
    lo, hi = dof_ranges(model)
    if kind != "cube_held":
        return Drive(lo, hi, [], warmup)
    home = np.array([*HOME, 0.04, 0.04])
    data = mujoco.MjData(model)
    data.qpos[:9] = home
    mujoco.mj_kinematics(model, data)
    rot = data.xmat[model.body("e1/hand").id].reshape(3, 3).copy()
    cube = np.asarray(CUBE_POS)
    above = _ik(model, home, cube + [0.0, 0.0, 0.1], rot)
    at = _ik(model, above, cube + [0.0, 0.0, 0.005], rot)
    held = _ik(model, at, cube + [0.0, 0.0, HOLD_LIFT], rot)  # the IK keeps home's open fingers
    shut = at.copy()
    shut[7:] = held[7:] = 0.0
    jitter = np.array([HOLD_JITTER] * 7 + [0.0, 0.0])
    script = [(above, 60), (at, 60), (shut, 40), (held, 100)]
    return Drive(np.maximum(held - jitter, lo), np.minimum(held + jitter, hi), script, warmup)


def add_entities(sc: Any, scene: Any, kind: str) -> Any:
    """Floor + Franka (+ a free 5 cm, 125 g cube for ``arm_cube`` and ``cube_held``); returns the Franka."""
    scene.add_entity(sc.morphs.Plane())
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    if kind != "arm":
        scene.add_entity(
            sc.morphs.Box(size=(0.05, 0.05, 0.05), pos=CUBE_POS), material=sc.materials.Rigid(rho=1000.0)
        )
    return franka


def build_scene(sc: Any, kind: str, n_envs: int, threads: int) -> tuple[Any, Any]:
    """The built scene of ``kind`` (``add_entities``) over ``n_envs`` envs and its Franka."""
    scene = sc.Scene(
        sim_options=sc.SimOptions(dt=0.01, substeps=1, cpu_threads=threads),
        profiling_options=sc.ProfilingOptions(show_FPS=False),
    )
    franka = add_entities(sc, scene, kind)
    scene.build(n_envs=n_envs)
    return scene, franka


def warm_up(scene: Any, franka: Any, box: Drive, n_envs: int, device: Any) -> Callable[[], None]:
    """Runs ``box``'s warm-up on the built scene; returns one step with fresh random targets drawn
    from its box on ``device`` (``torch.rand``)."""
    lo = torch.as_tensor(box.lo, dtype=torch.float32, device=device)
    span = torch.as_tensor(box.hi - box.lo, dtype=torch.float32, device=device)
    shape = (n_envs, lo.numel())

    def random_step() -> None:
        franka.control_dofs_position(torch.rand(shape, device=device) * span + lo)
        scene.step()

    for q, steps in box.script:
        targets = torch.as_tensor(q, dtype=torch.float32, device=device).expand(shape).contiguous()
        for _ in range(steps):
            franka.control_dofs_position(targets)
            scene.step()
    for _ in range(box.random_steps):
        random_step()
    return random_step


def bench_sim_core(sc: Any, n_envs: int, steps: int, args: argparse.Namespace, kind: str):
    """Build the scene, time ``steps`` steps with fresh random targets. Returns scene + stats."""
    t_build = time.perf_counter()
    scene, franka = build_scene(sc, kind, n_envs, args.threads)
    sc.synchronize()
    build_s = time.perf_counter() - t_build

    box = drive(kind, scene.mjmodel, args.warmup)
    random_step = warm_up(scene, franka, box, n_envs, sc.device)
    sc.synchronize()
    solver = scene.sim.rigid_solver
    qpos0, qvel0 = solver.get_qpos().clone(), solver.get_qvel().clone()
    start = tuple(t.detach().cpu().numpy().astype(np.float64) for t in (qpos0, qvel0))

    def timed() -> float:
        """Seconds for ``steps`` steps from the warm-up's end state (every round starts there, as
        MuJoCo's rollouts do: random commands move the load, see the module docstring), each with
        fresh random targets, synchronized. The restore is untimed; the contacts it makes stale are
        detected in the first timed step."""
        solver.set_qpos(qpos0)
        solver.set_qvel(qvel0)
        sc.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            random_step()
        sc.synchronize()
        return time.perf_counter() - t0

    return scene, start, build_s, timed, box


def physics_only_model(scene) -> mujoco.MjModel:
    """The scene's model without its visual-only geoms (no contacts, no mass: group >= 2 and
    contype = conaffinity = 0). sim_core never touches them; MuJoCo would spend time placing them."""
    spec = scene.mjspec.copy()
    for geom in list(spec.geoms):
        if geom.group >= 2 and geom.contype == 0 and geom.conaffinity == 0:
            spec.delete(geom)
    model = spec.compile()
    assert model.nq == scene.mjmodel.nq and np.allclose(model.body_mass, scene.mjmodel.body_mass)
    return model


def mujoco_states(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """MuJoCo full-physics states (n_envs, nstate) with the given (n_envs, nq) / (n_envs, nv)."""
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    nstate = mujoco.mj_stateSize(model, spec)
    out = np.empty((qpos.shape[0], nstate), dtype=np.float64)
    for i in range(qpos.shape[0]):
        data.qpos[:], data.qvel[:] = qpos[i], qvel[i]
        mujoco.mj_getState(model, data, out[i], spec)
    return out


def bench_mujoco(
    model: mujoco.MjModel, initial: np.ndarray, steps: int, nthread: int, seed: int, box: Drive
) -> tuple[float, np.ndarray]:
    """Seconds for ``mujoco.rollout`` of ``initial`` (n_envs, nstate) x steps with random controls
    in ``box`` (within the actuators' control ranges), and the states it ends in."""
    n_envs, nstate = initial.shape

    rng = np.random.default_rng(seed)
    control = rng.uniform(*control_box(model, box), size=(n_envs, steps, model.nu))
    state_out = np.zeros((n_envs, steps, nstate), dtype=np.float64)
    sensor_out = np.zeros((n_envs, steps, model.nsensordata), dtype=np.float64)

    datas = [mujoco.MjData(model) for _ in range(nthread)]
    pool_threads = 0 if nthread == 1 else nthread  # 0: run on the calling thread
    data_arg: Any = datas[0] if nthread == 1 else datas
    with mj_rollout.Rollout(nthread=pool_threads) as pool:
        pool.rollout(model, data_arg, initial[:1], control[:1, :1])  # untimed warm-up call
        t0 = time.perf_counter()
        pool.rollout(model, data_arg, initial, control, state=state_out, sensordata=sensor_out)
        seconds = time.perf_counter() - t0
    if not np.isfinite(state_out[:, -1]).all():
        print(f"  warning: MuJoCo state has non-finite values at n_envs={n_envs}")
    return seconds, state_out[:, -1]


MJW_NCONMAX = 64  # contacts per world MuJoCo Warp makes room for (sim_core's default budget)


@wp.kernel(enable_backward=False)
def _random_ctrl(
    seed: int,
    counter: wp.array(dtype=wp.int32),
    lo: wp.array(dtype=wp.float32),
    hi: wp.array(dtype=wp.float32),
    ctrl: wp.array2d(dtype=wp.float32),
):
    """Fresh uniform controls in ``[lo, hi]`` for every world, numbered by the step ``counter[0]``."""
    w, a = wp.tid()
    state = wp.rand_init(seed, (counter[0] * ctrl.shape[0] + w) * ctrl.shape[1] + a)
    ctrl[w, a] = lo[a] + (hi[a] - lo[a]) * wp.randf(state)


@wp.kernel(enable_backward=False)
def _count_step(counter: wp.array(dtype=wp.int32)):
    counter[0] = counter[0] + 1


class MjWarpRun:
    """MuJoCo Warp on ``model`` with ``n_envs`` worlds from the states ``qpos``/``qvel`` (n_envs, nq /
    nv), each step with fresh random controls in ``box`` (``_random_ctrl``); compiled (and on CUDA
    captured into a graph of one step) when made, so ``timed`` times steps only."""

    def __init__(
        self, model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, box: Drive, seed: int, device: str
    ):
        import mujoco_warp as mjw

        self.mjw, n = mjw, qpos.shape[0]
        self.device = wp.get_device("cuda:0" if device == "cuda" else "cpu")
        lo, hi = control_box(model, box)
        with wp.ScopedDevice(self.device):
            self.m = mjw.put_model(model)
            # constraint rows: a pyramidal cone's 2 (condim - 1) per contact, and joint limits
            nefc = MJW_NCONMAX * 2 * (int(model.geom_condim.max()) - 1) + 2 * model.nv
            self.d = mjw.put_data(model, mujoco.MjData(model), nworld=n, nconmax=MJW_NCONMAX, njmax=nefc)
            self.qpos0 = wp.array(qpos.astype(np.float32))
            self.qvel0 = wp.array(qvel.astype(np.float32))
            self.lo = wp.array(lo.astype(np.float32))
            self.hi = wp.array(hi.astype(np.float32))
            self.counter = wp.zeros(1, dtype=wp.int32)
        self.seed = seed
        self._restore()
        self._step()  # compiles every kernel the step launches
        self.graph = None
        if self.device.is_cuda:
            with wp.ScopedCapture(device=self.device) as capture:
                self._step()
            self.graph = capture.graph

    def _step(self) -> None:
        d = self.d
        wp.launch(
            _random_ctrl,
            dim=d.ctrl.shape,
            inputs=[self.seed, self.counter, self.lo, self.hi, d.ctrl],
            device=self.device,
        )
        wp.launch(_count_step, dim=1, inputs=[self.counter], device=self.device)
        self.mjw.step(self.m, d)

    def _restore(self) -> None:
        wp.copy(self.d.qpos, self.qpos0)
        wp.copy(self.d.qvel, self.qvel0)
        self.d.qacc_warmstart.zero_()
        self.d.time.zero_()

    def timed(self, steps: int) -> float:
        """Seconds for ``steps`` steps from the warm-up's end state (restored untimed), synchronized."""
        self._restore()
        wp.synchronize_device(self.device)
        t0 = time.perf_counter()
        with wp.ScopedDevice(self.device):
            for _ in range(steps):
                if self.graph is not None:
                    wp.capture_launch(self.graph)
                else:
                    self._step()
        wp.synchronize_device(self.device)
        return time.perf_counter() - t0

    def overflowed(self) -> bool:
        """More contacts were detected than the worlds have room for (``MJW_NCONMAX`` each)."""
        return int(self.d.nacon.numpy()[0]) > self.d.naconmax


def control_box(model: mujoco.MjModel, box: Drive) -> tuple[np.ndarray, np.ndarray]:
    """``box`` clipped to the actuators' control ranges (one position actuator per dof)."""
    lo, hi = ctrl_ranges(model)
    return np.clip(box.lo, lo, hi), np.clip(box.hi, lo, hi)


def cube_height(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray | None:
    """``(n_envs,)`` height of the free cube's centre in each row of ``qpos``; None without one."""
    free = np.flatnonzero(model.jnt_type == mujoco.mjtJoint.mjJNT_FREE)
    return qpos[:, model.jnt_qposadr[free[0]] + 2] if free.size else None


def mj_contact_activity(
    model: mujoco.MjModel, state: np.ndarray, steps: int, seed: int, box: Drive
) -> tuple[float, float, float]:
    """Untimed: (fraction of steps with contacts, mean ncon, mean nefc) of one MuJoCo env from the
    full-physics ``state`` driven by the benchmark's random controls. Shows how much of the
    reference's work is contacts."""
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    ctrl = np.random.default_rng(seed).uniform(*control_box(model, box), size=(steps, model.nu))
    ncon = np.empty(steps)
    nefc = np.empty(steps)
    for i in range(steps):
        data.ctrl[:] = ctrl[i]
        mujoco.mj_step(model, data)
        ncon[i], nefc[i] = data.ncon, data.nefc
    return float((ncon > 0).mean()), float(ncon.mean()), float(nefc.mean())


_CHILD = textwrap.dedent(
    """
    import time
    t0 = time.perf_counter()
    import sim_core as sc
    t_import = time.perf_counter()
    sc.init(backend=getattr(sc, {backend!r}), seed=0)
    t_init = time.perf_counter()
    scene = sc.Scene(
        sim_options=sc.SimOptions(dt=0.01, substeps=1),
        profiling_options=sc.ProfilingOptions(show_FPS=False),
    )
    scene.add_entity(sc.morphs.Plane())
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    scene.build(n_envs={n_envs})
    t_build = time.perf_counter()
    scene.step()
    sc.synchronize()
    t_step = time.perf_counter()
    import json
    print("BENCH_CHILD " + json.dumps(dict(
        total=t_step - t0, import_=t_import - t0, init=t_init - t_import,
        build=t_build - t_init, first_step=t_step - t_build)))
    """
)


def run_child(backend: str, n_envs: int, env: dict[str, str]) -> dict[str, float]:
    code = _CHILD.format(backend=backend, n_envs=n_envs)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    wall = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_CHILD "):
            out = json.loads(line[len("BENCH_CHILD ") :])
            out["process_wall"] = wall
            return out
    raise RuntimeError(
        f"start-up child failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


def bench_compile(backend: str, n_envs: int) -> dict[str, dict[str, float]]:
    tmp = tempfile.mkdtemp(prefix="warpgym_bench_")
    try:
        env = dict(os.environ)
        env["WARP_CACHE_PATH"] = os.path.join(tmp, "warp")
        env["WARPGYM_CACHE"] = os.path.join(tmp, "warpgym")
        cold = run_child(backend, n_envs, env)
        warm = run_child(backend, n_envs, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"cold": cold, "warm": warm}


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def bench_size(sc: Any, backend: str, kind: str, n: int, args: argparse.Namespace, first: bool) -> SizeResult:
    """Both simulators on one scene at one batch size, alternating rounds."""
    sim_steps, mj_steps = step_counts(n, args, kind)
    sc.init(backend=getattr(sc, backend), seed=args.seed)
    mjw = None
    try:
        scene, (qpos, qvel), build_s, timed, box = bench_sim_core(sc, n, sim_steps, args, kind)
        model = physics_only_model(scene)
        initial = mujoco_states(model, qpos, qvel)  # where sim_core's warm-up left each env
        if first:
            print(
                f"scene {kind}: nq={model.nq} nv={model.nv} nu={model.nu} ngeom={model.ngeom} "
                f"timestep={model.opt.timestep} "
                f"integrator={mujoco.mjtIntegrator(model.opt.integrator).name}, "
                f"sim_core contact budget {scene.sim.rigid_solver.max_contacts} per env"
            )
            activity_steps = min(1000, mj_steps)
            frac, ncon, nefc = mj_contact_activity(model, initial[0], activity_steps, args.seed, box)
            print(
                f"  MuJoCo contact activity (env 0 from the warm-up's end, {activity_steps} untimed steps, "
                "random controls): "
                f"contacts in {100 * frac:.1f}% of steps, mean ncon {ncon:.2f}, "
                f"mean nefc {nefc:.2f}"
            )
        mjw = MjWarpRun(model, qpos, qvel, box, args.seed, args.device) if args.mjwarp else None
        # alternate the simulators and keep each one's best round: the shared VM's speed drifts
        sim_s, mj_s, mjw_s = float("inf"), float("inf"), float("inf")
        for r in range(args.repeats):
            sim_s = min(sim_s, timed())
            seconds, mj_end = bench_mujoco(model, initial, mj_steps, args.mj_nthread, args.seed + r, box)
            mj_s = min(mj_s, seconds)
            if mjw is not None:
                mjw_s = min(mjw_s, mjw.timed(sim_steps))
        if mjw is not None and mjw.overflowed():
            print(f"  warning: MuJoCo Warp dropped contacts beyond {MJW_NCONMAX} per world at n_envs={n}")
        solver = scene.sim.rigid_solver
        finite = bool(torch.isfinite(solver.get_qpos()).all().item())
        ncon = float(solver.get_contacts()["valid_mask"].sum(-1).float().mean()) if solver.contacts else 0.0
        held = ""
        if kind == "cube_held":  # all still hold the cube (a dropped one is a lighter load)
            sim_z = cube_height(model, solver.get_qpos().cpu().numpy())
            mj_z = cube_height(model, mj_end[:, 1 : 1 + model.nq])
            up = 0.5 * HOLD_LIFT
            shares = f"sim_core {np.mean(sim_z > up):.0%}, MuJoCo {np.mean(mj_z > up):.0%}"
            if mjw is not None:
                shares += f", MuJoCo Warp {np.mean(cube_height(model, mjw.d.qpos.numpy()) > up):.0%}"
            held = f" | cubes above {up * 100:.0f} cm: {shares}"
    finally:
        scene = mjw = None
        sc.destroy()
    r = SizeResult(
        scene=kind,
        n_envs=n,
        sim_steps=sim_steps,
        sim_seconds=sim_s,
        sim_env_steps_per_s=n * sim_steps / sim_s,
        sim_finite=finite,
        mj_steps=mj_steps,
        mj_seconds=mj_s,
        mj_env_steps_per_s=n * mj_steps / mj_s,
        build_seconds=build_s,
        mjw_seconds=mjw_s if args.mjwarp else None,
        mjw_env_steps_per_s=n * sim_steps / mjw_s if args.mjwarp else None,
    )
    print(
        f"  {kind} n_envs={n}: build {build_s:.2f}s | sim_core {sim_steps} steps in {sim_s:.3f}s"
        f" (contacts per env at the end: {ncon:.1f}) | MuJoCo {mj_steps} steps in {mj_s:.3f}s{held}"
        + (f" | MuJoCo Warp {sim_steps} steps in {mjw_s:.3f}s" if args.mjwarp else "")
        + ("" if finite else " | WARNING: non-finite sim_core qpos"),
        flush=True,
    )
    return r


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    backend = "gpu" if args.device == "cuda" else "cpu"
    torch.manual_seed(args.seed)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)  # the target draws on sim_core's threads (module docstring)

    import sim_core as sc
    from sim_core.contact import buffers

    buffers.GPU_SCRATCH_ENV_MINOR = args.gpu_scratch == "env-minor"
    info = machine_info(args.device) | ({"gpu_scratch": args.gpu_scratch} if args.device == "cuda" else {})
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    sim_threads = args.threads if args.device == "cpu" else "-"
    print(f"host threads: sim_core {sim_threads} (--threads), mujoco.rollout {args.mj_nthread} (--mj-nthread)")

    results: list[SizeResult] = []
    for kind in args.scene:
        for n in args.n_envs:
            results.append(bench_size(sc, backend, kind, n, args, first=n == args.n_envs[0]))

    head = f"{'scene':>9} | {'n_envs':>8} | {'sim_core env-steps/s':>20} | {'MuJoCo C env-steps/s':>20} | ratio"
    if args.mjwarp:
        head += f" | {'MuJoCo Warp env-steps/s':>23} | ratio"
    print()
    print(f"device={args.device}, sim_core threads={sim_threads}, MuJoCo threads={args.mj_nthread}")
    print(head)
    print("-" * len(head))
    for r in results:
        row = (
            f"{r.scene:>9} | {r.n_envs:>8} | {fmt_rate(r.sim_env_steps_per_s):>20} | "
            f"{fmt_rate(r.mj_env_steps_per_s):>20} | {r.ratio:5.2f}x"
        )
        if args.mjwarp:
            row += f" | {fmt_rate(r.mjw_env_steps_per_s):>23} | {r.mjw_ratio:5.2f}x"
        print(row)

    if args.png:
        from _plots import throughput_png

        series = {}
        for kind in args.scene:
            rows = [r for r in results if r.scene == kind]
            series[f"sim_core, {kind}"] = [r.sim_env_steps_per_s for r in rows]
            series[f"MuJoCo C, {kind}"] = [r.mj_env_steps_per_s for r in rows]
            if args.mjwarp:
                series[f"MuJoCo Warp, {kind}"] = [r.mjw_env_steps_per_s for r in rows]
        throughput_png(
            args.png,
            list(args.n_envs),
            series,
            f"Franka Panda step, {args.device} (threads: sim_core {sim_threads}, MuJoCo {args.mj_nthread})",
        )

    compile_res: dict[str, dict[str, float]] | None = None
    if not args.skip_compile:
        print()
        print(f"start-up (child process, n_envs={args.compile_n_envs}, device={args.device}):")
        compile_res = bench_compile(backend, args.compile_n_envs)
        for kind, c in compile_res.items():
            print(
                f"  {kind:>4}: {c['total']:.2f}s import->first step (import {c['import_']:.2f}s,"
                f" init {c['init']:.2f}s, build {c['build']:.2f}s,"
                f" first step {c['first_step']:.2f}s; process wall {c['process_wall']:.2f}s)"
            )

    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "machine": info,
                    "args": vars(args),
                    "sizes": [asdict(r) | {"ratio": r.ratio, "mjw_ratio": r.mjw_ratio} for r in results],
                    "startup": compile_res,
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
