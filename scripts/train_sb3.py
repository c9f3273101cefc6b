#!/usr/bin/env python
"""Train Stable-Baselines3's PPO on a warpgym task through ``warpgym.adapters.sb3.Sb3VecEnv``.

TensorBoard logs go to ``--logdir`` (SB3's own ``rollout/ep_rew_mean``, ``rollout/success_rate``,
``train/*``). Every ``--eval-every`` env-steps the deterministic policy runs ``--episodes`` fresh
episodes (one per env, autoreset disabled, unseen seeds; not counted as training time); training
stops once the success rate reaches ``--target`` or after ``--timesteps``. The last line is JSON with
the training wall-clock time it took.

    pip install -e ".[adapters]"
    python scripts/train_sb3.py                                   # FrankaReach, default config
    python scripts/train_sb3.py env.control_mode=ee_delta env.success_threshold=0.05
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

import warpgym  # noqa: F401
from warpgym.adapters.sb3 import Sb3VecEnv
from warpgym.training.config import parse_overrides
from warpgym.training.evaluate import evaluate


class _EvalAndStop(BaseCallback):
    def __init__(self, eval_env, every: int, episodes: int, target: float):
        super().__init__()
        self.eval_env, self.every, self.episodes, self.target = eval_env, every, episodes, target
        self.next_eval, self.train_time, self.rows, self.reached = every, 0.0, [], None
        self._t = time.perf_counter()

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return True
        self.train_time += time.perf_counter() - self._t
        self.next_eval += self.every

        def policy(obs: torch.Tensor) -> torch.Tensor:
            action, _ = self.model.predict(obs.cpu().numpy(), deterministic=True)
            return torch.as_tensor(np.asarray(action, dtype=np.float32), device=obs.device)

        result = evaluate(policy, self.eval_env, self.episodes, seed=50_000 + len(self.rows))
        self.rows.append({"seconds": self.train_time, "env_steps": self.num_timesteps, **result})
        self.logger.record("eval/success_rate", result["success_rate"])
        print(
            f"{self.train_time:7.1f} s  {self.num_timesteps:9,d} steps  success {result['success_rate']:.3f}",
            flush=True,
        )
        if result["success_rate"] >= self.target and self.reached is None:
            self.reached = self.rows[-1]
        self._t = time.perf_counter()
        return self.reached is None


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaReach-v0")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--timesteps", type=int, default=3_000_000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--logdir", default="runs/sb3")
    p.add_argument("--eval-every", type=int, default=50_000, help="env-steps between evaluations")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("overrides", nargs="*", help="env.key=value config overrides")
    args = p.parse_args(argv)
    env_kw = parse_overrides(args.overrides).get("env", {})
    venv = Sb3VecEnv(gym.make_vec(args.task, num_envs=args.num_envs, device=args.device, **env_kw))
    eval_env = gym.make_vec(
        args.task, num_envs=args.episodes, device=args.device, autoreset_mode=AutoresetMode.DISABLED, **env_kw
    )
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=128,
        batch_size=2048,
        n_epochs=5,
        gamma=0.98,
        learning_rate=1e-3,
        ent_coef=0.0,
        policy_kwargs={"net_arch": [128, 128], "log_std_init": -0.5},
        tensorboard_log=args.logdir,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    callback = _EvalAndStop(eval_env, args.eval_every, args.episodes, args.target)
    model.learn(total_timesteps=args.timesteps, callback=callback)
    r = callback.reached
    print(
        json.dumps(
            {
                "reached": r is not None,
                "target": args.target,
                "seconds": r and r["seconds"],
                "env_steps": r and r["env_steps"],
                "evaluations": callback.rows,
            }
        )
    )


if __name__ == "__main__":
    main()
