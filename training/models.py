"""Actor-critic MLPs with a Gaussian policy whose log standard deviation is a learned parameter."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import torch
from torch import nn

from .config import PolicyConfig

__all__ = ["ActorCritic", "FrozenMLP", "Tanh", "gaussian_log_prob"]


def _sigmoid_tanh_(y: torch.Tensor) -> torch.Tensor:
    """``y = 2x`` overwritten by 2 sigmoid(2x) - 1 = tanh(x)."""
    return torch.sigmoid_(y).mul_(2.0).sub_(1.0)


def _sigmoid_tanh(x: torch.Tensor, inplace: bool) -> torch.Tensor:
    """tanh(x) as 2 sigmoid(2x) - 1, written over ``x`` when ``inplace``."""
    return _sigmoid_tanh_(x.mul_(2.0) if inplace else x * 2.0)


class _SigmoidTanh(torch.autograd.Function):
    """tanh(x) as 2 sigmoid(2x) - 1 (within 2e-7 of ``torch.tanh``); its gradient is tanh's. With
    ``inplace`` the result is written over ``x``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, inplace: bool) -> torch.Tensor:
        if inplace:
            ctx.mark_dirty(x)
        y = _sigmoid_tanh(x, inplace)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y), None


def _mkl_tanh_is_slow() -> bool:
    """Whether this machine's float32 ``torch.tanh`` on the CPU is several times slower per element than
    ``torch.sigmoid``. Torch computes it with MKL's vector math where torch is built with MKL, and MKL
    runs its optimized code only on Intel CPUs: elsewhere (AMD) it takes a generic path (the same
    slowdown appears on Intel with ``MKL_ENABLE_INSTRUCTIONS=SSE4_2``). ``torch.sigmoid`` is torch's
    own vectorized code on every CPU."""
    if not torch.backends.mkl.is_available():
        return False
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "vendor_id" in cpuinfo and "GenuineIntel" not in cpuinfo


_SLOW_CPU_TANH = _mkl_tanh_is_slow()


def _float32_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh of a bfloat16 tensor through float32 (see ``_Float32Tanh``)."""
    y = x.float()
    return (_sigmoid_tanh_(y.mul_(2.0)) if _SLOW_CPU_TANH else y.tanh_()).to(x.dtype)


class _Float32Tanh(torch.autograd.Function):
    """tanh of a bfloat16 CPU tensor (a hidden layer under autocast), computed in float32 and rounded
    back to bfloat16: torch's bfloat16 tanh on the CPU runs 2-3x slower than converting, taking
    float32's vectorized tanh and converting back. Within bfloat16's rounding of the exact tanh;
    its gradient is tanh's, from the bfloat16 output."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = _float32_tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class Tanh(nn.Module):
    """``nn.Tanh`` for the CPU's fast paths: a float32 tensor on a machine whose ``torch.tanh`` is slow
    there (``_mkl_tanh_is_slow``) as 2 sigmoid(2x) - 1, a bfloat16 one in float32
    (``_Float32Tanh``); other tensors by ``torch.tanh``. The choice is fixed per machine, so results
    stay the same bit for bit from run to run.

    ``inplace=True`` (as in ``nn.ReLU``) lets it overwrite the input, which must not be needed
    elsewhere (a hidden layer's output is not): float32 values and gradients without allocating and
    filling a second activation-sized tensor. A bfloat16 input is left as it is."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu":
            grad = torch.is_grad_enabled()  # without it the ops run bare, skipping autograd's bookkeeping
            if x.dtype == torch.bfloat16:
                return _Float32Tanh.apply(x) if grad else _float32_tanh(x)
            if _SLOW_CPU_TANH and x.dtype == torch.float32:
                return _SigmoidTanh.apply(x, self.inplace) if grad else _sigmoid_tanh(x, self.inplace)
        return x.tanh_() if self.inplace else torch.tanh(x)


# a hidden layer's activation; it reads only the nn.Linear output before it, so tanh may overwrite it
_ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": functools.partial(Tanh, inplace=True)}


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


class FrozenMLP:
    """An MLP of ``_mlp``'s form evaluated from a snapshot of its parameters, without autograd and in
    as few ops as possible: per hidden layer one ``addmm`` and one in-place activation, the output
    layer one ``addmm`` (into ``out`` when given). For the rollouts, whose parameters stay fixed for
    thousands of forward passes: on a CPU a pass over a few hundred rows costs as much in per-op
    dispatch as in arithmetic, and fewer ops mean fewer hand-overs of Python's GIL between the
    host threads that step env groups at once.

    A tanh layer computes ``s = sigmoid(2 z)`` (``tanh(z) = 2 s - 1``), with the 2 and the map from
    ``s`` back to ``tanh(z)`` folded into its own and the next layer's weights and biases; the result
    equals the module's within float32 round-off. ELU and ReLU layers apply the activation in place."""

    _IN_PLACE = {Tanh: torch.sigmoid_, nn.ELU: nn.functional.elu_, nn.ReLU: torch.relu_}

    def __init__(self, mlp: nn.Sequential):
        linears, acts = list(mlp[::2]), {type(m) for m in mlp[1::2]}
        linear = all(isinstance(m, nn.Linear) for m in linears)
        if not linear or len(acts) > 1 or not acts <= self._IN_PLACE.keys():
            raise TypeError(f"FrozenMLP: expected Linear layers with one activation between them, got {mlp}")
        act = acts.pop() if acts else None
        self._activation = self._IN_PLACE.get(act)
        self._tanh = act is Tanh
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = [
            (w.clone().t(), b.clone()) for w, b in self._folded(linears)
        ]

    @torch.no_grad()
    def _folded(self, linears: list[nn.Linear]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's ``(weight (out, in), bias (out,))`` with the tanh layers' factors folded in."""
        layers = []
        for i, lin in enumerate(linears):
            w, b = lin.weight.detach(), lin.bias.detach()
            if self._tanh and i > 0:  # the input is s = (h + 1) / 2: W h + b = 2 W s + (b - W 1)
                w, b = 2.0 * w, b - w.sum(1)
            if self._tanh and i < len(linears) - 1:  # sigmoid of 2 z
                w, b = 2.0 * w, 2.0 * b
            layers.append((w, b))
        return layers

    def load_(self, mlp: nn.Sequential) -> FrozenMLP:
        """Take ``mlp``'s current parameters (an MLP of the same shape) into this snapshot's own
        tensors, in place: a rollout recorded in a CUDA graph reads them at the same addresses."""
        for (wt, b), (w_new, b_new) in zip(self.layers, self._folded(list(mlp[::2])), strict=True):
            wt.copy_(w_new.t())
            b.copy_(b_new)
        return self

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """``(B, in) -> (B, out)``; ``out``: a tensor for the last layer's output."""
        last = len(self.layers) - 1
        for i, (wt, b) in enumerate(self.layers):
            x = torch.addmm(b, x, wt, out=out if i == last else None)
            if i < last:
                self._activation(x)
        return x


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
