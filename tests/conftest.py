"""Shared fixtures: one sim_core runtime per test session, on WARPGYM_TEST_DEVICE (cpu by default)."""

import importlib.util
import os

import mujoco
import numpy as np
import pytest
import torch

import sim_core as sc

ASSETS = os.path.join(os.path.dirname(__file__), "assets")
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")


@pytest.fixture(scope="session", autouse=True)
def runtime():
    device = os.environ.get("WARPGYM_TEST_DEVICE", "cpu")
    sc.init(backend=sc.gpu if device.startswith("cuda") else sc.cpu, seed=0)
    yield sc.device
    sc.destroy()


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_scene(*morphs, n_envs=0, dt=0.01, substeps=1, gravity=(0.0, 0.0, -9.81), rigid_options=None):
    """Build a scene of the given morphs; returns (scene, entities)."""
    scene = sc.Scene(
        sim_options=sc.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
        rigid_options=rigid_options,
        profiling_options=sc.ProfilingOptions(show_FPS=False),
    )
    entities = [scene.add_entity(m) for m in morphs]
    scene.build(n_envs=n_envs)
    return scene, entities


def franka_scene(n_envs=0, **kw):
    scene, (_, franka) = make_scene(sc.morphs.Plane(), sc.morphs.MJCF(file="franka_panda"), n_envs=n_envs, **kw)
    return scene, franka


def mj_reference(scene):
    """MuJoCo model/data of the very model the scene simulates, contacts off (for the checks of the
    smooth dynamics; the contacts are checked in test_contacts.py)."""
    m = scene.mjmodel
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return m, mujoco.MjData(m)


def random_qpos(m, rng, n, margin=0.1):
    """(n, nq) joint positions inside the joint ranges (free joints: random pose)."""
    q = np.tile(m.qpos0, (n, 1))
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            q[:, a : a + 3] = rng.uniform(-0.5, 0.5, (n, 3))
            quat = rng.normal(size=(n, 4))
            q[:, a + 3 : a + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        else:
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-np.pi, np.pi)
            q[:, a] = rng.uniform(lo + margin * (hi - lo), hi - margin * (hi - lo), n)
    return q


def t32(x):
    return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=sc.device)
