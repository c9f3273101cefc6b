"""Rollout storage preallocated on the device, filled in place, and GAE with truncation bootstrapping."""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["RolloutStorage", "StepRows", "gae", "bootstrap_truncated"]


class StepRows(NamedTuple):
    """Views of one step's rows of the buffers the rollout loop writes, ``(rows, ...)`` each."""

    noise: torch.Tensor
    raw_obs: torch.Tensor
    obs: torch.Tensor
    means: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    ep_ended: torch.Tensor
    ep_return: torch.Tensor
    ep_length: torch.Tensor
    ep_success: torch.Tensor
    ep_sim_error: torch.Tensor


def bootstrap_truncated(
    rewards: torch.Tensor, truncated: torch.Tensor, final_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Rewards with ``gamma * V(final_obs)`` added where an episode was truncated (cut by the time
    limit, not ended by the task), so treating every episode end as terminal stays unbiased."""
    return rewards + gamma * final_values * truncated


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016) over ``(T, N)`` tensors.

    ``dones[t]`` is True when the episode ended at step ``t`` (terminated or truncated; truncations
    are expected to be bootstrapped into ``rewards`` already). ``last_values (N,)`` is ``V`` of the
    observation after the last step. Returns ``(advantages, returns)``, both ``(T, N)``.
    """
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    next_values = last_values
    for t in range(rewards.shape[0] - 1, -1, -1):  # over time steps only; envs stay batched
        alive = 1.0 - dones[t].float()
        delta = rewards[t] + gamma * next_values * alive - values[t]
        running = delta + gamma * lam * alive * running
        adv[t] = running
        next_values = values[t]
    return adv, adv + values


class RolloutStorage:
    """``(T, N, ...)`` buffers for T steps of N envs on ``device``.

    The rollout loop writes only what each step produces (observations, actions, means, rewards,
    flags, terminal observations and the episodes that ended); values, log-probabilities and the
    episode statistics are computed from them in batch once the rollout is complete.
    """

    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, act_dim: int, device: torch.device):
        def z(*shape, dtype=torch.float32):
            return torch.zeros(num_steps, num_envs, *shape, dtype=dtype, device=device)

        self.obs = z(obs_dim)  # normalized observations the actions were taken on
        self.raw_obs = z(obs_dim)  # the same as the env returned them (for the normalizer's statistics)
        self.noise = z(act_dim)  # the standard normal action noise, drawn when the rollout begins
        self.actions = z(act_dim)
        self.means = z(act_dim)  # action means at sampling time (for the KL)
        self.log_probs = z()
        self.values = z()
        self.rewards = z()  # as the env returned them; truncations bootstrapped after the rollout
        self.terminated = z(dtype=torch.bool)
        self.truncated = z(dtype=torch.bool)
        self.final_obs = z(obs_dim)  # terminal observations as returned (rows where truncated count)
        self.log_std = torch.zeros(act_dim, device=device)  # policy log std at sampling time
        self.advantages = z()
        self.returns = z()
        # episodes that ended at each step: mask, return, length, success, sim error
        self.ep_ended = z(dtype=torch.bool)
        self.ep_return = z()
        self.ep_length = z()
        self.ep_success = z(dtype=torch.bool)
        self.ep_sim_error = z(dtype=torch.bool)

    @property
    def dones(self) -> torch.Tensor:
        """(T, N) bool: the episode ended at this step (terminated or truncated)."""
        return self.terminated | self.truncated

    @property
    def bootstrapped(self) -> torch.Tensor:
        """(T, N) bool: the episode was truncated at this step and is bootstrapped from the value of
        its terminal observation; an episode cut by a sim error is not (its state is not finite
        or its contacts overflowed, so its value means nothing) and counts as terminated."""
        return self.truncated & ~(self.ep_ended & self.ep_sim_error)

    def episode_sums(self) -> torch.Tensor:
        """(5,) sums over the episodes that ended in this rollout: return, length, successes,
        episodes, sim-error endings."""
        ended = self.ep_ended
        return torch.stack(
            [
                torch.where(ended, self.ep_return, 0.0).sum(),
                torch.where(ended, self.ep_length, 0.0).sum(),
                (ended & self.ep_success).sum().float(),
                ended.sum().float(),
                (ended & self.ep_sim_error).sum().float(),
            ]
        )

    def step_rows(self, rows: slice) -> list[StepRows]:
        """For each step ``t``, views of ``rows`` of the buffers at ``t``, made once: indexing a
        buffer afresh costs two torch ops per write, some 30 per step of the rollout loop."""
        steps = range(self.obs.shape[0])
        return [StepRows(*(getattr(self, f)[t, rows] for f in StepRows._fields)) for t in steps]

    def flat(self, name: str) -> torch.Tensor:
        t = getattr(self, name)
        return t.reshape(-1, *t.shape[2:])
