"""The Genesis-style API: shapes, envs_idx forms, views, immediate updates, errors, determinism."""

import inspect
import os
import runpy
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch
from conftest import ASSETS, franka_scene, make_scene, t32

import sim_core as sc
from sim_core import host_threads, openmp_spin

HOME = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8, 0.02, 0.02]


def test_import_before_init_and_device():
    """Before ``init()`` (in a fresh interpreter: this session's fixture has called it here) the
    package imports, ``device`` and ``backend`` are None and building a scene says to call init;
    after it they name the backend, and ``destroy()`` forgets them."""
    script = textwrap.dedent(
        """
        import pytest
        import torch

        import sim_core as sc

        assert not sc.is_initialized() and sc.device is None and sc.backend is None
        assert sc.morphs.Plane() is not None  # morphs are plain descriptions
        with pytest.raises(sc.NotInitializedError, match="init"):
            sc.Scene()
        sc.init(backend=sc.cpu)
        assert sc.device == torch.device("cpu") and sc.backend is sc.cpu
        sc.destroy()
        assert sc.device is None and sc.backend is None
        print("ok")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.splitlines()[-1:] == ["ok"], run.stderr
    assert sc.device is not None and sc.backend in (sc.cpu, sc.gpu)


def test_unbatched_shapes():
    scene, franka = franka_scene(0)
    assert franka.n_dofs == 9 and scene.sim.rigid_solver.n_qs == 9
    assert franka.get_dofs_position().shape == (9,)
    assert franka.get_links_pos().shape == (franka.n_links, 3)
    assert franka.get_links_quat().shape == (franka.n_links, 4)
    assert scene.sim.rigid_solver.get_qpos().shape == (9,)
    assert franka.get_link("hand").get_pos().shape == (3,)
    franka.control_dofs_position(t32(HOME))
    scene.step()
    assert franka.get_dofs_force().shape == (9,)
    with pytest.raises(sc.EnvsIdxError, match="n_envs=0"):
        franka.get_dofs_position(envs_idx=[0])


def test_batched_shapes_views_and_outputs():
    scene, franka = franka_scene(5)
    q = franka.get_dofs_position()
    assert q.shape == (5, 9) and q.dtype == torch.float32 and q.device == sc.device
    assert franka.get_links_pos().shape == (5, franka.n_links, 3)
    assert franka.get_dofs_position([1, 3]).shape == (5, 2)
    assert franka.get_dofs_position(envs_idx=[4, 0]).shape == (2, 9)
    # a full read is a view of the simulator's memory: it follows the state
    franka.control_dofs_position(t32(HOME))
    scene.step()
    assert torch.equal(q, franka.get_dofs_position())


@pytest.mark.parametrize(
    "envs_idx",
    [
        [1, 3],
        np.array([1, 3]),
        torch.tensor([1, 3]),
        np.array([0, 1, 0, 1, 0], bool),
        torch.tensor([False, True, False, True, False]),
    ],
    ids=["list", "numpy", "tensor", "numpy-mask", "torch-mask"],
)
def test_envs_idx_forms_touch_only_selected_envs(envs_idx):
    scene, franka = franka_scene(5)
    before = franka.get_dofs_position().clone()
    target = t32(HOME).expand(2, 9) + 0.01
    franka.set_dofs_position(target, envs_idx=envs_idx)
    after = franka.get_dofs_position()
    torch.testing.assert_close(after[[1, 3]], target, rtol=0, atol=0)
    torch.testing.assert_close(after[[0, 2, 4]], before[[0, 2, 4]], rtol=0, atol=0)


def test_mask_with_full_batch_rows_and_broadcast():
    scene, franka = franka_scene(4)
    mask = torch.tensor([True, False, True, False], device=sc.device)
    full = torch.arange(36, dtype=torch.float32).reshape(4, 9) * 1e-3
    franka.set_dofs_velocity(full, envs_idx=mask)
    v = franka.get_dofs_velocity()
    torch.testing.assert_close(v[mask], full.to(sc.device)[mask])
    assert bool((v[~mask] == 0).all())
    franka.set_dofs_kp(t32([5.0] * 9), envs_idx=[2])  # a 1-D command broadcasts to the selection
    kp = franka.get_dofs_kp()
    assert bool((kp[2] == 5).all())
    expected = torch.tensor([1000, 1000, 750, 750, 300, 300, 300, 350, 350.0], device=sc.device)
    torch.testing.assert_close(kp[[0, 1, 3]], expected.expand(3, 9), rtol=0, atol=0)


def test_set_updates_links_immediately():
    scene, franka = franka_scene(2)
    hand = franka.get_link("hand")
    p0 = hand.get_pos().clone()
    franka.set_dofs_position(t32([0.5]), dofs_idx_local=[0], envs_idx=[1])
    p1 = hand.get_pos()
    torch.testing.assert_close(p1[0], p0[0])
    assert float((p1[1] - p0[1]).norm()) > 1e-3
    assert bool((franka.get_dofs_velocity() == 0).all())


def test_joint_and_link_lookup():
    scene, franka = franka_scene(0)
    assert franka.get_joint("finger_joint2").dofs_idx_local == [8]
    assert franka.get_link("link7").idx_local == 7
    with pytest.raises(KeyError, match="no joint"):
        franka.get_joint("nope")


def test_bundled_name_and_path_load_the_same_model():
    from sim_core.morphs import ASSETS_DIR

    a = sc.morphs.MJCF(file="franka_panda")
    b = sc.morphs.MJCF(file=str(ASSETS_DIR / "franka_panda.xml"))
    assert a.file == b.file
    with pytest.raises(FileNotFoundError, match="bundled"):
        sc.morphs.MJCF(file="no_such_robot")


def test_urdf_loads_and_swings():
    scene, (pend,) = make_scene(sc.morphs.URDF(file=os.path.join(ASSETS, "pendulum.urdf")), n_envs=0)
    assert pend.n_dofs == 1
    pend.set_dofs_position(t32([0.3]))
    scene.step()
    assert float(pend.get_dofs_velocity()[0]) < 0  # gravity pulls it back


def test_unsupported_elements_raise_unless_ignored():
    path = os.path.join(ASSETS, "unsupported.xml")
    scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
    scene.add_entity(sc.morphs.MJCF(file=path))
    with pytest.raises(sc.UnsupportedModelError, match="ball_joint"):
        scene.build()
    ref = os.path.join(
        os.path.dirname(__file__),
        "..",
        "..",
        "shared",
        "reference",
        "franka_panda",
        "mjx_scene.xml",
    )
    if os.path.exists(ref):  # Menagerie's panda has a finger equality constraint
        scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
        scene.add_entity(sc.morphs.MJCF(file=ref))
        with pytest.raises(sc.UnsupportedModelError, match="equality"):
            scene.build()


def test_reset_restores_initial_state_of_selected_envs():
    scene, franka = franka_scene(3)
    q_init = franka.get_dofs_position().clone()
    franka.control_dofs_position(t32(HOME))
    for _ in range(5):
        scene.step()
    moved = franka.get_dofs_position().clone()
    scene.reset(envs_idx=[1])
    q = franka.get_dofs_position()
    torch.testing.assert_close(q[1], q_init[1], rtol=0, atol=0)
    torch.testing.assert_close(q[[0, 2]], moved[[0, 2]], rtol=0, atol=0)
    assert bool((franka.get_dofs_velocity()[1] == 0).all())


# ---- bad input: clear errors, nothing half-applied ------------------------------------------


def _state(scene):
    s = scene.sim.rigid_solver
    return {k: v.clone() for view in (s.state, s.params) for k, v in vars(view).items()}


BAD_CALLS = {
    "wrong shape": (
        lambda f: f.control_dofs_position(torch.zeros(4, 8)),
        sc.ShapeError,
        r"\(4, 9\)",
    ),
    "wrong batch": (lambda f: f.control_dofs_position(torch.zeros(3, 9)), sc.ShapeError, "4"),
    "subset size": (
        lambda f: f.control_dofs_position(torch.zeros(3, 9), envs_idx=[0, 1]),
        sc.ShapeError,
        "2",
    ),
    "envs_idx out of range": (
        lambda f: f.control_dofs_position(torch.zeros(1, 9), envs_idx=[4]),
        sc.EnvsIdxError,
        r"\[0, 3\]",
    ),
    "envs_idx negative": (
        lambda f: f.control_dofs_position(torch.zeros(1, 9), envs_idx=[-1]),
        sc.EnvsIdxError,
        "min -1",
    ),
    "envs_idx duplicated": (
        lambda f: f.control_dofs_position(torch.zeros(2, 9), envs_idx=[1, 1]),
        sc.EnvsIdxError,
        "duplicated",
    ),
    "mask length": (
        lambda f: f.control_dofs_position(torch.zeros(9), envs_idx=[True, False]),
        sc.EnvsIdxError,
        r"\(4,\)",
    ),
    "dofs_idx_local out of range": (
        lambda f: f.control_dofs_position(torch.zeros(1), dofs_idx_local=[9]),
        sc.DofsIdxError,
        r"\[0, 8\]",
    ),
    "nan command": (
        lambda f: f.control_dofs_position(torch.full((4, 9), float("nan"))),
        sc.InvalidValueError,
        "NaN",
    ),
    "inf state": (
        lambda f: f.set_dofs_position(torch.full((9,), float("inf"))),
        sc.InvalidValueError,
        "NaN or inf",
    ),
    "negative gain": (lambda f: f.set_dofs_kp(-torch.ones(9)), sc.InvalidValueError, ">= 0"),
    "force range order": (
        lambda f: f.set_dofs_force_range(torch.ones(9), -torch.ones(9)),
        sc.InvalidValueError,
        "lower",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_input_raises_and_leaves_state_unchanged(case):
    call, exc, pattern = BAD_CALLS[case]
    scene, franka = franka_scene(4)
    before = _state(scene)
    with pytest.raises(exc, match=pattern):
        call(franka)
    after = _state(scene)
    for k in before:
        assert torch.equal(before[k], after[k]), k


def test_every_setter_and_controller_can_skip_its_value_checks():
    """``unsafe=True``, as in Genesis: the values are written as given, without reading them on the
    host (the caller vouches for them)."""
    scene, franka = franka_scene(4)
    methods = [m for m in dir(franka) if m.startswith(("set_", "control_"))]
    assert [m for m in methods if "unsafe" not in inspect.signature(getattr(franka, m)).parameters] == []
    franka.set_dofs_force_range(torch.ones(9), -torch.ones(9), unsafe=True)  # refused when checked
    lower, upper = franka.get_dofs_force_range()
    assert torch.equal(lower.cpu(), torch.ones(4, 9)) and torch.equal(upper.cpu(), -torch.ones(4, 9))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_cpu_threads_must_be_a_positive_integer(bad):
    with pytest.raises(sc.InvalidValueError, match="cpu_threads"):
        sc.SimOptions(cpu_threads=bad)


def test_importing_warpgym_shortens_openmp_busy_wait_before_torch_loads():
    script = textwrap.dedent(
        """
        import os, sys

        seen = []

        class Watch:  # records GOMP_SPINCOUNT as torch starts loading
            def find_spec(self, name, path=None, target=None):
                if name == "torch" and not seen:
                    seen.append(os.environ.get("GOMP_SPINCOUNT"))

        sys.meta_path.insert(0, Watch())
        import warpgym

        print(seen)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and run.stdout.splitlines()[-1:] == ["['1000']"], run.stderr


@pytest.mark.parametrize(
    ("preset", "torch_loaded", "expected"),
    [
        ({}, False, "1000"),
        ({"GOMP_SPINCOUNT": "5"}, False, "5"),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, False, None),
        ({}, True, None),
    ],
)
def test_openmp_busy_wait_is_left_to_the_user_and_to_loaded_torch(monkeypatch, preset, torch_loaded, expected):
    for key in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in preset.items():
        monkeypatch.setenv(key, value)
    if not torch_loaded:
        monkeypatch.delitem(sys.modules, "torch")
    runpy.run_path(openmp_spin.__file__)
    assert os.environ.get("GOMP_SPINCOUNT") == expected


