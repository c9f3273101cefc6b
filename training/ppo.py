"""The PPO update (Schulman et al. 2017): clipped surrogate, clipped value loss, entropy bonus,
gradient clipping, and a KL-adaptive learning rate kept on the device (no host read per minibatch)."""

from __future__ import annotations

import copy
import math
import warnings

import torch
from torch import nn

from . import distributed
from .config import PPOConfig
from .models import gaussian_log_prob
from .storage import RolloutStorage

__all__ = ["PPO"]


def _cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (torch's own capability checks)."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def uses_bf16(setting: bool | str, device: torch.device) -> bool:
    """Whether the update runs under bfloat16 autocast for ``train.ppo.bf16 = setting`` on ``device``:
    ``"auto"`` is on for a CPU with native bfloat16 matrix products and off elsewhere (on CUDA the
    option has not been measured; an emulating CPU runs it many times slower)."""
    if setting == "auto":
        return device.type == "cpu" and _cpu_has_bf16()
    return bool(setting)


class PPO:
    """Optimizes ``model`` (the DDP wrapper under torchrun) whose parameters are ``module``'s."""

    def __init__(self, model: nn.Module, module: nn.Module, cfg: PPOConfig, device: torch.device, seed: int):
        self.model, self.cfg, self.device = model, cfg, device
        self.lr = torch.tensor(cfg.learning_rate, device=device)  # a tensor: adapted without a sync
        # CUDA: capturable (the step count stays on the device); the CPU: fused, one kernel for all
        # parameters, several times faster than the per-tensor loop a tensor learning rate needs there
        cuda, cpu = device.type == "cuda", device.type == "cpu"
        params = module.parameters()
        self.optimizer = torch.optim.Adam(params, lr=self.lr, capturable=cuda, fused=True if cpu else None)
        self.generator = torch.Generator(device=device).manual_seed(seed)  # minibatch order
        self.bf16 = uses_bf16(cfg.bf16, device)
        if cfg.bf16 is True and device.type == "cpu" and not _cpu_has_bf16():
            warnings.warn(
                "train.ppo.bf16: this CPU has neither AVX512-BF16 nor AMX, so bfloat16 matrix products are "
                "emulated and the update runs many times slower than in float32",
                stacklevel=2,
            )

    def load_optimizer_state(self, state: dict, lr: float) -> None:
        """Adam's state and the learning rate from a checkpoint, possibly saved on another device:
        the options that follow the device (``capturable`` on CUDA, ``fused`` on the CPU) and the
        learning rate tensor stay this run's, and the step counts move to where those options want
        them. The state is copied: Adam updates it in place, and ``load_state_dict`` keeps tensors
        that are on the right device as they are, so ``state`` itself would change."""
        own = self.optimizer.param_groups
        groups = [
            {**saved, "capturable": mine["capturable"], "fused": mine["fused"]}
            for saved, mine in zip(state["param_groups"], own, strict=True)
        ]
        self.optimizer.load_state_dict(copy.deepcopy({**state, "param_groups": groups}))
        self.lr.fill_(lr)
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr

    def update(self, s: RolloutStorage) -> dict[str, torch.Tensor]:
        """``num_epochs`` passes of ``num_minibatches`` over the rollout; returns mean losses (device).
        With bfloat16 (``uses_bf16``) the model's forward (and so its backward) runs under bfloat16
        autocast; the losses, the gradients' clipping and Adam work in float32, as does the rollout's
        policy."""
        c = self.cfg
        names = ["obs", "actions", "log_probs", "returns", "advantages", "means"]
        rollout = {name: s.flat(name) for name in names + (["values"] if c.value_clip > 0 else [])}
        n = rollout["obs"].shape[0]
        size = n // c.num_minibatches
        sums = torch.zeros(5, device=self.device)  # policy loss, value loss, entropy, kl, clip fraction
        for _ in range(c.num_epochs):
            order = torch.randperm(n, generator=self.generator, device=self.device)
            # the epoch's samples in its order, gathered once: each minibatch is a contiguous slice
            epoch = {name: t.index_select(0, order) for name, t in rollout.items()}
            for k in range(c.num_minibatches):
                mb = {name: t[k * size : (k + 1) * size] for name, t in epoch.items()}
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                    mean, log_std, value = self.model(mb["obs"])
                mean, value = mean.float(), value.float()
                logp = gaussian_log_prob(mb["actions"], mean, log_std)
                adv = mb["advantages"]
                if c.normalize_advantages:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = torch.exp(logp - mb["log_probs"])
                policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - c.clip, 1 + c.clip) * adv).mean()
                ret = mb["returns"]
                if c.value_clip > 0:
                    old = mb["values"]
                    v_clip = old + (value - old).clamp(-c.value_clip, c.value_clip)
                    value_loss = torch.max((value - ret).square(), (v_clip - ret).square()).mean()
                else:
                    value_loss = (value - ret).square().mean()
                entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum()
                loss = policy_loss + c.value_coef * value_loss - c.entropy_coef * entropy
                with torch.no_grad():
                    kl = self._kl(mb["means"], s.log_std, mean, log_std)
                    if c.schedule == "adaptive":
                        self._adapt_lr(kl)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), c.max_grad_norm)
                self.optimizer.step()
                clipped = ((ratio - 1).abs() > c.clip).float().mean()
                sums += torch.stack([policy_loss.detach(), value_loss.detach(), entropy.detach(), kl, clipped])
        sums /= c.num_epochs * c.num_minibatches
        keys = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
        return dict(zip(keys, sums.unbind(), strict=True))

    @staticmethod
    def _kl(
        mu0: torch.Tensor, log_std0: torch.Tensor, mu1: torch.Tensor, log_std1: torch.Tensor
    ) -> torch.Tensor:
        """Mean KL(old || new) of diagonal Gaussians."""
        var0, var1 = torch.exp(2 * log_std0), torch.exp(2 * log_std1)
        return (log_std1 - log_std0 + (var0 + (mu0 - mu1).square()) / (2 * var1) - 0.5).sum(-1).mean()

    def _adapt_lr(self, kl: torch.Tensor) -> None:
        """rsl_rl's rule: divide by 1.5 above 2x the target KL, multiply below half of it (averaged
        over ranks so every rank keeps the same rate)."""
        if distributed.is_distributed():
            kl = distributed.all_reduce_sum(kl.clone()) / torch.distributed.get_world_size()
        d = self.cfg.desired_kl
        lr = torch.where(kl > 2 * d, self.lr / 1.5, torch.where(kl < d / 2, self.lr * 1.5, self.lr))
        self.lr.copy_(lr.clamp(1e-5, 1e-2))
