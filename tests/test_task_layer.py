"""The fused task layer: an ``env.step`` is a few Warp launches and torch ops with no host-device
sync, for every task and autoreset mode; the Warp IK and Jacobian against their torch references;
returned tensors stay as they were returned."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
import warp as wp
from conftest import load_script
from gymnasium.vector import AutoresetMode
from host_sync import HostSyncError, no_host_sync

import sim_core as sc
import warpgym
from warpgym.arm import ee_jacobian
from warpgym.ik import dls, dls_step, mat67, vec6, vec7
from warpgym.rng import EnvRNG, stream_key, uniform

MODES = list(AutoresetMode)
TASKS = sorted(warpgym.TASKS)
MAX_TORCH_OPS, MAX_LAUNCHES = 40, 6  # per env.step, whatever the batch size


# ---- no host-device sync ------------------------------------------------------------------------
def test_the_guard_catches_host_syncs():
    x = torch.arange(6, dtype=torch.float32, device=sc.device)
    mask = x > 2
    cases = [
        lambda: bool(mask.any()),
        lambda: x.sum().item(),
        lambda: torch.nonzero(mask),
        lambda: x[mask],
        lambda: x.masked_fill(mask, 0.0).tolist(),
        lambda: torch.equal(x, x),
        lambda: wp.from_torch(x).numpy(),
        lambda: x.new_tensor([1.0, 2.0]),
    ]
    for case in cases:
        with pytest.raises(HostSyncError), no_host_sync():
            case()
    with no_host_sync():  # what the step does is fine
        torch.where(mask, x, 0.0).clone().unbind(0)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_step_and_masked_reset_never_sync(task, mode):
    """Steps in which envs end by the task, the time limit, a forced end and a sim error, and a
    masked reset, all under the guard, with the trainer's ``validate_actions=False``."""
    n = 6
    env = gym.make_vec(task, num_envs=n, autoreset_mode=mode, validate_actions=False, max_episode_steps=3)
    u = env.unwrapped
    env.reset(seed=0)
    dim = env.single_action_space.shape[0]
    g = torch.Generator().manual_seed(0)
    actions = [(torch.rand(n, dim, generator=g) * 2 - 1).to(sc.device) for _ in range(6)]
    env.step(actions[0])  # the first step records the launches
    ends = torch.zeros(n, dtype=torch.bool, device=sc.device)
    ends[1] = True
    for i, a in enumerate(actions):
        u.force_episode_end(ends.roll(i), terminated=bool(i % 2))
        if i == 3:
            u.scene.sim.rigid_solver.state.qvel[4, 0] = float("nan")  # a blown-up env
        with no_host_sync():
            obs, reward, terminated, truncated, info = env.step(a)
    assert torch.isfinite(obs).all() and info["_episode"].any()
    mask = torch.zeros(n, dtype=torch.bool, device=sc.device)
    mask[::2] = True
    with no_host_sync():
        obs, _ = env.reset(options={"reset_mask": mask})
    assert obs.shape == (n, *env.single_observation_space.shape)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_a_recorded_step_replays_the_eager_steps_bit_for_bit(task, mode):
    """``env.step`` recorded once into a graph (a CUDA graph; on the CPU the stand-in of
    ``replay_graph``) and replayed gives what eager steps give, bit for bit, through ends by the
    time limit, forced ends and a blown-up env and their resets: nothing in a step depends on
    Python-side state that moves between steps."""
    from replay_graph import ReplayGraph

    from warpgym.training.rollout_graph import RolloutGraph

    n = 6
    envs = []
    for _ in range(2):
        env = gym.make_vec(task, num_envs=n, autoreset_mode=mode, validate_actions=False, max_episode_steps=3)
        env.reset(seed=0)
        envs.append(env)
    eager, recorded = envs
    dim = eager.single_action_space.shape[0]
    g = torch.Generator().manual_seed(0)
    actions = [(torch.rand(n, dim, generator=g) * 2 - 1).to(sc.device) for _ in range(8)]
    for env in envs:
        env.step(actions[0])  # the first step records the launches
    action, outputs = actions[0].clone(), {}

    def step():  # the tensors it returns are the graph's: a replay overwrites them
        obs, reward, terminated, truncated, info = recorded.step(action)
        outputs.update(obs=obs, reward=reward, terminated=terminated, truncated=truncated)
        outputs.update(ended=info["_episode"], ep_return=info["episode"]["r"], length=info["episode"]["l"])
        if mode == AutoresetMode.SAME_STEP:
            outputs["final_obs"] = info["final_obs"]

    graph = ReplayGraph() if sc.device.type == "cpu" else RolloutGraph(sc.device)
    ends = torch.zeros(n, dtype=torch.bool, device=sc.device)
    ends[1] = True
    sim_errors = torch.zeros(n, dtype=torch.bool, device=sc.device)
    for i, a in enumerate(actions[1:]):
        action.copy_(a)
        for env in envs:
            env.unwrapped.force_episode_end(ends.roll(i), terminated=bool(i % 2))
            if i == 3:
                env.unwrapped.scene.sim.rigid_solver.state.qvel[4, 0] = float("nan")  # a blown-up env
        obs, reward, terminated, truncated, info = eager.step(a)
        if not graph.captured:
            graph.capture(step)
        graph.replay()
        expected = dict(obs=obs, reward=reward, terminated=terminated, truncated=truncated)
        expected.update(ended=info["_episode"], ep_return=info["episode"]["r"], length=info["episode"]["l"])
        if mode == AutoresetMode.SAME_STEP:
            expected["final_obs"] = info["final_obs"]
        for key, value in expected.items():
            assert torch.equal(outputs[key], value), (i, key)
        sim_errors |= info["episode"]["sim_error"] & info["_episode"]
    assert sim_errors.tolist() == [False] * 4 + [True, False]