class _Share:
    """A stand-in for a recorded launch: records the thread it ran on, may sleep, then raise."""

    def __init__(self, seconds=0.0, error=None):
        self.seconds, self.error, self.thread = seconds, error, None

    def launch(self):
        time.sleep(self.seconds)
        self.thread = threading.current_thread()
        if self.error is not None:
            raise self.error


def test_a_shared_launch_runs_every_share_and_raises_the_first_error_after_all_finish():
    shares = [_Share(), _Share(), _Share()]
    host_threads.SharedLaunch(shares).launch()
    assert shares[0].thread is threading.current_thread()
    assert len({s.thread for s in shares}) == 3
    slow, failing = _Share(seconds=0.05), _Share(error=ValueError("share 2"))
    with pytest.raises(ValueError, match="share 2"):
        host_threads.SharedLaunch([_Share(), slow, failing]).launch()
    assert slow.thread is not None  # waited for before raising
    first = _Share(error=KeyError("caller"))
    with pytest.raises(KeyError, match="caller"):
        host_threads.SharedLaunch([first, _Share(error=ValueError("worker"))]).launch()
    again = [_Share(), _Share()]
    host_threads.SharedLaunch(again).launch()  # the workers are free again
    assert all(s.thread is not None for s in again)


def test_jobs_that_run_jobs_run_theirs_on_their_own_thread():
    """A job of ``run_jobs`` that runs jobs (a shared launch of an env stepped in a job) runs them
    one after another on its own thread, re-raising the first error, instead of waiting forever
    for the taken workers."""
    inner = {}

    def job(name, error=None):
        def run():
            shares = [_Share(), _Share(error=error)]
            try:
                host_threads.SharedLaunch(shares).launch()
            finally:
                inner[name] = (threading.current_thread(), {s.thread for s in shares})

        return run

    host_threads.run_jobs([job("caller"), job("worker")])
    assert inner["caller"] == (threading.current_thread(), {threading.current_thread()})
    worker, ran_on = inner["worker"]
    assert worker is not threading.current_thread() and ran_on == {worker}
    with pytest.raises(ValueError, match="inner"):
        host_threads.run_jobs([job("caller"), job("worker", ValueError("inner"))])
    host_threads.SharedLaunch(shares := [_Share(), _Share()]).launch()  # shared again outside a job
    assert shares[1].thread is not threading.current_thread()


