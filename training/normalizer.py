"""Running mean and variance of observations (Chan et al.'s parallel update), all on the device."""

from __future__ import annotations

import torch
from torch import nn

from . import distributed

__all__ = ["ObsNormalizer"]


class ObsNormalizer(nn.Module):
    """``(x - mean) / sqrt(var + eps)``, clipped to ``+-clip``; statistics are buffers (saved with the
    model) and, under DDP, merged over all ranks so every rank normalizes identically. With
    ``enabled=False`` it passes observations through and never updates, so callers need no branch."""

    def __init__(self, dim: int, *, enabled: bool = True, eps: float = 1e-8, clip: float = 10.0):
        super().__init__()
        self.enabled, self.eps, self.clip = enabled, eps, clip
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the batch ``x (B, dim)`` into the statistics (no host read). The batch's variance is
        taken about its mean (two passes, each summed over ranks), so a feature whose mean is large
        against its spread keeps its float32 variance."""
        if not self.enabled:
            return
        sums = torch.cat([x.sum(0), x.new_full((1,), x.shape[0])])
        distributed.all_reduce_sum(sums)
        n = sums[-1]
        mean = sums[:-1] / n
        m2 = (x - mean).square().sum(0)
        distributed.all_reduce_sum(m2)
        var = m2 / n
        total = self.count + n
        delta = mean - self.mean
        self.var.copy_((self.var * self.count + var * n + delta.square() * self.count * n / total) / total)
        self.mean.add_(delta * n / total)
        self.count.copy_(total)

    def affine(self, out: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, 1 / sqrt(var + eps))``, each ``(dim,)``, as the statistics stand now: the
        normalization before the clip is ``(x - mean) * scale``. For a caller that normalizes many
        batches with the same statistics; ``out``: an earlier result to overwrite in place."""
        if out is None:
            return self.mean.clone(), torch.rsqrt(self.var + self.eps)
        out[0].copy_(self.mean)
        torch.rsqrt(self.var + self.eps, out=out[1])
        return out

    def forward(
        self,
        x: torch.Tensor,
        out: torch.Tensor | None = None,
        affine: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The normalized ``x``, written into ``out`` when given; ``affine``: ``self.affine()`` as the
        statistics stand, to save computing it again (three ops on ``x`` then)."""
        if not self.enabled:
            return x if out is None else out.copy_(x)
        mean, scale = self.affine() if affine is None else affine
        return torch.sub(x, mean, out=out).mul_(scale).clamp_(-self.clip, self.clip)
