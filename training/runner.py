"""The training loop: on-device rollouts into preallocated storage, PPO updates, logging, checkpoints.

Per iteration there is one host read (the logged statistics, gathered over ranks); the rollout loop
itself reads nothing back from the device. Truncated episodes are bootstrapped from the value of the
env's ``infos["final_obs"]`` (the env runs in ``SAME_STEP`` autoreset); terminated ones, and those
cut by a sim error, are not.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode
from torch.nn.parallel import DistributedDataParallel

from sim_core import host_threads
from warpgym.config import merge, to_dict
from warpgym.render import RenderUnavailableError
from warpgym.vector_env import WarpVectorEnv

from . import distributed
from .checkpoint import check_shapes, generator_state, link_atomic, restore_generator, save_atomic
from .config import RunSpec
from .cpu_threads import cpu_threads
from .evaluate import Evaluations
from .logger import Logger
from .models import ActorCritic, FrozenMLP, gaussian_log_prob
from .normalizer import ObsNormalizer
from .ppo import PPO
from .rollout_graph import RolloutGraph
from .storage import RolloutStorage, bootstrap_truncated, gae
from .video import add_video_to_tensorboard, rollout_frames

__all__ = ["Runner", "make_env", "make_video_env"]

_STATS = ("return_sum", "length_sum", "success_sum", "episodes", "sim_errors")
# the rollout's critic runs on chunks of rows whose widest hidden activations hold this many floats
# (4 MB): few calls, and each one's activations stay in the CPU's cache
_CRITIC_CHUNK_FLOATS = 1 << 20


def make_env(spec: RunSpec, num_envs: int, device: torch.device, seed: int, **kw: Any) -> gym.vector.VectorEnv:
    """The task's native vector env, configured from the run's config file and overrides."""
    env_kw = {**spec.env_overrides, **kw}
    return gym.make_vec(
        spec.task, num_envs=num_envs, device=device, seed=seed, config=spec.config_file, **env_kw
    )


def env_groups(spec: RunSpec, device: torch.device) -> list[slice]:
    """The rows of each group of envs a rollout steps at once (``train.env_groups``): one group on
    CUDA, else the configured number or, by default, one per host thread for a Warp task."""
    n, groups = spec.train.num_envs, spec.train.env_groups
    if device.type != "cpu":
        groups = 1
    elif groups == 0:
        entry = gym.spec(spec.task).vector_entry_point
        cls = load_env_creator(entry) if isinstance(entry, str) else entry
        warp_task = isinstance(cls, type) and issubclass(cls, WarpVectorEnv)
        groups = min(n, host_threads.default_threads()) if warp_task else 1
    return [slice(n * k // groups, n * (k + 1) // groups) for k in range(groups)]


def make_video_env(
    spec: RunSpec, device: torch.device, n: int, seed: int, size=(320, 240)
) -> gym.vector.VectorEnv:
    """``n`` envs drawn side by side, autoreset off, for short policy videos."""
    w, h = size
    return make_env(
        spec,
        n,
        device,
        seed,
        autoreset_mode=AutoresetMode.DISABLED,
        render_mode="rgb_array",
        render_envs_idx=list(range(n)),
        render={**spec.env_overrides.get("render", {}), "width": w, "height": h},
    )


class Runner:
    """PPO on one vector env per process; under torchrun the policy is wrapped in DDP."""

    def __init__(
        self, spec: RunSpec, ctx: distributed.Context, logdir: Path | None, *, video_every: int | None = None
    ):
        self.spec, self.ctx, self.cfg = spec, ctx, spec.train
        self.device = ctx.device
        seed = self.cfg.seed
        # the envs in groups that step at once (env_groups); actions come from the policy: no
        # per-step NaN check (a device sync on GPUs); a diverged policy is caught once per iteration
        # from the losses instead (see _log)
        self.groups = env_groups(spec, self.device)
        kw: dict[str, Any] = {"validate_actions": False}
        split = len(self.groups) > 1
        if split:  # each group steps on the one host thread that runs it
            kw["sim"] = merge(spec.env_overrides.get("sim", {}), {"cpu_threads": 1})
        self.envs = []
        for rows in self.groups:
            if split:  # its envs draw what the same rows of one batch would
                kw["first_env"] = rows.start
            self.envs.append(make_env(spec, rows.stop - rows.start, self.device, seed + ctx.rank, **kw))
        if any(env.metadata["autoreset_mode"] != AutoresetMode.SAME_STEP for env in self.envs):
            raise ValueError("the trainer needs an env in SAME_STEP autoreset mode")
        obs_dim = self.envs[0].single_observation_space.shape[0]
        act_dim = self.envs[0].single_action_space.shape[0]
        torch.manual_seed(seed)  # the same initial policy on every rank
        self.module = ActorCritic(obs_dim, act_dim, self.cfg.policy).to(self.device)
        self.normalizer = ObsNormalizer(obs_dim, enabled=self.cfg.ppo.normalize_obs).to(self.device)
        self.model: torch.nn.Module = self.module
        if distributed.is_distributed():
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.module, device_ids=ids)
        self.ppo = PPO(self.model, self.module, self.cfg.ppo, self.device, seed + ctx.rank)
        self.storage = RolloutStorage(self.cfg.ppo.num_steps, self.cfg.num_envs, obs_dim, act_dim, self.device)
        self._step_rows = [self.storage.step_rows(rows) for rows in self.groups]
        # the rollout's policy: refreshed in place at every rollout, so a recorded one reads it too
        self._policy = (
            FrozenMLP(self.module.actor),
            self.normalizer.affine(),
            torch.exp(self.storage.log_std),
        )
        # CUDA: the first rollout runs eagerly (it loads every kernel), the second is recorded into
        # a CUDA graph that every rollout replays from then on, from the observations in _graph_obs
        self._graph = RolloutGraph(self.device) if self.device.type == "cuda" and self.cfg.cuda_graph else None
        self._graph_obs: torch.Tensor | None = None
        self._warmed_up = False
        limit = getattr(self.envs[0].unwrapped, "max_episode_steps", None) or 1  # unknown: every row
        self._final_rows = self.cfg.num_envs * math.ceil(self.cfg.ppo.num_steps / limit)
        self.sampler = torch.Generator(device=self.device).manual_seed(seed + 7919 * (ctx.rank + 1))
        self.iteration = 0
        self.env_steps = 0  # over all ranks
        self.rollout_seconds = 0.0  # wall-clock spent collecting rollouts in this process
        self.logdir = logdir
        self.logger = None
        if ctx.is_main and logdir is not None:
            extra = {"task": spec.task, "config_file": spec.config_file, "env": spec.env_overrides}
            extra["ppo_bf16"] = self.ppo.bf16  # what train.ppo.bf16 ("auto" by default) chose here
            self.logger = Logger(logdir, to_dict(self.cfg), {**extra, "world_size": ctx.world_size})
        self._group_obs = [env.reset(seed=seed + ctx.rank)[0] for env in self.envs]
        self._stats = torch.zeros(len(_STATS), device=self.device)
        self.evaluations: Evaluations | None = None
        if self.cfg.eval_every and ctx.is_main:
            eval_env = functools.partial(
                make_env, spec, self.cfg.eval_episodes, self.device, seed, autoreset_mode=AutoresetMode.DISABLED
            )
            self.evaluations = Evaluations(eval_env, self.cfg.eval_episodes, logdir)
        self.eval_seconds = 0.0  # wall-clock spent evaluating in this process
        self._saved_at = -1  # the iteration of the last checkpoint saved
        self.video_every = video_every
        self._video_env = None
        if video_every and self.logger is not None:  # a machine that cannot render fails now, not later
            self._video_env = make_video_env(self.spec, self.device, 4, seed=777)
            self._video_env.reset(seed=777)
            try:
                self._video_env.render()
            except RenderUnavailableError as e:
                raise RenderUnavailableError(f"--video-every: {e}") from e

    def policy(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic policy: the Gaussian's mean on (normalized) observations."""
        return self.module.actor(self.normalizer(obs))

    # ---- rollout ------------------------------------------------------------------------------
    @torch.inference_mode()
    def collect(self) -> None:
        """Fill the storage with ``num_steps`` steps of every env and compute advantages.

        Per step only the actor runs; the critic's values of the observations, of the terminal
        observations of truncated episodes and of the last observation, and the actions'
        log-probabilities, are computed once over the whole rollout (the parameters do not change
        within it). Observations are normalized with the statistics as they stood when the rollout
        began (the first rollout: mean 0, variance 1), which are then updated from its observations
        once, as the parameters are by PPO.

        On the CPU each group of envs (``train.env_groups``) steps with its rows of the policy on a
        host thread of its own, torch on ``train.rollout_threads`` threads there; the batch work
        after the steps, while no env steps, on torch's own setting."""
        self._step_envs()
        s, ppo = self.storage, self.cfg.ppo
        values, final_values, last_values = self._values(self._obs)
        self.normalizer.update(s.flat("raw_obs"))  # a no-op when normalization is off
        s.values.copy_(values)
        s.log_probs.copy_(gaussian_log_prob(s.actions, s.means, s.log_std))
        rewards = bootstrap_truncated(s.rewards, s.bootstrapped, final_values, ppo.gamma)
        s.advantages, s.returns = gae(rewards, s.values, s.dones, last_values, ppo.gamma, ppo.lam)
        self._stats += s.episode_sums()

    @property
    def _obs(self) -> torch.Tensor:
        """(num_envs, obs_dim): every env's observation, the groups' rows in order."""
        return self._group_obs[0] if len(self._group_obs) == 1 else torch.cat(self._group_obs)

    def _step_envs(self) -> None:
        """``num_steps`` steps of every env by the policy as it stands, into the storage: the
        groups at once (``host_threads.run_jobs``), or on CUDA the recorded rollout replayed. The
        action noise of the whole rollout is drawn first, so it does not depend on the groups
        either."""
        s = self.storage
        s.log_std.copy_(self.module.log_std.detach())
        torch.randn(s.noise.shape, generator=self.sampler, device=self.device, out=s.noise)
        actor, affine, std = self._policy
        actor.load_(self.module.actor)
        self.normalizer.affine(out=affine)
        torch.exp(s.log_std, out=std)
        if self._graph is None or not self._warmed_up:
            host_threads.run_jobs(
                [functools.partial(self._step_group, k, *self._policy) for k in range(len(self.envs))]
            )
            self._warmed_up = True
            return
        if not self._graph.captured:  # the buffer a replay starts from and leaves its last observations in
            self._graph_obs = self._group_obs[0].clone()
            self._graph.capture(self._recorded_steps)
        self._graph.replay()
        self._group_obs[0] = self._graph_obs

    def _recorded_steps(self) -> None:
        """The steps a ``RolloutGraph`` records (one group): from the observations in
        ``_graph_obs``, and back into it."""
        self._group_obs[0] = self._graph_obs
        self._step_group(0, *self._policy)
        self._graph_obs.copy_(self._group_obs[0])

    def _step_group(self, k: int, actor: FrozenMLP, affine: tuple, std: torch.Tensor) -> None:
        """The rollout's steps of group ``k``'s envs, into its rows of the storage (in place where
        possible): ``actor`` and the normalizer's ``affine`` as they stood when the rollout began."""
        env, obs = self.envs[k], self._group_obs[k]
        with torch.inference_mode(), cpu_threads(self.cfg.rollout_threads, self.device):
            for v in self._step_rows[k]:
                v.raw_obs.copy_(obs)
                mean = actor(self.normalizer(obs, out=v.obs, affine=affine), out=v.means)
                action = torch.addcmul(mean, v.noise, std, out=v.actions)
                obs, reward, terminated, truncated, info = env.step(action)
                v.rewards.copy_(reward)
                v.terminated.copy_(terminated)
                v.truncated.copy_(truncated)
                v.final_obs.copy_(info["final_obs"])
                ep = info["episode"]
                v.ep_ended.copy_(info["_episode"])
                v.ep_return.copy_(ep["r"])
                v.ep_length.copy_(ep["l"])
                v.ep_success.copy_(ep["success"])
                if "sim_error" in ep:  # sim-error endings, from envs that report them (WarpVectorEnv does)
                    v.ep_sim_error.copy_(ep["sim_error"])
        self._group_obs[k] = obs

    def _values(self, last_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critic's values of the rollout: of every step's observation ``(T, N)``, of the terminal
        observations of the episodes bootstrapped at each step ``(T, N)`` (0 elsewhere) and of
        ``last_obs`` ``(N,)``.

        The critic runs on chunks of ``_CRITIC_CHUNK_FLOATS / widest hidden layer`` rows. Terminal
        observations are gathered first: an env is cut by the time limit at most
        ``ceil(T / max_episode_steps)`` times in T steps, so a fixed number of rows (sorted to the
        front, no host read) holds every one of them."""
        s = self.storage
        T, N = s.rewards.shape
        critic = FrozenMLP(self.module.critic)
        chunk = _CRITIC_CHUNK_FLOATS // max(self.cfg.policy.critic_hidden, default=1)
        values = torch.cat([critic(c) for c in s.flat("obs").split(chunk)]).view(T, N)
        boot = s.bootstrapped.reshape(-1)
        rows = torch.sort(boot.to(torch.uint8), descending=True, stable=True).indices[: self._final_rows]
        final = torch.zeros(T * N, device=self.device)
        final[rows] = critic(self.normalizer(s.flat("final_obs")[rows])).squeeze(-1) * boot[rows]
        return values, final.view(T, N), critic(self.normalizer(last_obs)).squeeze(-1)

    # ---- the loop -------------------------------------------------------------------------------
    def iterate(self, elapsed_before: float = 0.0, total: int | None = None, max_time_s: float | None = None):
        """One iteration: rollout, update, log (one host read), checkpoint every ``save_every``."""
        t0 = time.perf_counter()
        self.collect()
        t1 = time.perf_counter()
        self.rollout_seconds += t1 - t0
        losses = self.ppo.update(self.storage)
        t2 = time.perf_counter()
        self.iteration += 1
        self.env_steps += self.cfg.batch_size * self.ctx.world_size
        self._log(losses, t1 - t0, t2 - t1, elapsed_before + t2 - t0, total, max_time_s)
        evaluate_now = self.evaluations is not None and self.iteration % self.cfg.eval_every == 0
        saved = None
        if self.iteration % self.cfg.save_every == 0 or evaluate_now:  # best.pt may name an evaluated one
            saved = self.save()
        if evaluate_now:
            self._evaluate(saved)
        if self.video_every and self.logger is not None and self.iteration % self.video_every == 0:
            self._video()

    def _evaluate(self, saved: Path | None) -> None:
        """The deterministic policy on the evaluation episodes (``train.eval_every``), logged; ``saved``:
        this iteration's checkpoint (None: none written)."""
        with cpu_threads(self.cfg.rollout_threads, self.device):
            result = self.evaluations(self.policy, self.iteration, self.env_steps, saved)
        self.eval_seconds += result["seconds"]
        if self.logger is not None:
            self.logger.log_eval(result)

    def _video(self) -> None:
        """A short deterministic rollout of 4 envs into TensorBoard (``--video-every``)."""
        env = self._video_env
        frames = rollout_frames(self.policy, env, env.unwrapped.max_episode_steps, seed=777 + self.iteration)
        add_video_to_tensorboard(
            self.logger.writer, "videos/policy", frames, self.env_steps, env.metadata["render_fps"]
        )

    def train(self, max_iterations: int | None = None, max_time_s: float | None = None) -> None:
        """Train until ``max_iterations`` (total, counting resumed ones; default: the config's) or, when
        only ``max_time_s`` is given, for that many seconds of training (evaluations not counted);
        Ctrl-C saves a checkpoint and stops."""
        total = max_iterations if max_iterations is not None else self.cfg.max_iterations
        if max_iterations is None and max_time_s is not None:
            total = None  # until the time is up
        start, evaluated = time.perf_counter(), self.eval_seconds
        try:
            while total is None or self.iteration < total:  # the evaluations' time is not training time
                elapsed = time.perf_counter() - start - (self.eval_seconds - evaluated)
                if max_time_s is not None and elapsed >= max_time_s:
                    break
                self.iterate(elapsed, total, max_time_s)
        except KeyboardInterrupt:
            if self.ctx.is_main:
                print("\ninterrupted: saving a checkpoint", file=sys.stderr)
            self.save()
            raise
        self.finish()

    def finish(self) -> None:
        """Final checkpoint (unless this iteration's is saved: best.pt may name it), DDP consistency
        check, close the logs."""
        if self._saved_at != self.iteration:
            self.save()
        self._check_ranks_in_sync()
        if self.logger is not None:
            self.logger.close()

    def _log(self, losses, rollout_s, update_s, elapsed, total, max_time_s) -> None:
        """The iteration's one host read: episode statistics (summed over ranks) and losses."""
        stats = distributed.all_reduce_sum(self._stats.clone())
        self._stats.zero_()
        values = torch.cat([stats, torch.stack(list(losses.values())), self.ppo.lr.reshape(1)]).tolist()
        ns = len(_STATS)
        bad = [k for k, v in zip(losses, values[ns:-1], strict=True) if not math.isfinite(v)]
        if bad:
            raise RuntimeError(f"training diverged at iteration {self.iteration}: non-finite {bad}")
        if self.logger is None:
            return
        r_sum, l_sum, s_sum, n, errors = values[:ns]
        steps = self.cfg.batch_size * self.ctx.world_size
        scalars = {
            "perf/env_steps_per_s": steps / rollout_s,
            "perf/update_time": update_s,
            "perf/rollout_time": rollout_s,
            "charts/learning_rate": values[-1],
            # episodes cut short because their env's state went non-finite or overflowed its
            # contact budget (truncated, flagged "sim_error" in the step info, reset alone)
            "charts/sim_error_episodes": errors,
        }
        for key, v in zip(losses, values[ns:-1], strict=True):
            scalars[f"losses/{key}"] = v
        if n > 0:
            scalars.update(
                {
                    "charts/episode_return": r_sum / n,
                    "charts/episode_length": l_sum / n,
                    "charts/success_rate": s_sum / n,
                }
            )
        self.logger.log(self.iteration, self.env_steps, scalars, elapsed, total, max_time_s)

    # ---- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs, as tensors and plain data (see ``checkpoint``)."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "model": self.module.state_dict(),
            "normalizer": self.normalizer.state_dict(),
            "optimizer": self.ppo.optimizer.state_dict(),
            "lr": self.ppo.lr.item(),
            "sampler": generator_state(self.sampler),
            "minibatch_rng": generator_state(self.ppo.generator),
            "spec": {
                "task": self.spec.task,
                "config_file": self.spec.config_file,
                "env_overrides": self.spec.env_overrides,
                "train": to_dict(self.cfg),
            },
        }

    def load_state_dict(self, ckpt: dict[str, Any]) -> list[str]:
        """Continue from ``ckpt`` (a ``state_dict``, possibly saved on another device). Raises
        ``CheckpointError`` when its model does not fit this run's env. Returns one-line notes,
        for rank 0 to print, on what could not be restored as saved.

        The random generators (action noise, minibatch order) get their saved state back when they
        were saved on the same type of device; a state from another type cannot be set, so they are
        reseeded from it (see ``restore_generator``): the run continues deterministically, but not
        as it would have on the saving device. A DDP rank other than 0 reseeds from rank 0's
        saved state and its rank, so the ranks keep streams of their own."""
        check_shapes(self.module, ckpt["model"], "model")
        check_shapes(self.normalizer, ckpt["normalizer"], "observation normalizer")
        self.iteration, self.env_steps = ckpt["iteration"], ckpt["env_steps"]
        self.module.load_state_dict(ckpt["model"])
        self.normalizer.load_state_dict(ckpt["normalizer"])
        self.ppo.load_optimizer_state(ckpt["optimizer"], ckpt["lr"])
        rank, reseeded = self.ctx.rank, []
        for key, generator in (("sampler", self.sampler), ("minibatch_rng", self.ppo.generator)):
            salt = f"{key}/{self.iteration}/{rank}"
            if not restore_generator(generator, ckpt[key], salt, exact=rank == 0):
                reseeded.append(key)
        if rank != 0 or not reseeded:
            return []
        saved = ckpt["sampler"]["device"] if isinstance(ckpt["sampler"], dict) else "another type of device"
        return [
            f"random generators {', '.join(reseeded)} were saved on {saved} and run on {self.device.type}: "
            "reseeded from their saved state (deterministic, but not the stream the saving device would give)"
        ]

    def save(self) -> Path | None:
        """This iteration's checkpoint, also linked as ``last.pt``; its path (None: this process
        writes none)."""
        if not self.ctx.is_main or self.logdir is None:
            return None
        ckpt_dir = self.logdir / "checkpoints"
        path = ckpt_dir / f"model_{self.iteration:06d}.pt"
        save_atomic(self.state_dict(), path)
        link_atomic(path, ckpt_dir / "last.pt")
        self._saved_at = self.iteration
        return path

    def _check_ranks_in_sync(self) -> None:
        """Under DDP every rank must hold the same parameters; rank 0 records the per-rank sums."""
        if not distributed.is_distributed():
            return
        flat = torch.cat([p.detach().reshape(-1) for p in self.module.parameters()]).double()
        mine = torch.stack([flat.sum(), (flat * torch.arange(flat.numel(), device=flat.device)).sum()])
        everyone = [torch.zeros_like(mine) for _ in range(self.ctx.world_size)]
        torch.distributed.all_gather(everyone, mine)
        sums = [t.tolist() for t in everyone]
        same = all(
            math.isclose(a, b, rel_tol=0, abs_tol=0) for s in sums for a, b in zip(s, sums[0], strict=True)
        )
        if self.ctx.is_main and self.logdir is not None:
            (self.logdir / "ddp_check.json").write_text(json.dumps({"param_checksums": sums, "in_sync": same}))
        if not same:
            raise RuntimeError(f"DDP ranks diverged: parameter checksums {sums}")