def test_a_light_launch_shares_its_threads_only_above_its_minimum():
    def make(tid0, stride, dim):
        return (tid0, stride, dim)

    light = host_threads.LIGHT_ENVS_PER_SHARE // host_threads.ENVS_PER_THREAD  # launch threads
    assert host_threads.record(make, 16, 2, "cpu").launches == [(0, 2, 8), (1, 2, 8)]
    assert host_threads.record(make, 16, 2, "cpu", light).launches == [(0, 1, 16)]  # 1024 envs
    assert host_threads.record(make, 2 * light, 2, "cpu", light).launches == [(0, 2, light), (1, 2, light)]
    assert host_threads.record(make, 2 * light - 1, 3, "cpu", light).launches == [(0, 1, 2 * light - 1)]


def test_a_shared_launch_works_in_a_forked_child():
    host_threads.SharedLaunch([_Share(), _Share()]).launch()  # the parent's workers exist
    pid = os.fork()
    if pid == 0:  # the child: its workers start anew
        code = 1
        try:
            shares = [_Share(), _Share()]
            host_threads.SharedLaunch(shares).launch()
            code = 0 if shares[1].thread is not threading.current_thread() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_zero_norm_quaternion_rejected():
    scene, (ent,) = make_scene(sc.morphs.MJCF(file=os.path.join(ASSETS, "free_and_pendulum.xml")))
    q = scene.sim.rigid_solver.get_qpos().clone()
    q[3:7] = 0
    with pytest.raises(sc.InvalidValueError, match="zero norm"):
        scene.sim.rigid_solver.set_qpos(q)
    with pytest.raises(sc.InvalidValueError, match="quat"):
        sc.morphs.MJCF(file="franka_panda", quat=(0, 0, 0, 0))


