"""``WarpVectorEnv``: the Gymnasium ``VectorEnv`` base of every task, over one batched ``sim_core`` scene.

Everything the env returns is a torch tensor on the simulator's device (observations and rewards
float32, terminations and truncations bool, info entries with Gymnasium's ``_key`` masks). Finished
envs are reset in place on the device, never by rebuilding, and every reset draws fresh randomness
from per-env streams (``rng``).

Autoreset follows Gymnasium 1.x's ``AutoresetMode`` (https://farama.org/Vector-Autoreset-Mode):

- ``SAME_STEP`` (default): an env that finishes in ``step`` is reset in that call; the returned
  observation is its new episode's first one; ``infos["final_obs"]`` (``(num_envs, *obs_shape)``,
  valid where ``infos["_final_obs"]``) holds the terminal observation and ``infos["final_info"]`` the
  terminal step's info. Step info keys at the top level are masked out for the reset envs.
- ``NEXT_STEP``: an env that finished is reset by the next ``step``, which ignores its action and
  returns its first observation with reward 0 and both flags False.
- ``DISABLED``: nothing is reset automatically; ``reset(options={"reset_mask": mask})`` resets exactly
  the masked envs and returns every env's current observation.

Every finished episode adds ``infos["episode"] = {"r", "l", "success", "success_once", "sim_error"}``
with the mask ``infos["_episode"]`` (``sim_error``: the episode was cut short because the env's
state went non-finite or overflowed its contact budget; it is then truncated and reset alone).
Actions outside the action space are clipped to it; actions of the wrong shape,
device or dtype, or containing NaN/inf, raise ``ValueError``/``TypeError`` before anything changes.

Everything per env happens on the device in the task's Warp kernels (``episode.py`` holds the
bookkeeping they share): a step is the task's action kernel, the physics, the task kernel's step
pass (observation, reward, episode bookkeeping, resets in place) and its observe pass, with no host
read, so it can be captured in a CUDA graph. The returned tensors are fresh every call. Subclasses
build the scene, call ``_set_spaces``, declare ``info_keys`` and implement ``_apply_action`` and
``_task_pass`` (see their docstrings).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import warp as wp
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import sim_core as sc
from sim_core import host_threads

from . import episode
from .episode import PASS_EVALUATE, PASS_OBSERVE, PASS_RESET, PASS_STEP, Episodes, StepOut
from .render import Marker, RenderConfig, SceneRenderer
from .rng import EnvRNG

__all__ = ["WarpVectorEnv", "resolve_device"]

_MODES = {AutoresetMode.SAME_STEP: episode.SAME_STEP, AutoresetMode.NEXT_STEP: episode.NEXT_STEP}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Initialize ``sim_core`` on ``device`` if needed and return it; one device per process.

    ``None`` means the device ``sim_core`` already uses, else CUDA when available, else the CPU.
    """
    if sc.is_initialized():
        current = sc.device
        if device is not None and _same_device(torch.device(device), current) is False:
            raise ValueError(
                f"device: sim_core already runs on {current} in this process and a process drives one "
                f"device; got {device!r} (run one process per GPU, see scripts/multi_gpu.py)"
            )
        return current
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    sc.init(backend=sc.gpu if dev.type == "cuda" else sc.cpu, device=dev)
    return sc.device


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


