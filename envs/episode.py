"""Episode bookkeeping inside the task kernels: what every task does per env and step, in ``@wp.func``.

A task's kernel runs in three passes (``PASS_*``), one env per thread:

- ``PASS_STEP`` (once per ``env.step``, after the physics): the step's observation noise, the
  observation of the state (the terminal one where an episode ends), the reward terms, then
  ``end_step``: the forced ends, time limit and sim errors, episode statistics, the step's outputs,
  and whether the env resets now (by the autoreset mode); if so the task resets it in place
  (``begin_episode`` gives the reset's random draws).
- ``PASS_OBSERVE``: the observation of the current state (after resets); writes no env state.
- ``PASS_RESET`` (``reset()``): resets the envs flagged in ``Episodes.reset_now``.
- ``PASS_EVALUATE``: the reward terms of the current state alone (``WarpVectorEnv._evaluate``, for
  tests and inspection); writes no env state.

On the CPU, where Warp runs a launch's threads one after another and each thread first copies
the kernel's arguments (these structs of arrays: a few kB), a thread runs
``sim_core.host_threads.ENVS_PER_THREAD`` envs in turn, and the launch's threads are shared among
the scene's host threads; on a GPU a thread runs one env (``host_threads.record_envs``).

What a step returns is written into one slab per dtype (``StepOut``, a row per quantity, an env per
column), which the host clones once per step and splits into the info tensors. Row numbers are the
``F_*`` and ``B_*`` constants; a task's own info values follow at ``F_TASK`` and ``B_TASK``.
"""

from __future__ import annotations

import warp as wp

from .rng import RESET_STREAM, STEP_STREAM, stream_key, uniform

__all__ = [
    "Episodes",
    "StepOut",
    "PASS_STEP",
    "PASS_OBSERVE",
    "PASS_RESET",
    "PASS_EVALUATE",
    "SAME_STEP",
    "NEXT_STEP",
    "DISABLED",
    "F_ROWS",
    "B_ROWS",
    "F_TASK",
    "B_TASK",
    "step_key",
    "noise",
    "end_step",
    "write_terms",
    "begin_episode",
    "clean_row",
]


PASS_STEP = wp.constant(0)
PASS_OBSERVE = wp.constant(1)
PASS_RESET = wp.constant(2)
PASS_EVALUATE = wp.constant(3)

SAME_STEP = wp.constant(0)  # Gymnasium's autoreset modes, as kernel arguments
NEXT_STEP = wp.constant(1)
DISABLED = wp.constant(2)

# rows of StepOut.f (float32)
F_REWARD = wp.constant(0)
F_RETURN = wp.constant(1)  # the episode's return so far
F_TASK = wp.constant(2)
F_ROWS = ("reward", "episode_return")
# rows of StepOut.b (bool)
B_TERMINATED = wp.constant(0)
B_TRUNCATED = wp.constant(1)
B_ENDED = wp.constant(2)  # terminated or truncated: the mask of "episode", "final_obs", "final_info"
B_SHOWN = wp.constant(3)  # the mask of the step info keys at the top level (by the autoreset mode)
B_SUCCESS = wp.constant(4)
B_SIM_ERROR = wp.constant(5)
B_EPISODE_SUCCESS = wp.constant(6)
B_SUCCESS_ONCE = wp.constant(7)
B_TASK = wp.constant(8)
B_ROWS = (
    "terminated",
    "truncated",
    "ended",
    "shown",
    "success",
    "sim_error",
    "episode_success",
    "success_once",
)


@wp.struct
class Episodes:
    """Per-env episode state: the env's own device buffers, read and written by the task kernels."""

    key: wp.array(dtype=wp.uint32)  # (1,) the seed's key of the per-env random streams (EnvRNG.key)
    length: wp.array(dtype=wp.int32)  # (num_envs,) control steps in the episode so far
    reward_sum: wp.array(dtype=wp.float32)  # (num_envs,) sum of its rewards (the return)
    success_once: wp.array(dtype=wp.bool)  # (num_envs,) some step of it was a success
    pending: wp.array(dtype=wp.bool)  # (num_envs,) ended and not reset yet (NEXT_STEP, DISABLED)
    forced: wp.array(dtype=wp.int32)  # (num_envs,) force_episode_end: 1 terminate, 2 truncate next step
    step_count: wp.array(dtype=wp.int32)  # (num_envs,) counter of the step stream (observation noise)
    reset_count: wp.array(dtype=wp.int32)  # (num_envs,) counter of the reset stream
    reset_now: wp.array(dtype=wp.bool)  # (num_envs,) reset by this pass (written by PASS_STEP, read by
    # PASS_RESET)
    max_steps: int  # time limit, control steps
    mode: int  # SAME_STEP, NEXT_STEP or DISABLED
    first_env: int  # the index the random streams give env 0 (EnvRNG.first_env)


@wp.struct
class StepOut:
    """What a pass returns, one column per env (see the module docstring for the rows)."""

    f: wp.array2d(dtype=wp.float32)  # (F_TASK + task floats, num_envs)
    b: wp.array2d(dtype=wp.bool)  # (B_TASK + task bools, num_envs)
    length: wp.array(dtype=wp.int32)  # (num_envs,) the episode's length in control steps