def test_calls_before_build_and_after_build():
    scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    with pytest.raises(sc.NotBuiltError):
        franka.get_dofs_position()
    with pytest.raises(sc.NotBuiltError):
        franka.control_dofs_position(torch.zeros(9))
    with pytest.raises(sc.NotBuiltError):
        scene.step()
    scene.build()
    with pytest.raises(sc.AlreadyBuiltError):
        scene.add_entity(sc.morphs.Plane())


# ---- determinism and independence ---------------------------------------------------------


def _rollout(n_envs, seed, steps=30):
    scene, franka = franka_scene(n_envs)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        noise = 0.5 * torch.randn(max(n_envs, 1), 9, generator=g).to(sc.device)
        franka.control_dofs_position(t32(HOME) + (noise if n_envs else noise[0]))
        scene.step()
    return scene.sim.rigid_solver.get_qpos().clone(), scene.sim.rigid_solver.get_qvel().clone()


def test_same_calls_give_bit_identical_states():
    a = _rollout(6, seed=7)
    b = _rollout(6, seed=7)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_each_env_evolves_as_it_would_alone():
    scene, franka = franka_scene(3)
    single, f1 = franka_scene(0)
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        cmd = t32(HOME) + 0.5 * torch.randn(3, 9, generator=g).to(sc.device)
        franka.control_dofs_position(cmd)
        f1.control_dofs_position(cmd[2])
        scene.step()
        single.step()
    assert torch.equal(franka.get_dofs_position()[2], f1.get_dofs_position())


