"""Actor-critic MLPs with a Gaussian policy whose log standard deviation is a learned parameter."""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import PolicyConfig

__all__ = ["ActorCritic", "Tanh", "gaussian_log_prob"]


class _SigmoidTanh(torch.autograd.Function):
    """tanh(x) as 2 sigmoid(2x) - 1 (within 2e-7 of ``torch.tanh``); its gradient is tanh's."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = x * 2.0
        torch.sigmoid_(y)
        y.mul_(2.0).sub_(1.0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class Tanh(nn.Module):
    """``nn.Tanh``, faster for float32 on the CPU: there this torch build's ``tanh`` is several times slower
    per element than its ``sigmoid``, so it is computed
    from the sigmoid. Other dtypes (bfloat16 under autocast) and devices use ``torch.tanh``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and x.device.type == "cpu":
            return _SigmoidTanh.apply(x)
        return torch.tanh(x)


_ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": Tanh}


def _mlp(sizes: list[int], activation: str, out_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(lin.weight, out_gain if last else math.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log density of a diagonal Gaussian, summed over the last dimension: ``(...,)``."""
    z = (x - mean) * torch.exp(-log_std)
    return (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


class ActorCritic(nn.Module):
    """``forward(obs) -> (action mean (B, A), log std (A,), value (B,))`` on normalized observations."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: PolicyConfig):
        super().__init__()
        self.actor = _mlp([obs_dim, *cfg.actor_hidden, act_dim], cfg.activation, 0.01)
        self.critic = _mlp([obs_dim, *cfg.critic_hidden, 1], cfg.activation, 1.0)
        self.log_std = nn.Parameter(torch.full((act_dim,), cfg.init_log_std))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.actor(obs), self.log_std, self.critic(obs).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)