@wp.func
def step_key(ep: Episodes, env: int, advance: bool) -> wp.uint32:
    """The key of env ``env``'s draws for this step's observation noise; ``advance``: a new step
    begins, so its counter moves on first (an observation after a reset reuses the step's draws)."""
    c = ep.step_count[env]
    if advance:
        c += 1
        ep.step_count[env] = c
    return stream_key(ep.key[0], STEP_STREAM, ep.first_env + env, c)


@wp.func
def noise(h: wp.uint32, given: wp.array2d(dtype=wp.float32), env: int, j: int, scale: float) -> float:
    """Uniform noise in ``[-scale, scale)`` from draw ``j`` of ``h``, or from ``given[env, j]`` (uniform
    draws in [0, 1) handed in by a test) when a block is given (``given`` of shape (0, 0): none)."""
    u = float(0.0)
    if given.shape[0] > 0:
        u = given[env, j]
    else:
        u = uniform(h, j)
    return scale * (2.0 * u - 1.0)


@wp.func
def clean_row(row: wp.array2d(dtype=wp.float32), env: int, error: bool):
    """Zero row ``env`` where the env's state is in error, else its non-finite entries, so a
    blown-up env never poisons a batch."""
    for j in range(row.shape[1]):
        if error or not wp.isfinite(row[env, j]):
            row[env, j] = 0.0


@wp.func
def _clean_reward(reward: float, error: bool) -> float:
    """0 in error; else NaN -> 0 and +-inf -> the largest finite float (``torch.nan_to_num``)."""
    r = reward
    if error or wp.isnan(r):
        r = 0.0
    elif wp.isinf(r):
        r = wp.sign(r) * 3.4028234663852886e38
    return r


@wp.func
def write_terms(out: StepOut, env: int, reward: float, terminated: bool, success: bool, error: bool):
    """The reward terms of the current state (``PASS_EVALUATE``)."""
    out.f[F_REWARD, env] = _clean_reward(reward, error)
    out.b[B_TERMINATED, env] = terminated
    out.b[B_SUCCESS, env] = success
    out.b[B_SIM_ERROR, env] = error


@wp.func
def end_step(
    ep: Episodes, out: StepOut, env: int, reward: float, task_terminated: bool, success: bool, error: bool
) -> bool:
    """Close env ``env``'s step: its flags and statistics into ``out``, its episode state updated.

    A step ends the episode by the task (``task_terminated``, unless the state is in error),
    ``force_episode_end``, the time limit or a sim error (both truncations). In ``NEXT_STEP`` an env
    that ended last step (pending) reports nothing this step and gets reward 0. Returns whether the
    env resets now: ``SAME_STEP`` those that ended, ``NEXT_STEP`` the pending ones."""
    r = _clean_reward(reward, error)
    pending = ep.pending[env] and ep.mode == NEXT_STEP
    forced = ep.forced[env]
    terminated = (task_terminated and not error) or forced == 1
    length = ep.length[env] + 1
    truncated = (length >= ep.max_steps or error or forced == 2) and not terminated
    ret = ep.reward_sum[env] + r
    once = ep.success_once[env] or success
    terminated = terminated and not pending
    truncated = truncated and not pending
    ended = terminated or truncated
    shown = True  # DISABLED: every env's step info is valid
    if ep.mode == SAME_STEP:
        shown = not ended  # the ended envs' step info goes to final_info
    elif ep.mode == NEXT_STEP:
        shown = not pending
    if pending:
        r = 0.0
    ep.forced[env] = 0
    ep.length[env] = length
    ep.reward_sum[env] = ret
    ep.success_once[env] = once
    out.f[F_REWARD, env] = r
    out.f[F_RETURN, env] = ret
    out.length[env] = length
    out.b[B_TERMINATED, env] = terminated
    out.b[B_TRUNCATED, env] = truncated
    out.b[B_ENDED, env] = ended
    out.b[B_SHOWN, env] = shown
    out.b[B_SUCCESS, env] = success
    out.b[B_SIM_ERROR, env] = error
    out.b[B_EPISODE_SUCCESS, env] = success
    out.b[B_SUCCESS_ONCE, env] = once
    reset = (ep.mode == SAME_STEP and ended) or pending
    if ep.mode != SAME_STEP:
        ep.pending[env] = ended
    ep.reset_now[env] = reset
    return reset


@wp.func
def begin_episode(ep: Episodes, env: int) -> wp.uint32:
    """Start a new episode in env ``env``: zeroed statistics, nothing pending or forced. Returns the
    key of the reset's random draws (``rng.uniform``) and moves the env's reset counter on."""
    c = ep.reset_count[env]
    ep.reset_count[env] = c + 1
    ep.length[env] = 0
    ep.reward_sum[env] = 0.0
    ep.success_once[env] = False
    ep.pending[env] = False
    ep.forced[env] = 0
    return stream_key(ep.key[0], RESET_STREAM, ep.first_env + env, c)
