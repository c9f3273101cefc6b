"""The adapters against the real libraries: SB3 PPO and evaluate_policy, rsl_rl's OnPolicyRunner, skrl's PPO."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import sim_core as sc
import warpgym  # noqa: F401

REACH = "WarpGym/FrankaReach-v0"
PICK_PLACE = "WarpGym/FrankaPickPlace-v0"


def make(n, task=REACH):
    return gym.make_vec(task, num_envs=n)


def force_ends(base):
    """Env 0 terminates and env 1 is truncated on the next step."""
    term = torch.zeros(base.num_envs, dtype=torch.bool, device=base.device)
    term[0] = True
    trunc = torch.zeros_like(term)
    trunc[1] = True
    base.force_episode_end(term, terminated=True)
    base.force_episode_end(trunc, terminated=False)


def test_sb3_terminal_observations_timeouts_and_episode_info():
    pytest.importorskip("stable_baselines3")
    from warpgym.adapters.sb3 import Sb3VecEnv

    venv = Sb3VecEnv(make(4))
    venv.seed(3)
    obs = venv.reset()
    assert obs.shape == (4, 30) and obs.dtype == np.float32
    actions = np.zeros((4, 7), dtype=np.float32)
    venv.step(actions)
    base = venv.env.unwrapped
    twin = make(4)  # the same run without the forced ends gives the terminal observations
    twin.reset(seed=3)
    twin.step(torch.zeros(4, 7, device=sc.device))
    expected, *_ = twin.step(torch.zeros(4, 7, device=sc.device))
    force_ends(base)
    obs, rewards, dones, infos = venv.step(actions)
    assert dones.tolist() == [True, True, False, False] and rewards.dtype == np.float32
    np.testing.assert_array_equal(infos[0]["terminal_observation"], expected[0].cpu().numpy())
    np.testing.assert_array_equal(infos[1]["terminal_observation"], expected[1].cpu().numpy())
    assert infos[0]["TimeLimit.truncated"] is False and infos[1]["TimeLimit.truncated"] is True
    assert infos[0]["episode"]["l"] == 2 and "is_success" in infos[1] and infos[2] == {}
    assert not np.array_equal(obs[0], expected[0].cpu().numpy())  # already reset
    assert venv.get_attr("max_episode_steps") == [100] * 4
    assert venv.env_method(
        "force_episode_end", torch.zeros(4, dtype=torch.bool, device=sc.device), indices=[0]
    ) == [None]
    from stable_baselines3.common.monitor import Monitor

    assert venv.env_is_wrapped(Monitor) == [True] * 4


@pytest.mark.parametrize("task", [REACH, PICK_PLACE])
def test_sb3_ppo_learns_through_the_adapter_and_evaluates(task, tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))  # SB3's logger makes its folder there, not in /tmp
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy

    from warpgym.adapters.sb3 import Sb3VecEnv

    venv = Sb3VecEnv(make(16, task))
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=256, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=3000)
    mean, std = evaluate_policy(model, venv, n_eval_episodes=16, deterministic=True)
    assert np.isfinite(mean) and model.num_timesteps >= 3000
    assert len(model.ep_info_buffer) > 0  # the logger saw the episodes


@pytest.mark.parametrize("task", [REACH, PICK_PLACE])
def test_rsl_rl_runner_trains_on_device_tensors(tmp_path, task):
    pytest.importorskip("rsl_rl")
    from rsl_rl.runners import OnPolicyRunner

    from warpgym.adapters.rsl_rl import RslRlVecEnv, runner_cfg

    base = make(32, task)
    (obs_dim,), (act_dim,) = base.single_observation_space.shape, base.single_action_space.shape
    limit = base.unwrapped.max_episode_steps
    env = RslRlVecEnv(base)
    assert (
        env.num_actions == act_dim
        and env.max_episode_length == limit
        and env.get_observations()["policy"].shape == (32, obs_dim)
    )
    runner = OnPolicyRunner(env, runner_cfg(), log_dir=str(tmp_path), device=str(env.device))
    runner.learn(num_learning_iterations=2, init_at_random_ep_len=True)
    assert (env.episode_length_buf <= limit).all()
    force_ends(env.base)
    obs, rewards, dones, extras = env.step(torch.zeros(32, act_dim, device=sc.device))
    assert dones[:2].all() and extras["time_outs"].tolist()[:2] == [False, True]
    assert obs["policy"].device == env.device and rewards.shape == (32,)


@pytest.mark.parametrize("task", [REACH, PICK_PLACE])
def test_skrl_ppo_trains_through_the_adapter(task):
    pytest.importorskip("skrl")
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.memories.torch import RandomMemory
    from skrl.trainers.torch import SequentialTrainer

    from warpgym.adapters.skrl import default_models, wrap

    base = make(16, task)
    env = wrap(base)

    models = default_models(env, hidden=(64,))
    cfg = PPO_CFG(rollouts=16, learning_epochs=2, mini_batches=2)
    cfg.experiment.write_interval = 0
    cfg.experiment.checkpoint_interval = 0
    memory = RandomMemory(memory_size=16, num_envs=env.num_envs, device=env.device)
    agent = PPO(
        models=models,
        memory=memory,
        cfg=cfg,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
    )
    trainer = SequentialTrainer(
        env=env,
        agents=agent,
        cfg={
            "timesteps": 200,
            "headless": True,
            "disable_progressbar": True,
            "close_environment_at_exit": False,
        },
    )
    initial = {
        role: {k: v.detach().clone() for k, v in model.state_dict().items()} for role, model in models.items()
    }
    trainer.train()
    obs, info = env.reset()
    assert obs.shape == (16, base.single_observation_space.shape[0]) and obs.device == env.device
    for role, model in models.items():  # training moved every weight of both models
        changed = [not torch.equal(v, initial[role][k]) for k, v in model.state_dict().items()]
        assert all(changed), (role, changed)
    losses = {k: agent.tracking_data[k] for k in ("Loss / Policy loss", "Loss / Value loss")}
    assert all(len(v) == 200 // 16 and np.isfinite(v).all() for v in losses.values()), losses
    assert env.render() is None  # no render_mode: the env's answer, as Gymnasium's


def test_sb3_get_images_gives_one_frame_per_env_and_render_tiles_them():
    pytest.importorskip("stable_baselines3")
    from warpgym.adapters.sb3 import Sb3VecEnv
    from warpgym.render import RenderUnavailableError

    env = gym.make_vec(REACH, num_envs=3, render_mode="rgb_array", render={"width": 64, "height": 48})
    venv = Sb3VecEnv(env)
    venv.reset()
    base = venv.env.unwrapped
    q = base.arm.entity.get_dofs_position().clone()
    q[1, 0] += 1.0  # env 1's arm turned away: its frame differs from env 0's
    base.arm.entity.set_dofs_position(q)
    try:
        images = venv.get_images()
    except RenderUnavailableError as e:  # only where the system's OpenGL library is missing
        pytest.skip(str(e))
    assert len(images) == 3 and all(im.shape == (48, 64, 3) and im.dtype == np.uint8 for im in images)
    assert list(base.render_envs_idx) == [0]  # restored
    for i, image in enumerate(images):
        base.render_envs_idx = [i]
        assert np.array_equal(image, base.render())
    base.render_envs_idx = [0]
    assert not np.array_equal(images[0], images[1])
    assert venv.render().shape == (2 * 48, 2 * 64, 3)  # SB3 tiles the 3 frames on a 2 x 2 grid
    with pytest.warns(UserWarning, match="rgb_array"):
        assert Sb3VecEnv(make(2)).get_images() == [None, None]
