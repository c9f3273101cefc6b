"""Rendering through MuJoCo's renderer (OSMesa on the CPU here), videos, and Gymnasium's RecordVideo."""

import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch

import warpgym
from warpgym import render
from warpgym.render import RenderUnavailableError
from warpgym.training.video import rollout_frames, write_video

REACH = "WarpGym/FrankaReach-v0"
SMALL = {"render": {"width": 160, "height": 120}}


def reach(n=2, **kw):
    env = gym.make_vec(REACH, num_envs=n, render_mode="rgb_array", **{**SMALL, **kw})
    env.reset(seed=0)
    try:
        env.render()
    except RenderUnavailableError as e:  # only where the system's OpenGL library is missing
        pytest.skip(str(e))
    return env


def test_image_shape_dtype_and_it_follows_the_arm():
    env = reach()
    before = env.render()
    assert before.shape == (120, 160, 3) and before.dtype == np.uint8 and before.std() > 5
    arm = env.unwrapped.arm.entity
    q = arm.get_dofs_position().clone()
    q[:, 0] += 1.0
    arm.set_dofs_position(q)
    after = env.render()
    assert (np.abs(after.astype(int) - before.astype(int)).sum(-1) > 30).sum() > 100


def test_two_envs_in_different_states_render_differently():
    env = reach()
    u = env.unwrapped
    u.render_envs_idx = [0]
    first = env.render()
    u.render_envs_idx = [1]
    second = env.render()
    assert not np.array_equal(first, second)
    u.render_envs_idx = [0, 1]
    assert env.render().shape == (120, 160, 3)


def test_the_target_marker_is_drawn_in_red():
    env = reach(1, render={"width": 320, "height": 240})
    u = env.unwrapped
    with_marker = env.render().astype(int)
    saved = u.target_pos.clone()
    u.target_pos.copy_(torch.tensor([[0.0, 0.0, -50.0]]))  # far below the floor: not drawn
    without = env.render().astype(int)
    u.target_pos.copy_(saved)
    changed = np.abs(with_marker - without).sum(-1) > 30
    assert 5 < changed.sum() < 2000  # a small blob
    r, g, b = (with_marker[changed][:, k] for k in range(3))
    assert ((r > g) & (r > b)).mean() > 0.9 and (r - np.maximum(g, b)).mean() > 50  # red, edges blended


def test_bad_render_options_are_errors():
    with pytest.raises(ValueError, match="render_mode"):
        gym.make_vec(REACH, num_envs=2, render_mode="human")
    with pytest.raises(ValueError, match="render_envs_idx"):
        gym.make_vec(REACH, num_envs=2, render_mode="rgb_array", render_envs_idx=[5])
    assert gym.make_vec(REACH, num_envs=2).render() is None


def test_video_file_round_trip(tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    env = reach(2, autoreset_mode="Disabled", render_envs_idx=[0, 1])
    frames = rollout_frames(lambda obs: torch.zeros(obs.shape[0], 7, device=obs.device), env, steps=9, seed=1)
    assert len(frames) == 10
    path = tmp_path / "policy.mp4"
    write_video(path, frames, fps=env.metadata["render_fps"])
    read = imageio.mimread(str(path))
    assert len(read) == 10 and read[0].shape == (120, 160, 3)


def test_gymnasium_record_video_on_the_single_env_view(tmp_path):
    pytest.importorskip("moviepy")
    reach(1)  # skips without OpenGL
    env = gym.make(REACH, render_mode="rgb_array", max_episode_steps=5, **SMALL)
    folder = tmp_path / "videos"
    env = gym.wrappers.RecordVideo(env, str(folder), episode_trigger=lambda e: True, disable_logger=True)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        done = terminated or truncated
    env.close()
    assert list(folder.glob("*.mp4"))


@pytest.mark.parametrize("task", sorted(warpgym.TASKS))
def test_every_registered_task_renders(task):
    reach(1)  # skips without OpenGL
    env = gym.make_vec(task, num_envs=2, render_mode="rgb_array", render_envs_idx=[0, 1], **SMALL)
    env.reset(seed=0)
    image = env.render()
    assert image.shape == (120, 160, 3) and image.dtype == np.uint8 and image.std() > 5


def test_a_cube_is_drawn_at_its_per_env_size():
    env = gym.make_vec(
        "WarpGym/FrankaLift-v0", num_envs=2, render_mode="rgb_array", render_envs_idx=[0], **SMALL
    )
    env.reset(seed=0)
    cube = env.unwrapped.cube
    cube.set_size(torch.tensor([[0.02] * 3, [0.05] * 3]))
    try:
        small = env.render().astype(int)
    except RenderUnavailableError as e:
        pytest.skip(str(e))
    cube.set_size(torch.tensor([0.05] * 3), envs_idx=[0])
    large = env.render().astype(int)
    assert (np.abs(large - small).sum(-1) > 30).sum() > 20
    cube.set_size(torch.tensor([0.02] * 3), envs_idx=[0])
    assert np.array_equal(env.render().astype(int), small)  # the size drawn is the env's, nothing kept


def test_a_script_that_never_closes_its_env_exits_cleanly():
    """The GL context is freed at exit, before the interpreter tears down the modules OpenGL needs
    (MuJoCo's ``Renderer.__del__`` alone raises there with OSMesa)."""
    reach(1)  # skips without OpenGL
    script = textwrap.dedent(
        f"""
        import gymnasium as gym

        import sim_core as sc
        import warpgym

        sc.init(backend=sc.cpu, seed=0)
        env = gym.make_vec({REACH!r}, num_envs=1, render_mode="rgb_array", render={{"width": 32, "height": 24}})
        env.reset(seed=0)
        assert env.render().shape == (24, 32, 3)
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="GLFW's display rule is the Linux one")
def test_no_headless_library_and_no_display_is_a_clear_error(monkeypatch):
    """Where neither libEGL nor OSMesa is installed, sim_core leaves MuJoCo on GLFW (so that
    ``import mujoco`` still works) and rendering raises instead of letting GLFW abort the process."""
    import sim_core.gl_backend as gl

    monkeypatch.setattr(gl, "find_library", lambda name: None)
    assert gl.headless_backend() is None
    for var in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(render, "headless_backend", lambda: None)
    env = gym.make_vec(REACH, num_envs=1, render_mode="rgb_array", **SMALL)
    env.reset(seed=0)
    with pytest.raises(RenderUnavailableError, match="GLFW needs a display.*libEGL.*OSMesa"):
        env.render()