# ---- budgets ----------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_a_step_stays_within_its_launch_and_op_budget(task):
    """At most 40 torch ops and 6 Warp launches (sim_core's included) in every counted step, in
    which some envs end and reset; counted as ``scripts/count_ops.py`` does, at two batch sizes."""
    count_ops = load_script("count_ops")
    settings = [("SameStep", False), ("SameStep", True), ("NextStep", False), ("Disabled", False)]
    for n in (3, 200):  # 200: on the CPU 4 launch threads of 64 envs, shared among the host threads
        for mode, validate in settings:
            r = count_ops.measure(task, n, mode, validate, steps=4)
            where = f"{task} n={n} {mode} validate={validate}"
            assert r["step_ops_max"] <= MAX_TORCH_OPS, (where, r["ops"])
            assert r["step_launches_max"] <= MAX_LAUNCHES, where
            assert r["reset_ops_max"] <= MAX_TORCH_OPS and r["reset_launches_max"] <= MAX_LAUNCHES, where


def test_the_task_layer_compiles_for_a_cuda_gpu():
    """NVRTC, in Warp's wheel, compiles the task layer's and sim_core's own kernels for sm_90 (H100,
    H200) on a machine without a GPU. The generated step kernels take a minute each to compile:
    ``scripts/cuda_compile_check.py`` compiles those too."""
    wp.init()
    if 90 not in wp._src.context.runtime.nvrtc_supported_archs:
        pytest.skip("this Warp build has no NVRTC for sm_90")
    compiled = load_script("cuda_compile_check").compile_all(90, prefixes=("warpgym.", "sim_core."))
    tasks = {f"warpgym.{name}" for name in ("arm", "rng", "franka_reach", "cube_kernels", "drawer_kernels")}
    assert tasks <= set(compiled), sorted(compiled)  # every task module's kernels were among them
    assert [name for name, ok in compiled.items() if not ok] == []


@pytest.mark.parametrize("task", TASKS)
def test_the_number_of_host_threads_changes_no_bit(task):
    """Steps (through episode ends, autoresets and randomization), observations and rewards are the
    same bits whether the physics and the task's kernels run on 1, 2 or 3 host threads
    (``env.sim.cpu_threads``; 200 envs: 4 launch threads of 64, the last partial)."""
    runs = []
    for threads in (1, 2, 3):
        env = gym.make_vec(task, num_envs=200, seed=0, sim={"cpu_threads": threads})
        assert env.unwrapped.scene.sim.rigid_solver.cpu_threads == threads
        g = torch.Generator().manual_seed(0)
        out = [env.reset(seed=0)[0]]
        for _ in range(110):  # Reach's episodes are 100 steps
            obs, reward, terminated, truncated, _ = env.step(
                torch.rand(200, env.single_action_space.shape[0], generator=g) * 2 - 1
            )
            out += [obs, reward, terminated, truncated]
        env.close()
        runs.append(out)
    assert any(t.any() for t in runs[0][3::4] + runs[0][4::4]), "no episode ended"
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], other, strict=True))