class WarpVectorEnv(gym.vector.VectorEnv):
    """Base class of the batched tasks (see the module docstring for the contract).

    Args:
        num_envs: number of envs simulated together (>= 1).
        device: "cpu", "cuda" or "cuda:N" (None: see ``resolve_device``).
        max_episode_steps: time limit in control steps; reaching it is a truncation.
        autoreset_mode: an ``AutoresetMode`` or its string value.
        seed: seed of the per-env random streams (``reset(seed=...)`` reseeds); None: fresh entropy.
        validate_actions: check actions for NaN/inf in ``step`` (one device read per step on CUDA).
        first_env: the index of env 0 in the random streams (``rng.py``): envs made with
            ``first_env=k`` draw what envs ``k, k + 1, ...`` of one larger batch with the same seed
            draw, so a batch split into parts runs the same episodes.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"]}

    def __init__(
        self,
        num_envs: int,
        *,
        device: str | torch.device | None,
        max_episode_steps: int,
        autoreset_mode: AutoresetMode | str,
        seed: int | None,
        validate_actions: bool = True,
        first_env: int = 0,
    ):
        if isinstance(num_envs, bool) or int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs: expected an integer >= 1, got {num_envs!r}")
        if int(max_episode_steps) != max_episode_steps or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps: expected an integer >= 1, got {max_episode_steps!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            modes = [m.value for m in AutoresetMode]
            raise ValueError(
                f"autoreset_mode: expected an AutoresetMode or one of {modes}, got {autoreset_mode!r}"
            ) from None
        if isinstance(first_env, bool) or int(first_env) != first_env or first_env < 0:
            raise ValueError(f"first_env: expected an integer >= 0, got {first_env!r}")
        seed = _check_seed(seed)
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.max_episode_steps = int(max_episode_steps)
        self.autoreset_mode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.validate_actions = validate_actions
        if seed is None:  # as Gymnasium: unseeded means fresh entropy; pass a seed to repeat a run
            seed = int(np.random.SeedSequence().entropy % (2**62))
        self.rng = EnvRNG(self.num_envs, self.device, seed, int(first_env))
        n, dev = self.num_envs, self.device
        # per-env episode state, read and written by the task kernel (episode.Episodes)
        self.episode_length = torch.zeros(n, dtype=torch.int32, device=dev)  # control steps so far
        self.episode_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self.episode_success_once = torch.zeros(n, dtype=torch.bool, device=dev)
        self._reset_count = torch.zeros(n, dtype=torch.int32, device=dev)  # counter of the reset stream
        self._step_count = torch.zeros(n, dtype=torch.int32, device=dev)  # counter of the step stream
        self._pending = torch.zeros(n, dtype=torch.bool, device=dev)  # finished, not yet reset
        self._forced = torch.zeros(n, dtype=torch.int32, device=dev)  # 1: terminate, 2: truncate next step
        self._reset_now = torch.zeros(n, dtype=torch.bool, device=dev)  # reset by the last pass
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._obs: torch.Tensor | None = None  # the observation last returned
        # the task kernel's passes, recorded on first use
        self._passes: dict[int, host_threads.SharedLaunch] | None = None

    def _set_spaces(self, obs_dim: int, act_dim: int) -> None:
        """Box observation (unbounded) and action ([-1, 1]) spaces, float32, single and batched, and the
        buffers the kernels read actions from and write their outputs to."""
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        n, dev = self.num_envs, self.device
        self._action = torch.zeros(n, act_dim, device=dev)  # the step's actions as given, float32
        # what the passes write (StepOut and observations): the step's, and the observe pass's
        nf = len(episode.F_ROWS) + sum(kind is float for _, kind in self.info_keys)
        nb = len(episode.B_ROWS) + sum(kind is bool for _, kind in self.info_keys)
        self._out = {
            name: {
                "f": torch.zeros(nf, n, device=dev),
                "b": torch.zeros(nb, n, dtype=torch.bool, device=dev),
                "length": torch.zeros(n, dtype=torch.int32, device=dev),
                "obs": torch.zeros(n, obs_dim, device=dev),
            }
            for name in ("step", "observe")
        }

    # ---- what a task implements ------------------------------------------------------------------
    info_keys: tuple[tuple[str, type], ...] = ()  # the task's step info keys and kinds (float or bool),
    # in order; its kernel writes them to StepOut rows F_TASK... and B_TASK...
    reset_noise_dim = 0  # uniform numbers a reset draws per env (reset stream)
    step_noise_dim = 0  # uniform numbers an observation draws per env (observation noise)

    def _apply_action(self) -> None:
        """Turn ``self._action`` ``(num_envs, act_dim)`` (the actions as given: the kernel clips them to
        [-1, 1]) into controls and advance the physics by one control step, without host reads."""
        raise NotImplementedError

    def _task_pass(
        self,
        phase: int,
        share: host_threads.Share,
        obs_out: wp.array,
        out: StepOut,
        episodes: Episodes,
        noise: wp.array,
    ) -> tuple[wp.Kernel, list]:
        """The task kernel and its inputs for one pass (``episode.PASS_*``), launched over the envs
        of ``share`` (``sim_core.host_threads``; the kernel's argument ``obs_out``): ``obs_out``
        ``(num_envs, obs_dim)`` receives the observation, ``out`` the outputs, ``episodes`` is the
        episode state; ``noise`` ``(num_envs, step_noise_dim)`` uniform draws to use instead of the
        step stream's, or ``(0, 0)``. Passes read the poses (current when the pass runs)."""
        raise NotImplementedError

    # ---- Gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every env, or with ``options={"reset_mask": mask}`` only the masked ones.

        ``seed`` reseeds every env's streams (and the counters), so everything that follows repeats.
        Returns ``(obs, infos)``; ``infos`` is empty. The other envs' observations are the ones last
        returned.
        """
        self._check_open("reset")
        seed = _check_seed(seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"options: unknown keys {sorted(options)}; known: ['reset_mask']")
        if seed is not None:
            self.rng.reseed(seed)
            self._reset_count.zero_()
            self._step_count.zero_()
        mask = self._all if mask is None else self._check_mask(mask)
        self._reset_masked(mask)
        obs = self._observe(None)
        if self._obs is not None and mask is not self._all:
            obs = torch.where(mask[:, None], obs, self._obs)
        self._obs = obs
        return obs, {}

    def step(self, actions):
        """Advance every env by one control step; see the module docstring for autoreset."""
        self._check_open("step")
        self._action.copy_(self._check_action(actions))
        self._apply_action()
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        final_obs = torch.empty_like(self._out["step"]["obs"]) if same_step else None  # returned
        self._run(PASS_STEP, final_obs)
        if self.autoreset_mode != AutoresetMode.DISABLED:  # the pass may have reset envs
            self.scene.sim.rigid_solver.state_changed_by_kernel()
        obs = self._observe(None)
        self._obs = obs
        return obs, *self._step_results(final_obs)

    def force_episode_end(self, mask, *, terminated: bool = True) -> None:
        """Make the masked envs' next ``step`` end their episodes (as a termination, or a truncation
        with ``terminated=False``), whatever the task says; for conformance checks and tests."""
        mask = self._check_mask(mask, name="mask")
        self._forced.masked_fill_(mask, 1 if terminated else 2)

    # ---- rendering ----------------------------------------------------------------------------
    render_cfg: RenderConfig | None = None  # set by tasks that render
    render_envs_idx: tuple[int, ...] | list[int] = (0,)  # which envs ``render()`` draws (env_spacing grid)

    def _set_render(
        self, render_mode: str | None, render_envs_idx, cfg: RenderConfig, control_dt: float
    ) -> None:
        """Validate the render options a task was given (nothing is created until ``render()``)."""
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: expected None or 'rgb_array', got {render_mode!r}")
        self.render_mode, self.render_cfg = render_mode, cfg
        self.metadata = {**self.metadata, "render_fps": round(1.0 / control_dt)}
        if render_envs_idx is not None:
            idx = [int(i) for i in render_envs_idx]
            if not idx or min(idx) < 0 or max(idx) >= self.num_envs:
                raise ValueError(f"render_envs_idx: expected indices in [0, {self.num_envs - 1}], got {idx}")
            self.render_envs_idx = idx
        self._renderer = None

    def _render_markers(self) -> list[Marker]:
        """Task markers (targets, goals) drawn by ``render()``; none by default."""
        return []

    def render(self):
        """``(H, W, 3)`` uint8 image of the envs in ``render_envs_idx`` (``render_mode="rgb_array"``),
        laid out on the ``env_spacing`` grid; ``None`` without a render mode, as in Gymnasium."""
        if self.render_mode is None:
            return None
        if self._renderer is None:
            self._renderer = SceneRenderer(self.scene, self.render_cfg)
        return self._renderer.render(self.render_envs_idx, self._render_markers())

    def close_extras(self, **kwargs) -> None:
        if getattr(self, "_renderer", None) is not None:
            self._renderer.close()
            self._renderer = None
        self.scene = None

    # ---- helpers ----------------------------------------------------------------------------
    def _observe(self, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Observations ``(num_envs, obs_dim)`` of the current state, written by the observe pass into
        a fresh tensor. ``noise``: ``(num_envs, step_noise_dim)`` uniform draws in [0, 1) to use
        instead of the step stream's."""
        obs = torch.empty(self.num_envs, *self.single_observation_space.shape, device=self.device)
        if noise is None:
            self._run(PASS_OBSERVE, obs)
            return obs
        given = noise.to(device=self.device, dtype=torch.float32).contiguous()
        if tuple(given.shape) != (self.num_envs, self.step_noise_dim):
            raise ValueError(
                f"noise: expected shape {(self.num_envs, self.step_noise_dim)}, got {tuple(given.shape)}"
            )
        self.scene.sim.rigid_solver.poses()
        self._record_pass(PASS_OBSERVE, wp.from_torch(given), wp.from_torch(obs)).launch()
        return obs

    def _evaluate(self) -> tuple:
        """``(reward, terminated, success, info)`` of the current state by the task alone (no time
        limit, no episode bookkeeping): ``(num_envs,)`` float32, bool, bool and the task's info keys
        (the evaluate pass). For tests and inspection; ``step`` does not call it."""
        self._run(PASS_EVALUATE)
        out = self._out["observe"]
        f, b = out["f"].clone().unbind(0), out["b"].clone().unbind(0)
        info = self._task_info(f[episode.F_TASK :], b[episode.B_TASK :])
        return f[episode.F_REWARD], b[episode.B_TERMINATED], b[episode.B_SUCCESS], info

    def _reset_masked(self, mask: torch.Tensor) -> None:
        """Reset the envs where ``mask`` ``(num_envs,)`` is True (the reset pass), with no host read."""
        self._reset_now.copy_(mask)
        self._run(PASS_RESET)
        self.scene.sim.rigid_solver.state_changed_by_kernel()

    def _run(self, phase: int, obs: torch.Tensor | None = None) -> None:
        """Launch one recorded pass of the task kernel, the poses brought up to date first; ``obs``: a
        tensor ``(num_envs, obs_dim)`` for the pass to write the observations to, for this launch
        (the pass's own buffer otherwise). Writing into a fresh tensor is what a copy of the
        buffer would cost, without the copy."""
        solver = self.scene.sim.rigid_solver
        if self._passes is None:
            none = wp.zeros((0, 0), dtype=wp.float32, device=solver.wp_device)
            self._passes = {}
            for p in (PASS_STEP, PASS_OBSERVE, PASS_RESET, PASS_EVALUATE):
                buffer = wp.from_torch(self._out["step" if p == PASS_STEP else "observe"]["obs"])
                self._passes[p] = self._record_pass(p, none, buffer)
        if phase != PASS_RESET:
            solver.poses()
        launch = self._passes[phase]
        if obs is not None:
            launch.set_tensor(self._obs_arg, obs)
        launch.launch()

    def _record_pass(self, phase: int, noise: wp.array, obs: wp.array) -> host_threads.SharedLaunch:
        """The recorded launch of ``phase`` (its host threads' shares, ``sim_core.host_threads``)
        writing observations to ``obs`` and the other outputs to the pass's own buffers."""
        buffers = self._out["step" if phase == PASS_STEP else "observe"]
        out = StepOut()
        out.f, out.b = wp.from_torch(buffers["f"]), wp.from_torch(buffers["b"], dtype=wp.bool)
        out.length = wp.from_torch(buffers["length"])
        episodes, solver = self._episodes(), self.scene.sim.rigid_solver
        kernel = self._task_pass(phase, host_threads.Share(), obs, out, episodes, noise)[0]
        self._obs_arg = [a.label for a in kernel.adj.args].index("obs_out")

        def inputs(share: host_threads.Share) -> list:
            return self._task_pass(phase, share, obs, out, episodes, noise)[1]

        return host_threads.record_envs(kernel, self.num_envs, inputs, solver.wp_device, solver.cpu_threads)

    def _episodes(self) -> Episodes:
        ep = Episodes()
        ep.key = self.rng.key
        ep.length, ep.reward_sum = wp.from_torch(self.episode_length), wp.from_torch(self.episode_return)
        ep.success_once = wp.from_torch(self.episode_success_once, dtype=wp.bool)
        ep.pending = wp.from_torch(self._pending, dtype=wp.bool)
        ep.forced = wp.from_torch(self._forced)
        ep.step_count, ep.reset_count = wp.from_torch(self._step_count), wp.from_torch(self._reset_count)
        ep.reset_now = wp.from_torch(self._reset_now, dtype=wp.bool)
        ep.max_steps = self.max_episode_steps
        ep.first_env = self.rng.first_env
        ep.mode = _MODES.get(self.autoreset_mode, episode.DISABLED)
        return ep

    def _task_info(self, floats: tuple[torch.Tensor, ...], bools: tuple[torch.Tensor, ...]) -> dict:
        """The task's info keys (``info_keys`` order) from its rows of the output slabs."""
        f, b = iter(floats), iter(bools)
        return {key: next(f) if kind is float else next(b) for key, kind in self.info_keys}

    def _step_results(self, final_obs: torch.Tensor | None) -> tuple:
        """``(reward, terminated, truncated, infos)`` of the step pass's outputs, in fresh tensors;
        ``final_obs``: the terminal observations (SAME_STEP)."""
        out = self._out["step"]
        f, b = out["f"].clone().unbind(0), out["b"].clone().unbind(0)
        reward, ret = f[: episode.F_TASK]
        terminated, truncated, ended, shown, success, error, ep_success, once = b[: episode.B_TASK]
        task_info = self._task_info(f[episode.F_TASK :], b[episode.B_TASK :])
        step_info = {**task_info, "success": success, "sim_error": error}
        length = out["length"].clone()
        infos: dict[str, Any] = {
            "episode": {"r": ret, "l": length, "success": ep_success, "success_once": once, "sim_error": error},
            "_episode": ended,
        }
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            infos["final_obs"], infos["_final_obs"] = final_obs, ended
            infos["final_info"] = _with_masks(step_info, ended)
            infos["_final_info"] = ended
        infos.update(_with_masks(step_info, shown))
        return reward, terminated, truncated, infos

    def _check_open(self, call: str) -> None:
        if self.closed:
            raise RuntimeError(f"{call}: the env is closed; make a new one")

    def _check_mask(self, mask, name: str = "options['reset_mask']") -> torch.Tensor:
        if isinstance(mask, np.ndarray):
            mask = torch.from_numpy(mask)
        if (
            not isinstance(mask, torch.Tensor)
            or mask.dtype != torch.bool
            or tuple(mask.shape) != (self.num_envs,)
        ):
            got = f"{type(mask).__name__} {getattr(mask, 'dtype', '')} {tuple(getattr(mask, 'shape', ()))}"
            raise ValueError(f"{name}: expected a boolean array of shape ({self.num_envs},), got {got}")
        return mask.to(self.device)

    def _check_action(self, actions) -> torch.Tensor:
        """``actions`` as a tensor on the env's device, checked (see the module docstring)."""
        shape = (self.num_envs, *self.single_action_space.shape)
        if isinstance(actions, np.ndarray):
            if self.device.type != "cpu":
                raise TypeError(
                    f"actions: got a NumPy array but the env runs on {self.device}; pass a torch tensor "
                    f"on that device (copying every step would be a hidden host-device transfer)"
                )
            actions = torch.from_numpy(actions)
        elif not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions: expected a torch tensor of shape {shape}, got {type(actions).__name__}")
        if not _same_device(actions.device, self.device):
            raise ValueError(f"actions: expected a tensor on {self.device}, got one on {actions.device}")
        if not (actions.dtype.is_floating_point or _is_int(actions.dtype)):
            raise TypeError(f"actions: dtype {actions.dtype} cannot be cast to float32")
        if tuple(actions.shape) != shape:
            raise ValueError(
                f"actions: expected shape {shape} (num_envs x action_space {self.single_action_space}), "
                f"got {tuple(actions.shape)}"
            )
        # the sum is finite unless some entry is NaN/inf (or the sum overflows: then look closer);
        # read on the host, the test of one number costs no torch op
        if (
            self.validate_actions
            and not math.isfinite(actions.sum().item())
            and not bool(torch.isfinite(actions).all())
        ):
            raise ValueError("actions: contain NaN or inf")
        return actions  # cast to float32 by the copy into the action buffer, clipped by the kernel


def _check_seed(seed) -> int | None:
    """``seed`` as a Python int (any integer, Python or NumPy), or None."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f"seed: expected an integer or None, got {type(seed).__name__} {seed!r}; one seed seeds "
            f"every env (env e draws from the streams of (seed, e))"
        )
    return int(seed)


def _is_int(dtype: torch.dtype) -> bool:
    return dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _with_masks(info: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """``info`` plus a ``_key`` mask for every key (Gymnasium's vector info convention)."""
    out = dict(info)
    for k in info:
        out[f"_{k}"] = mask
    return out
