"""Per-env random streams on the device: counter-based, so envs never share or perturb each other's draws.

Draw ``j`` of env ``e`` in stream ``s`` at counter ``c`` is a hash of ``(seed, s, e, c, j)`` (Wellons'
"lowbias32" integer mix, applied in a chain). The env owns the counters (one per env and stream) and
advances them only for the envs that drew, so an env's numbers do not depend on when other envs were
reset, and the same seed on the same device gives the same numbers bit for bit. Everything is
elementwise torch on int64 holding 32-bit values: no host round trip, no per-env Python loop.
"""

from __future__ import annotations

import math

import torch

__all__ = ["EnvRNG"]

_MASK = 0xFFFFFFFF


def _mul32(x: torch.Tensor, m: int) -> torch.Tensor:
    """``x * m mod 2**32`` for ``0 <= x < 2**32``, split so no int64 product overflows."""
    return (x * (m & 0xFFFF) + (((x * (m >> 16)) & 0xFFFF) << 16)) & _MASK


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


class EnvRNG:
    """Uniform and normal draws, ``(num_envs, k)`` float32, one independent stream per env and purpose.

    Args:
        num_envs: batch size.
        device: where the numbers are made.
        seed: any integer; ``reseed`` changes it later.
    """

    def __init__(self, num_envs: int, device: torch.device, seed: int = 0):
        self.num_envs, self.device = num_envs, device
        self._env = torch.arange(num_envs, device=device, dtype=torch.int64)
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self._key = int(_mix(torch.tensor(int(seed) & _MASK)).item() ^ ((int(seed) >> 32) & _MASK))

    def _bits(self, stream: int, counter: torch.Tensor, k: int) -> torch.Tensor:
        """``(num_envs, k)`` 32-bit hashes for the given per-env ``counter (num_envs,)``."""
        h = _mix((self._env * 0x9E3779B1 + self._key + (stream << 20)) & _MASK)
        h = _mix((h ^ (counter & _MASK)) & _MASK)
        h = _mix((h + (counter >> 32)) & _MASK)
        j = torch.arange(k, device=self.device, dtype=torch.int64)
        return _mix((h[:, None] + _mul32(j + 1, 0x85EBCA6B)) & _MASK)

    def uniform(self, stream: int, counter: torch.Tensor, k: int) -> torch.Tensor:
        """Uniform in [0, 1), ``(num_envs, k)``, with 24 random bits each."""
        return (self._bits(stream, counter, k) >> 8).to(torch.float32) * (1.0 / (1 << 24))

    def symmetric(self, stream: int, counter: torch.Tensor, k: int) -> torch.Tensor:
        """Uniform in [-1, 1), ``(num_envs, k)``."""
        return self.uniform(stream, counter, k) * 2.0 - 1.0

    def normal(self, stream: int, counter: torch.Tensor, k: int) -> torch.Tensor:
        """Standard normal, ``(num_envs, k)`` (Box-Muller on two uniform draws per number)."""
        u = self.uniform(stream, counter, 2 * k)
        r = torch.sqrt(-2.0 * torch.log1p(-u[:, :k]))  # 1 - u in (0, 1]
        return r * torch.cos((2.0 * math.pi) * u[:, k:])