# ---- returned tensors ---------------------------------------------------------------------------
def _snapshot(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: _snapshot(v) for k, v in x.items()}
    return tuple(_snapshot(v) for v in x)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return all(_same(p, q) for p, q in zip(a, b, strict=True))


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_returned_tensors_are_not_overwritten_by_later_calls(mode):
    """Everything reset and step return (infos and masks included), copied when returned, is
    unchanged after more steps, episode ends and masked resets."""
    env = gym.make_vec("WarpGym/FrankaLift-v0", num_envs=4, autoreset_mode=mode, max_episode_steps=2)
    dim = env.single_action_space.shape[0]
    kept = []
    masks = [
        torch.tensor(m, device=sc.device) for m in ([True, False, True, False], [False, True, False, True])
    ]
    for i in range(6):
        result = env.reset(seed=0) if i == 0 else env.step(torch.rand(4, dim, device=sc.device) * 2 - 1)
        kept.append((result, _snapshot(result)))
        if i % 2:
            result = env.reset(options={"reset_mask": masks[i % 4 // 2]})
            kept.append((result, _snapshot(result)))
    for i in range(4):
        env.step(torch.rand(4, dim, device=sc.device) * 2 - 1)
        env.reset(options={"reset_mask": masks[i % 2]})
    for result, copy in kept:
        assert _same(result, copy)


# ---- the Warp IK against torch --------------------------------------------------------------------
@wp.kernel(enable_backward=False)
def _dls_kernel(
    jac: wp.array(dtype=mat67), dx: wp.array(dtype=vec6), damping: float, out: wp.array(dtype=vec7)
):
    i = wp.tid()
    out[i] = dls(jac[i], dx[i], damping)


@pytest.mark.parametrize("rows", [3, 6])
def test_warp_dls_matches_torch(rows):
    g = torch.Generator().manual_seed(1)
    jac = torch.zeros(64, 6, 7)
    dx = torch.zeros(64, 6)
    jac[:, :rows] = torch.randn(64, rows, 7, generator=g)
    dx[:, :rows] = 0.05 * torch.randn(64, rows, generator=g)
    out = wp.zeros(64, dtype=vec7, device=sc.device.type)
    wp.launch(
        _dls_kernel,
        dim=64,
        inputs=[
            wp.from_torch(jac.to(sc.device), dtype=mat67),
            wp.from_torch(dx.to(sc.device), dtype=vec6),
            0.05,
        ],
        outputs=[out],
        device=sc.device.type,
    )
    expected = dls_step(jac[:, :rows].double(), dx[:, :rows].double(), 0.05).float()
    torch.testing.assert_close(wp.to_torch(out).cpu(), expected, rtol=1e-4, atol=1e-6)


@wp.kernel(enable_backward=False)
def _jacobian_kernel(arm: warpgym.arm.ArmModel, s: sc.views.StateView, out: wp.array(dtype=mat67)):
    e = wp.tid()
    out[e] = ee_jacobian(arm, s, e, warpgym.arm.ee_point(arm, s, e))


def test_warp_end_effector_jacobian_matches_the_simulators():
    env = gym.make_vec("WarpGym/FrankaReach-v0", num_envs=5, control_mode="ee_delta")
    env.reset(seed=4)
    u = env.unwrapped
    solver = u.scene.sim.rigid_solver
    solver.poses()
    out = wp.zeros(5, dtype=mat67, device=solver.wp_device)
    wp.launch(
        _jacobian_kernel,
        dim=5,
        inputs=[u.arm.model, solver.state_view()],
        outputs=[out],
        device=solver.wp_device,
    )
    expected = u.arm.ee_jacobian()[:, :, :7]
    torch.testing.assert_close(wp.to_torch(out), expected, rtol=1e-5, atol=1e-6)


# ---- inline draws against EnvRNG -----------------------------------------------------------------
@wp.kernel(enable_backward=False)
def _inline_draws(
    key: wp.array(dtype=wp.uint32), stream: int, counter: wp.array(dtype=wp.int32), out: wp.array2d(dtype=float)
):
    e = wp.tid()
    h = stream_key(key[0], stream, e, counter[e])
    for j in range(out.shape[1]):
        out[e, j] = uniform(h, j)


def test_inline_draws_are_envrngs_numbers():
    rng = EnvRNG(5, sc.device, seed=2**40 + 3)
    counter = torch.tensor([0, 3, 9, 2**31 - 1, 17], dtype=torch.int32, device=sc.device)
    for stream in (1, 2):
        out = torch.zeros(5, 18, device=sc.device)
        inputs = [rng.key, stream, wp.from_torch(counter), wp.from_torch(out)]
        wp.launch(_inline_draws, dim=5, inputs=inputs, device=sc.device.type)
        assert torch.equal(out, rng.uniform(stream, counter, 18))
