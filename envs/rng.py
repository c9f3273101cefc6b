"""Per-env random streams on the device: counter-based, so envs never share or perturb each other's draws.

Draw ``j`` of env ``e`` in stream ``s`` at counter ``c`` is a hash of ``(seed, s, e, c, j)`` (Wellons'
"lowbias32" integer mix, applied in a chain). The env owns the counters (one per env and stream) and
advances them only for the envs that drew, so an env's numbers do not depend on when other envs were
reset, and the same seed gives the same numbers bit for bit, on any device. ``e`` counts from the
batch's ``first_env``: a batch of envs ``first_env, ..., first_env + num_envs - 1`` draws what those
envs of one larger batch with the same seed would.

Task kernels draw inline: ``stream_key(key, stream, env, counter)`` once per env and purpose, then
``uniform(h, j)`` for draw ``j``, so noise costs no launch of its own. ``EnvRNG`` makes whole
``(num_envs, k)`` blocks with the same functions (one launch, no host round trip).
"""

from __future__ import annotations

import math

import torch
import warp as wp

from sim_core import host_threads

__all__ = ["EnvRNG", "stream_key", "uniform", "RESET_STREAM", "STEP_STREAM"]

RESET_STREAM = wp.constant(1)  # the env streams' purposes: a reset's draws (initial state, randomization)
STEP_STREAM = wp.constant(2)  # a step's draws (observation noise)


# The hash's odd multipliers, as uint32 constants: Warp emits them as unsigned literals (``...u``);
# a plain ``wp.uint32(0x846CA68B)`` is emitted as an int32 literal first, which C++ compilers warn
# about for the values above 2**31 (the same bits either way).
_MIX_1 = wp.constant(wp.uint32(0x7FEB352D))
_MIX_2 = wp.constant(wp.uint32(0x846CA68B))
_STREAM = wp.constant(wp.uint32(0x27D4EB2F))
_ENV = wp.constant(wp.uint32(0x9E3779B1))
_DRAW = wp.constant(wp.uint32(0x85EBCA6B))


@wp.func
def _mix(x: wp.uint32) -> wp.uint32:
    x = x ^ (x >> wp.uint32(16))
    x = x * _MIX_1
    x = x ^ (x >> wp.uint32(15))
    x = x * _MIX_2
    return x ^ (x >> wp.uint32(16))


@wp.func
def stream_key(key: wp.uint32, stream: int, env: int, counter: int) -> wp.uint32:
    """The hash of ``(seed key, stream, env, counter)`` that env ``env``'s draws at ``counter`` in
    ``stream`` start from (``key``: ``EnvRNG.key[0]``)."""
    h = _mix(key ^ (wp.uint32(stream) * _STREAM))
    h = _mix(h + wp.uint32(env) * _ENV)
    return _mix(h ^ wp.uint32(counter))


@wp.func
def uniform(h: wp.uint32, j: int) -> float:
    """Draw ``j`` (0, 1, ...) of the key ``h`` (``stream_key``): uniform in [0, 1), 24 random bits."""
    x = _mix(h + wp.uint32(j + 1) * _DRAW)
    return wp.float32(x >> wp.uint32(8)) * wp.float32(1.0 / 16777216.0)


@wp.kernel(enable_backward=False)
def _uniform_kernel(
    key: wp.array(dtype=wp.uint32),
    stream: int,
    first_env: int,
    counter: wp.array(dtype=wp.int32),
    out: wp.array2d(dtype=wp.float32),
):
    e = wp.tid()
    h = stream_key(key[0], stream, first_env + e, counter[e])
    for j in range(out.shape[1]):
        out[e, j] = uniform(h, j)


def _mix_host(x: int) -> int:
    """``_mix`` on the host, for the seed."""
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * int(_MIX_1)) & m
    x ^= x >> 15
    x = (x * int(_MIX_2)) & m
    return x ^ (x >> 16)


class EnvRNG:
    """Uniform and normal draws, ``(num_envs, k)`` float32, one independent stream per env and purpose.

    Args:
        num_envs: batch size.
        device: where the numbers are made.
        seed: any integer; ``reseed`` changes it later.
        first_env: the index the streams give the batch's first env (module docstring).
    """

    def __init__(self, num_envs: int, device: torch.device, seed: int = 0, first_env: int = 0):
        self.num_envs, self.device, self.first_env = num_envs, device, first_env
        self._wp_device = wp.device_from_torch(device)
        self.key = wp.zeros(1, dtype=wp.uint32, device=self._wp_device)  # (1,) the seed's key, read by kernels
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """New numbers for every stream (one host-to-device copy of a 32-bit key)."""
        s = int(seed)
        self.key.assign([_mix_host(_mix_host(s & 0xFFFFFFFF) ^ ((s >> 32) & 0xFFFFFFFF))])

    def stream(self, stream: int, counter: torch.Tensor, k: int) -> _Stream:
        """A recorded draw of ``k`` uniforms per env into a fixed buffer: ``.draw()`` costs one launch
        with no argument packing and returns that buffer (valid until the next ``.draw()``)."""
        return _Stream(self, stream, counter, k)

    def uniform(self, stream: int, counter: torch.Tensor, k: int) -> torch.Tensor:
        """Uniform in [0, 1), ``(num_envs, k)``, 24 random bits each; ``counter``: ``(num_envs,)`` int32."""
        return self.stream(stream, counter, k).draw().clone()

    def normal(self, stream: int, counter: torch.Tensor, k: int) -> torch.Tensor:
        """Standard normal, ``(num_envs, k)`` (Box-Muller on two uniform draws per number)."""
        u = self.uniform(stream, counter, 2 * k)
        r = torch.sqrt(-2.0 * torch.log1p(-u[:, :k]))  # 1 - u in (0, 1]
        return r * torch.cos((2.0 * math.pi) * u[:, k:])


class _Stream:
    def __init__(self, rng: EnvRNG, stream: int, counter: torch.Tensor, k: int):
        if counter.dtype != torch.int32 or tuple(counter.shape) != (rng.num_envs,):
            raise ValueError(
                f"counter: expected an int32 tensor of shape ({rng.num_envs},), got {counter.dtype}"
            )
        self.out = torch.empty(rng.num_envs, k, dtype=torch.float32, device=rng.device)
        self._cmd = host_threads.recorded(
            _uniform_kernel,
            dim=rng.num_envs,
            inputs=[rng.key, int(stream), rng.first_env, wp.from_torch(counter, dtype=wp.int32)],
            outputs=[wp.from_torch(self.out)],
            device=rng._wp_device,
        )

    def draw(self) -> torch.Tensor:
        self._cmd.launch()
        return self.out
