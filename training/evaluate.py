"""Deterministic evaluation on fresh episodes, without the bias toward short episodes."""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

__all__ = ["evaluate"]


@torch.inference_mode()
def evaluate(
    policy: Callable[[torch.Tensor], torch.Tensor], env: gym.vector.VectorEnv, episodes: int, seed: int
) -> dict[str, float | int]:
    """Success rate and mean return of ``policy`` (observations -> actions) over ``episodes`` episodes.

    ``env`` must be in ``DISABLED`` autoreset mode. It runs rounds of ``env.num_envs`` fresh episodes
    (``reset(seed=seed + round)``) and each env contributes exactly its first episode of a round, so
    short (e.g. successful) episodes are not over-counted.
    """
    if env.metadata["autoreset_mode"] != AutoresetMode.DISABLED:
        raise ValueError("evaluate: the env must run with autoreset_mode=DISABLED")
    n = env.num_envs
    returns, successes = [], []
    for r in range(math.ceil(episodes / n)):
        obs, _ = env.reset(seed=seed + r)
        finished = torch.zeros(n, dtype=torch.bool, device=obs.device)
        ep_return = torch.zeros(n, device=obs.device)
        ep_success = torch.zeros(n, dtype=torch.bool, device=obs.device)
        for _ in range(env.unwrapped.max_episode_steps):
            obs, _, _, _, info = env.step(policy(obs))
            new = info["_episode"] & ~finished
            ep_return = torch.where(new, info["episode"]["r"], ep_return)
            ep_success = torch.where(new, info["episode"]["success"], ep_success)
            finished |= new
            if bool(finished.all()):
                break
        take = min(n, episodes - r * n)
        returns.append(ep_return[:take].cpu())
        successes.append(ep_success[:take].cpu())
    ret, succ = torch.cat(returns), torch.cat(successes)
    return {
        "success_rate": succ.float().mean().item(),
        "mean_return": ret.mean().item(),
        "episodes": int(ret.numel()),
    }
