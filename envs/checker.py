"""``check_vector_env``: a conformance checker for torch vector envs (Gymnasium ships none for vector envs).

It drives the env through short, seeded runs and compares them bit for bit, so it checks behaviour,
not just types:

1. spaces: Box single spaces, batched spaces equal to ``batch_space(single, num_envs)``;
2. returns: shapes, dtypes (float32 obs/reward, bool flags) and device of everything ``reset``/``step``
   return; every info key has a boolean ``_key`` mask of shape ``(num_envs,)`` (nested dicts too);
3. seeding: the same seed repeats a run exactly; another seed changes it;
4. independence: changing one env's actions changes no other env's results;
5. autoreset: episode ends are forced (``force_episode_end``) in a few envs and the declared
   ``metadata["autoreset_mode"]`` is checked against a run without the forced ends: terminal
   observations, when and how envs restart, rewards and flags of restarting envs, episode statistics,
   and that the other envs' trajectories do not change;
6. ``reset(options={"reset_mask": mask})`` resets exactly the masked envs (NumPy and torch masks);
7. bad input: wrong shape, dtype or device and NaN actions raise, and leave the state untouched.

Usage, for a task of your own that subclasses ``warpgym.WarpVectorEnv``::

    from warpgym import check_vector_env
    check_vector_env(MyTask(num_envs=4, device="cpu"))   # raises VectorEnvCheckError on a violation
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

__all__ = ["check_vector_env", "VectorEnvCheckError"]


class VectorEnvCheckError(AssertionError):
    """The env violates the vector env contract; the message says which rule and where."""


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise VectorEnvCheckError(msg)


def check_vector_env(env: gym.vector.VectorEnv, *, seed: int = 123, steps: int = 3) -> None:
    """Check ``env`` (at least 2 envs) against the contract above; raise ``VectorEnvCheckError``.

    The env is reset several times and left in an arbitrary state.
    """
    _require(isinstance(env, gym.vector.VectorEnv), f"expected a gymnasium.vector.VectorEnv, got {type(env)}")
    _require(env.num_envs >= 2, "check_vector_env needs num_envs >= 2 to check independence")
    _require(hasattr(env, "force_episode_end"), "the env needs force_episode_end(mask) (see WarpVectorEnv)")
    _check_spaces(env)
    mode = env.metadata.get("autoreset_mode")
    _require(
        isinstance(mode, AutoresetMode), f"metadata['autoreset_mode'] must be an AutoresetMode, got {mode!r}"
    )
    actions = _actions(env, steps + 2, seed)
    ref = _run(env, seed, actions)
    _check_seeding(env, seed, actions, ref)
    _check_independence(env, seed, actions, ref)
    _check_bad_input(env, seed, actions, ref)
    _check_autoreset(env, mode, seed, actions, ref, steps)
    _check_reset_mask(env, seed, actions, ref)


# ---- runs ---------------------------------------------------------------------------------------
def _actions(env, count: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    low = torch.as_tensor(env.single_action_space.low)
    high = torch.as_tensor(env.single_action_space.high)
    shape = (env.num_envs, *env.single_action_space.shape)
    return [(low + (high - low) * torch.rand(shape, generator=g)).to(env.device) for _ in range(count)]


def _run(env, seed: int, actions, *, force=None, between=None) -> list[tuple]:
    """Reset with ``seed`` and step through ``actions``; ``force = (step, mask, terminated)`` forces
    ends before that step; ``between(i)`` runs before step ``i``. Returns the reset and step results."""
    obs, info = env.reset(seed=seed)
    _check_returns(env, obs, info)
    out = [(obs.clone(), info)]
    for i, a in enumerate(actions):
        if force is not None and force[0] == i:
            env.force_episode_end(force[1], terminated=force[2])
        if between is not None:
            between(i)
        result = env.step(a)
        _check_returns(env, *result)
        out.append(tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in result))
    return out


# ---- individual rules ---------------------------------------------------------------------------
def _check_spaces(env) -> None:
    for name in ("single_observation_space", "single_action_space"):
        space = getattr(env, name, None)
        _require(isinstance(space, gym.spaces.Box), f"{name} must be a gymnasium.spaces.Box, got {space!r}")
        _require(space.dtype == np.float32, f"{name} must be float32, got {space.dtype}")
    for single, batched in (
        ("single_observation_space", "observation_space"),
        ("single_action_space", "action_space"),
    ):
        expected = batch_space(getattr(env, single), env.num_envs)
        _require(getattr(env, batched) == expected, f"{batched} must equal batch_space({single}, num_envs)")
    _require(isinstance(getattr(env, "device", None), torch.device), "env.device must be a torch.device")


def _check_tensor(x, name: str, env, dtype: torch.dtype, shape: tuple) -> None:
    _require(isinstance(x, torch.Tensor), f"{name} must be a torch.Tensor, got {type(x).__name__}")
    _require(x.dtype == dtype, f"{name} must be {dtype}, got {x.dtype}")
    _require(tuple(x.shape) == shape, f"{name} must have shape {shape}, got {tuple(x.shape)}")
    _require(x.device == env.device, f"{name} must live on {env.device}, got {x.device}")


def _check_returns(env, obs, *rest) -> None:
    n = env.num_envs
    _check_tensor(obs, "obs", env, torch.float32, (n, *env.single_observation_space.shape))
    _require(bool(torch.isfinite(obs).all()), "obs contains NaN or inf")
    if len(rest) == 1:  # reset
        _check_info(env, rest[0], "reset infos")
        return
    reward, terminated, truncated, info = rest
    _check_tensor(reward, "reward", env, torch.float32, (n,))
    _check_tensor(terminated, "terminated", env, torch.bool, (n,))
    _check_tensor(truncated, "truncated", env, torch.bool, (n,))
    _check_info(env, info, "step infos")


def _check_info(env, info: dict[str, Any], where: str, *, nested: bool = False) -> None:
    """Top-level keys need a ``_key`` mask; inside a nested dict masks are optional (Gymnasium's
    ``RecordEpisodeStatistics`` puts none inside ``info["episode"]``) but checked when present."""
    _require(isinstance(info, dict), f"{where} must be a dict, got {type(info).__name__}")
    n = env.num_envs
    for key, value in info.items():
        path = f"{where}[{key!r}]"
        if key.startswith("_"):
            _require(key[1:] in info, f"{path}: a mask without its key {key[1:]!r}")
            _check_tensor(value, path, env, torch.bool, (n,))
            continue
        _require(nested or f"_{key}" in info, f"{path}: no mask '_{key}'")
        if isinstance(value, dict):
            _check_info(env, value, path, nested=True)
        else:
            _require(isinstance(value, torch.Tensor), f"{path} must be a torch.Tensor")
            _require(value.shape[:1] == (n,), f"{path} must have a leading dimension {n}")
            _require(value.device == env.device, f"{path} must live on {env.device}")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.equal(a, b))


def _check_seeding(env, seed, actions, ref) -> None:
    again = _run(env, seed, actions)
    for i, (r, a) in enumerate(zip(ref, again, strict=True)):
        _require(_same(r[0], a[0]), f"seeding: reset(seed={seed}) does not repeat (observation {i} differs)")
        if i:
            _require(_same(r[1], a[1]), f"seeding: rewards of step {i} differ between identical runs")
    other = _run(env, seed + 1, actions[:1])
    _require(not _same(other[0][0], ref[0][0]), "seeding: a different seed gives the same first observation")


def _check_independence(env, seed, actions, ref) -> None:
    changed = [a.clone() for a in actions]
    for a in changed:
        a[0] = -a[0]
    run = _run(env, seed, changed)
    others = slice(1, None)
    for i in range(1, len(ref)):
        _require(
            _same(run[i][0][others], ref[i][0][others]) and _same(run[i][1][others], ref[i][1][others]),
            f"independence: changing env 0's actions changed other envs' results at step {i}",
        )
    _require(not _same(run[-1][0][0], ref[-1][0][0]), "independence: env 0 ignores its actions")


def _check_bad_input(env, seed, actions, ref) -> None:
    n, dim = env.num_envs, env.single_action_space.shape
    good = actions[0]
    bad = {
        "a wrong batch size": torch.zeros((n + 1, *dim), device=env.device),
        "a missing batch dimension": torch.zeros(dim, device=env.device),
        "a complex dtype": torch.zeros((n, *dim), dtype=torch.complex64, device=env.device),
        "NaN": torch.full((n, *dim), float("nan"), device=env.device),
        "a list": good.tolist(),
    }
    if env.device.type != "cpu":
        bad["a tensor on the CPU"] = good.cpu()

    def attempt(i: int) -> None:
        if i != 1:
            return
        for what, value in bad.items():
            try:
                env.step(value)
            except (ValueError, TypeError) as e:
                _require(bool(str(e)), f"bad input ({what}): the error has no message")
            else:
                raise VectorEnvCheckError(f"bad input: an action with {what} was accepted")

    run = _run(env, seed, actions, between=attempt)
    for i in range(len(ref)):
        _require(_same(run[i][0], ref[i][0]), f"bad input: a rejected step changed the state (step {i})")


def _forced_masks(env):
    n = env.num_envs
    term = torch.zeros(n, dtype=torch.bool, device=env.device)
    term[0] = True
    trunc = torch.zeros_like(term)
    trunc[n - 1] = True
    return term, trunc


def _check_autoreset(env, mode, seed, actions, ref, k) -> None:
    """Force env 0 to terminate and the last env to truncate at step ``k`` and compare with ``ref``."""
    term_mask, trunc_mask = _forced_masks(env)
    done = term_mask | trunc_mask

    def force(i: int) -> None:
        if i == k - 1:
            env.force_episode_end(term_mask, terminated=True)
            env.force_episode_end(trunc_mask, terminated=False)

    if mode == AutoresetMode.DISABLED:
        _check_disabled(env, seed, actions, ref, k, done, force)
        return
    run = _run(env, seed, actions, between=force)
    obs, rew, te, tr, info = run[k]
    r_obs, r_rew, r_te, r_tr, _ = ref[k]
    keep = ~done
    _require(bool(te[term_mask].all()) and bool(tr[trunc_mask].all()), "autoreset: forced ends not reported")
    _require(not bool((te & tr).any()), "an env is both terminated and truncated")
    _require(_same(rew, r_rew), "autoreset: forcing an episode end changed the rewards of that step")
    _require(
        _same(te[keep], r_te[keep]) and _same(tr[keep], r_tr[keep]), "autoreset: other envs' flags changed"
    )
    ep, ep_mask = info.get("episode"), info.get("_episode")
    _require(
        ep is not None and bool(torch.equal(ep_mask, te | tr)), "autoreset: '_episode' must mark ended envs"
    )
    _require(bool((ep["l"][done] == k).all()), f"autoreset: episode length of forced ends must be {k}")
    nxt, r_nxt = run[k + 1], ref[k + 1]
    if mode == AutoresetMode.SAME_STEP:
        _require(
            _same(info["_final_obs"], te | tr), "SAME_STEP: '_final_obs' must equal terminated | truncated"
        )
        _require(
            _same(info["final_obs"][done], r_obs[done]), "SAME_STEP: final_obs is not the terminal observation"
        )
        _require("final_info" in info and _same(info["_final_info"], te | tr), "SAME_STEP: final_info missing")
        _require(_same(obs[keep], r_obs[keep]), "SAME_STEP: envs that did not end changed observation")
        _require(not _same(obs[done], r_obs[done]), "SAME_STEP: ended envs were not reset in the same step")
        _require(not bool((nxt[2] | nxt[3])[done].any()), "SAME_STEP: a reset env ended again at once")
    else:  # NEXT_STEP
        _require(_same(obs, r_obs), "NEXT_STEP: the ending step must return the terminal observations")
        _require("final_obs" not in info, "NEXT_STEP: no final_obs is expected")
        _require(bool((nxt[1][done] == 0).all()), "NEXT_STEP: a resetting env must get reward 0")
        _require(not bool((nxt[2] | nxt[3])[done].any()), "NEXT_STEP: a resetting env must not end")
        _require(not _same(nxt[0][done], r_nxt[0][done]), "NEXT_STEP: ended envs were not reset next step")
        changed = [a.clone() for a in actions]
        changed[k][done] = -changed[k][done]
        other = _run(env, seed, changed, between=force)
        _require(
            _same(other[k + 1][0][done], nxt[0][done]), "NEXT_STEP: a resetting env's action was not ignored"
        )
    _require(
        _same(nxt[0][keep], r_nxt[0][keep]) and _same(nxt[1][keep], r_nxt[1][keep]),
        "autoreset: other envs' next step changed because some envs were reset",
    )


def _check_disabled(env, seed, actions, ref, k, done, force) -> None:
    def force_and_reset(i: int) -> None:
        force(i)
        if i == k:
            obs, info = env.reset(options={"reset_mask": done.cpu().numpy()})
            _check_returns(env, obs, info)
            _require(_same(obs[~done], ref[k][0][~done]), "DISABLED: reset_mask changed unmasked observations")
            _require(not _same(obs[done], ref[k][0][done]), "DISABLED: reset_mask did not reset masked envs")

    run = _run(env, seed, actions, between=force_and_reset)
    obs, _, te, tr, info = run[k]
    _require(_same(obs, ref[k][0]), "DISABLED: the ending step must return the terminal observations")
    _require(bool((te | tr)[done].all()), "DISABLED: forced ends not reported")
    _require("final_obs" not in info, "DISABLED: no final_obs is expected")
    keep = ~done
    _require(_same(run[k + 1][0][keep], ref[k + 1][0][keep]), "DISABLED: a masked reset disturbed other envs")


def _check_reset_mask(env, seed, actions, ref) -> None:
    for make in (lambda m: m.cpu().numpy(), lambda m: m):
        mask = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        mask[1] = True

        def reset_one(i: int, mask=mask, make=make) -> None:
            if i == 1:
                obs, _ = env.reset(options={"reset_mask": make(mask)})
                _require(_same(obs[~mask], ref[1][0][~mask]), "reset_mask: unmasked envs' observations changed")
                _require(not _same(obs[mask], ref[1][0][mask]), "reset_mask: the masked env was not reset")

        run = _run(env, seed, actions, between=reset_one)
        _require(_same(run[-1][0][~mask], ref[-1][0][~mask]), "reset_mask: unmasked envs' trajectories changed")
    for bad in (np.ones(env.num_envs + 1, dtype=bool), np.ones(env.num_envs, dtype=np.int64)):
        try:
            env.reset(options={"reset_mask": bad})
        except (ValueError, TypeError):
            continue
        raise VectorEnvCheckError(f"reset_mask: a bad mask (dtype {bad.dtype}, shape {bad.shape}) was accepted")
