"""The Gymnasium layer: registration, autoreset modes, the conformance checker, FrankaReach itself."""

import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import sim_core as sc
import warpgym
from warpgym.checker import VectorEnvCheckError
from warpgym.rng import EnvRNG

REACH = "WarpGym/FrankaReach-v0"
MODES = list(AutoresetMode)


def reach(n=4, **kw):
    return gym.make_vec(REACH, num_envs=n, **kw)


@pytest.mark.parametrize("task", sorted(warpgym.TASKS))
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_every_task_passes_the_checker_in_every_mode(task, mode):
    env = gym.make_vec(task, num_envs=3, autoreset_mode=mode)
    assert env.metadata["autoreset_mode"] is mode
    warpgym.check_vector_env(env)


def test_the_checker_passes_with_end_effector_control():
    warpgym.check_vector_env(gym.make_vec(REACH, num_envs=3, control_mode="ee_delta"))


@pytest.mark.parametrize("control_mode", ["joint_delta", "ee_delta"])
def test_single_env_view_passes_gymnasium_check_env(control_mode):
    env = gym.make(REACH, control_mode=control_mode)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert isinstance(reward, float) and isinstance(terminated, bool) and "distance" in info


def test_registration_from_a_fresh_interpreter():
    code = textwrap.dedent(
        """
        import gymnasium as gym, torch, warpgym
        vec = gym.make_vec("WarpGym/FrankaReach-v0", num_envs=3, device="cpu")
        obs, _ = vec.reset(seed=0)
        assert isinstance(vec.unwrapped, warpgym.FrankaReachEnv) and obs.shape == (3, 30), obs.shape
        one = gym.make("WarpGym/FrankaReach-v0")
        o, _ = one.reset(seed=0)
        assert o.shape == (30,)
        print("ok", type(vec.unwrapped.scene).__name__)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok Scene" in out.stdout


def test_spaces_dtypes_and_raw_scene_access():
    env = reach(5)
    assert env.single_observation_space.shape == (30,) and env.single_action_space.shape == (7,)
    assert env.observation_space.shape == (5, 30) and env.action_space.shape == (5, 7)
    obs, info = env.reset(seed=0)
    assert obs.dtype == torch.float32 and obs.device == sc.device and info == {}
    assert env.unwrapped.scene.n_envs == 5
    assert env.unwrapped.arm.entity.get_dofs_position().shape == (5, 9)
    ee = reach(2, control_mode="ee_delta")
    assert ee.single_action_space.shape == (3,) and ee.single_observation_space.shape == (26,)


def test_terminal_observation_is_the_state_before_the_reset():
    """A time-limit truncation in SAME_STEP mode against the same run in DISABLED mode."""
    same = reach(3, max_episode_steps=4)
    off = reach(3, max_episode_steps=4, autoreset_mode="Disabled")
    same.reset(seed=5)
    off.reset(seed=5)
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        a = (torch.rand(3, 7, generator=g) * 2 - 1).to(sc.device)
        obs_s, r_s, te_s, tr_s, info = same.step(a)
        obs_d, r_d, te_d, tr_d, _ = off.step(a)
    assert tr_s.all() and tr_d.all() and not te_s.any()
    assert info["_final_obs"].all() and torch.equal(info["final_obs"], obs_d)
    assert torch.equal(r_s, r_d)
    assert not torch.equal(obs_s, obs_d)  # the returned observation is the new episode's
    assert info["_episode"].all() and (info["episode"]["l"] == 4).all()
    assert info["final_info"]["_distance"].all() and not info["_distance"].any()


def test_episode_statistics_sum_the_rewards():
    env = reach(4, max_episode_steps=6)
    env.reset(seed=1)
    total = torch.zeros(4, device=sc.device)
    for _ in range(6):
        _, r, _, tr, info = env.step(torch.zeros(4, 7, device=sc.device))
        total += r
    assert tr.all() and torch.allclose(info["episode"]["r"], total) and (info["episode"]["l"] == 6).all()
    assert info["episode"]["success"].dtype == torch.bool


def test_gymnasiums_numpy_vector_wrappers_stack_on_the_env():
    """Gymnasium's vector wrappers compute in NumPy: through ``ArrayConversion`` (torch to NumPy) they
    stack on the env, and ``RecordEpisodeStatistics`` (under another key than the env's own
    ``episode``) counts the same returns and lengths as the env."""
    from gymnasium.wrappers import vector as vw

    env = reach(4, max_episode_steps=5, autoreset_mode="NextStep")
    numpy_env = vw.ArrayConversion(env, env_xp=torch, target_xp=np, env_device=sc.device)
    stats = vw.RecordEpisodeStatistics(numpy_env, stats_key="wrapper")
    wrapped = vw.NormalizeReward(vw.NormalizeObservation(vw.ClipAction(stats)))
    obs, _ = wrapped.reset(seed=0)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(12):
        obs, reward, _, _, info = wrapped.step(rng.uniform(-2.0, 2.0, (4, 7)).astype(np.float32))
        assert isinstance(obs, np.ndarray) and obs.shape == (4, 30) and np.isfinite(obs).all()
        assert isinstance(reward, np.ndarray) and reward.shape == (4,) and np.isfinite(reward).all()
        if "wrapper" in info:
            ended = info["_wrapper"]
            assert np.array_equal(ended, info["_episode"])
            np.testing.assert_allclose(info["wrapper"]["r"][ended], info["episode"]["r"][ended], rtol=1e-5)
            assert (info["wrapper"]["l"][ended] == info["episode"]["l"][ended]).all()
            checked += int(ended.sum())
    assert checked == 8  # every env's first two episodes


def test_actions_outside_the_space_are_clipped():
    a, b = reach(2), reach(2)
    a.reset(seed=0)
    b.reset(seed=0)
    big = torch.tensor([[5.0] * 7, [-3.0] * 7], device=sc.device)
    oa = a.step(big)[0]
    ob = b.step(big.clamp(-1, 1))[0]
    assert torch.equal(oa, ob)


def test_bad_actions_name_the_expected_shape():
    env = reach(2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"expected shape \(2, 7\)"):
        env.step(torch.zeros(3, 7, device=sc.device))
    with pytest.raises(ValueError, match="NaN"):
        env.step(torch.full((2, 7), float("inf"), device=sc.device))
    with pytest.raises(TypeError, match="cannot be cast"):
        env.step(torch.zeros(2, 7, dtype=torch.bool, device=sc.device))
    with pytest.raises(ValueError, match=r"expected a tensor on"):
        env.step(torch.zeros(2, 7, device="meta"))
    if sc.device.type == "cpu":
        env.step(np.zeros((2, 7), dtype=np.float64))  # NumPy works on the CPU; ints and doubles are cast
    else:
        with pytest.raises(TypeError, match="NumPy array but the env runs on"):
            env.step(np.zeros((2, 7), dtype=np.float32))


def test_bad_seeds_and_a_closed_env_are_errors():
    """A seed that is not an integer is refused before it changes anything; a closed env refuses."""
    env = reach(2)
    zeros = torch.zeros(2, 7, device=sc.device)
    env.reset(seed=np.int64(4))  # NumPy integers are integers
    for seed in (1.5, True, "4", [4, 5]):
        with pytest.raises(TypeError, match=rf"seed: expected an integer or None, got {type(seed).__name__}"):
            env.reset(seed=seed)
    after_refusals = env.step(zeros)[0]
    env.reset(seed=4)
    assert torch.equal(env.step(zeros)[0], after_refusals)
    with pytest.raises(TypeError, match="seed: expected an integer"):
        reach(2, seed=[1, 2])
    env.close()
    with pytest.raises(RuntimeError, match="step: the env is closed"):
        env.step(zeros)
    with pytest.raises(RuntimeError, match="reset: the env is closed"):
        env.reset()


def test_device_mismatch_is_an_error():
    other = "cuda" if sc.device.type == "cpu" else "cpu"
    with pytest.raises(ValueError, match="one device per process|already runs on"):
        reach(2, device=other)


def test_config_overrides_and_errors():
    env = reach(2, reward={"success_bonus": 7.0}, success_threshold=0.05)
    assert env.unwrapped.cfg.reward.success_bonus == 7.0 and env.unwrapped.cfg.success_threshold == 0.05
    assert env.unwrapped.cfg.reward.distance == -2.0  # the rest still comes from the file
    with pytest.raises(warpgym.ConfigError, match="env.reward.sucess_bonus"):
        reach(2, reward={"sucess_bonus": 7.0})
    with pytest.raises(warpgym.ConfigError, match="env.max_episode_steps: expected an integer"):
        reach(2, max_episode_steps=2.5)
    with pytest.raises(ValueError, match="control_mode"):
        reach(2, control_mode="torque")


def test_reward_and_success_on_hand_built_states():
    env = reach(2, reward={"action_rate": 0.0, "joint_vel": 0.0}, terminate_on_success=True)
    u = env.unwrapped
    env.reset(seed=0)
    ee = u.arm.ee_pos()
    offset = torch.tensor([[0.005, 0.0, 0.0], [0.0, 0.3, 0.0]], device=sc.device)  # inside / outside 2 cm
    u.target_pos.copy_(ee + offset)
    obs = u._observe(torch.full((2, u.step_noise_dim), 0.5, device=sc.device))
    assert torch.allclose(obs[:, 20:23], u.target_pos - ee, atol=1e-6)
    reward, terminated, success, info = u._evaluate()
    w = u.cfg.reward
    d = torch.tensor([0.005, 0.3], device=sc.device)
    expected = (
        w.distance * d + w.distance_tanh * (1 - torch.tanh(d / w.tanh_std)) + w.success_bonus * (d < 0.02)
    )
    assert torch.allclose(info["distance"], d, atol=1e-6) and torch.allclose(reward, expected, atol=1e-5)
    assert success.tolist() == [True, False] and terminated.tolist() == [True, False]


def test_reach_is_solvable_with_differential_ik():
    """A scripted controller on the ee_delta action (a fifth of the remaining error per control step):
    every env reaches its target and terminates within one episode (measured: within 30 steps)."""
    env = reach(16, control_mode="ee_delta")
    u = env.unwrapped
    obs, _ = env.reset(seed=2)
    succeeded = torch.zeros(16, dtype=torch.bool, device=sc.device)
    for _ in range(60):
        action = (0.2 * obs[:, 20:23] / u.cfg.arm.ee_delta_scale).clamp(-1, 1)
        obs, _, terminated, _, info = env.step(action)
        succeeded |= terminated & info["final_info"]["success"]
    assert succeeded.all()


def test_joint_delta_moves_the_targets_by_the_scale():
    env = reach(2)
    u = env.unwrapped
    env.reset(seed=0)
    before = u.arm.joint_targets.clone()
    a = torch.zeros(2, 7, device=sc.device)
    a[:, 0] = 0.5
    env.step(a)
    assert torch.allclose(
        u.arm.joint_targets[:, 0] - before[:, 0], torch.full((2,), 0.5 * 0.05, device=sc.device)
    )


def test_non_finite_env_is_truncated_reported_and_reset():
    env = reach(3)
    u = env.unwrapped
    env.reset(seed=0)
    u.scene.sim.rigid_solver.state.qvel[1, 2] = float("nan")
    obs, reward, terminated, truncated, info = env.step(torch.zeros(3, 7, device=sc.device))
    assert truncated.tolist() == [False, True, False] and info["final_info"]["sim_error"][1]
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
    assert not u.scene.sim.rigid_solver.get_error_envs_mask().any()  # reset in the same step


def test_reset_rerandomizes_every_time():
    env = reach(4)
    first, _ = env.reset(seed=0)
    second, _ = env.reset()
    third, _ = env.reset(seed=0)
    assert not torch.equal(first, second) and torch.equal(first, third)


def test_rng_streams_are_per_env_and_uniform():
    rng = EnvRNG(1000, torch.device("cpu"), seed=9)
    counter = torch.zeros(1000, dtype=torch.int32)
    u = rng.uniform(1, counter, 4)
    assert u.shape == (1000, 4) and (u >= 0).all() and (u < 1).all() and abs(u.mean().item() - 0.5) < 0.02
    counter[:500] += 7  # other envs' counters move: env 999's draws must not
    assert torch.equal(rng.uniform(1, counter, 4)[500:], u[500:])
    assert not torch.equal(rng.uniform(2, counter, 4)[500:], u[500:])  # another stream
    n = rng.normal(3, torch.zeros(1000, dtype=torch.int32), 20)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05


@pytest.mark.parametrize("task", [REACH, "WarpGym/FrankaLift-v0"])
def test_a_batch_split_by_first_env_runs_the_same_episodes(task):
    """Envs 0-1 and 2-5 made as two batches (``first_env`` 0 and 2) give what one batch of 6 gives,
    bit for bit: resets, randomization, observation noise, autoresets and terminal observations."""
    kw = {"device": sc.device, "seed": 3, "max_episode_steps": 5}
    whole = gym.make_vec(task, num_envs=6, **kw)
    parts = [gym.make_vec(task, num_envs=n, first_env=k, **kw) for k, n in ((0, 2), (2, 4))]
    assert torch.equal(whole.reset(seed=3)[0], torch.cat([p.reset(seed=3)[0] for p in parts]))
    g = torch.Generator().manual_seed(0)
    for _ in range(12):  # two autoresets of every env
        actions = (torch.rand(6, whole.single_action_space.shape[0], generator=g) * 2 - 1).to(sc.device)
        one = whole.step(actions)
        split = [parts[0].step(actions[:2]), parts[1].step(actions[2:])]
        for i in range(4):  # obs, reward, terminated, truncated
            assert torch.equal(one[i], torch.cat([s[i] for s in split]))
        assert torch.equal(one[4]["final_obs"], torch.cat([s[4]["final_obs"] for s in split]))
    with pytest.raises(ValueError, match=r"first_env: expected an integer >= 0, got -1"):
        reach(2, first_env=-1)


def test_rng_draws_are_the_same_numbers_on_every_version():
    """A seed names the same numbers: draws of a 64-bit seed at counters up to 2**31 - 1, as
    multiples of 2**-24 (a recorded run replays only if these never change)."""
    rng = EnvRNG(3, sc.device, seed=2**33 + 9)
    u = rng.uniform(5, torch.tensor([0, 7, 2**31 - 1], dtype=torch.int32, device=sc.device), 3)
    expected = [[1714219, 10286949, 2914470], [1082530, 14292211, 8133911], [15971073, 2749332, 4829488]]
    assert torch.equal(u.cpu(), torch.tensor(expected, dtype=torch.float32) / 2**24)


def test_rng_kernel_compiles_without_compiler_warnings(tmp_path):
    """Compiled into an empty kernel cache, with Warp's default flags: nothing on stderr but Warp's
    own note that no CUDA driver is installed."""
    script = textwrap.dedent(
        """
        import torch
        import warp as wp

        wp.config.log_level = wp.LOG_WARNING
        wp.init()
        from warpgym.rng import EnvRNG

        EnvRNG(4, torch.device("cpu"), seed=1).uniform(0, torch.zeros(4, dtype=torch.int32), 2)
        """
    )
    env = {**os.environ, "WARP_CACHE_PATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    no_driver = "Could not find or load the NVIDIA CUDA driver"
    lines = [line for line in run.stderr.splitlines() if no_driver not in line]
    assert not lines, "\n".join(lines)


class _FinalObsAfterReset(warpgym.FrankaReachEnv):
    """A mutant: reports the new episode's first observation as the terminal one."""

    def step(self, actions):
        obs, r, te, tr, info = super().step(actions)
        if "final_obs" in info:
            info["final_obs"] = obs.clone()
        return obs, r, te, tr, info


class _ResetsEveryone(warpgym.FrankaReachEnv):
    """A mutant: a masked reset resets all envs."""

    def _reset_masked(self, mask):
        super()._reset_masked(torch.ones_like(mask))


class _CoupledEnvs(warpgym.FrankaReachEnv):
    """A mutant: env 1's observation depends on env 0's action."""

    def _observe(self, noise):
        obs = super()._observe(noise)
        obs[1:, -1] += self.last_action[0, 0]
        return obs


class _IgnoresSeed(warpgym.FrankaReachEnv):
    def reset(self, *, seed=None, options=None):
        return super().reset(seed=None if seed is None else 0, options=options)


@pytest.mark.parametrize(
    ("mutant", "message"),
    [
        (_FinalObsAfterReset, "final_obs is not the terminal observation"),
        # on CUDA the masked reset runs every step (no host sync to test the mask), so this mutant
        # resets everyone every step and the independence check sees it first
        (_ResetsEveryone, "reset_mask|other envs|changed observation|episode length|independence"),
        (_CoupledEnvs, "independence"),
        (_IgnoresSeed, "different seed"),
    ],
)
def test_checker_catches_broken_envs(mutant, message):
    with pytest.raises(VectorEnvCheckError, match=message):
        warpgym.check_vector_env(mutant(num_envs=3))