# ---- FPS meter -------------------------------------------------------------------------------


def test_fps_meter_reports_completed_steps(capsys):
    scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=True, FPS_interval=0.05))
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    scene.build(n_envs=8)
    import time

    t_end = time.perf_counter() + 0.3
    while time.perf_counter() < t_end:
        franka.control_dofs_position(t32(HOME))
        scene.step()
    assert scene.fps is not None and scene.fps > 0
    assert "FPS" in capsys.readouterr().err
    scene.profiling_options.show_FPS = False
    scene.step()
    assert capsys.readouterr().err == ""


def test_env_spacing_does_not_move_envs():
    a = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
    fa = a.add_entity(sc.morphs.MJCF(file="franka_panda"))
    a.build(n_envs=4, env_spacing=(2.0, 2.0))
    assert a.envs_offset.shape == (4, 3) and float(a.envs_offset.abs().max()) > 0
    p = fa.get_links_pos()
    assert torch.equal(p[0], p[3])


def test_range_selection_and_partial_pose_update():
    """A range is a contiguous dof selection; a set on some envs refreshes only their link poses."""
    scene, franka = franka_scene(3)
    assert torch.equal(franka.get_dofs_position(range(2, 5)), franka.get_dofs_position([2, 3, 4]))
    with pytest.raises(sc.DofsIdxError, match="dofs_idx_local"):
        franka.get_dofs_position(range(5, 12))
    hand = franka.get_link("hand")
    before = hand.get_pos().clone()
    q = franka.get_dofs_position().clone()
    q[1, 0] += 0.5
    franka.set_dofs_position(q[1:2], envs_idx=[1])
    after = hand.get_pos()
    assert torch.equal(after[[0, 2]], before[[0, 2]]) and not torch.allclose(after[1], before[1])
    _, other = franka_scene(3)
    other.set_dofs_position(q)
    assert torch.allclose(other.get_link("hand").get_pos(), after, atol=1e-6)
