"""Training configs: the ``[train]`` table of a task's file in ``configs/``, read into frozen dataclasses.

Command-line overrides are ``key=value`` pairs with dotted keys under ``env.`` or ``train.``
(``train.ppo.learning_rate=3e-4``, ``env.reward.success_bonus=5``); values are parsed as TOML
(numbers, booleans, lists, quoted or bare strings). Unknown keys are errors naming the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import warpgym
from warpgym.config import ConfigError, config_path, from_dict, merge, read_toml

__all__ = ["PPOConfig", "PolicyConfig", "TrainConfig", "RunSpec", "load_run_spec", "parse_overrides"]


@dataclass(frozen=True)
class PPOConfig:
    num_steps: int  # rollout length per env per iteration
    num_epochs: int  # passes over each rollout
    num_minibatches: int  # minibatches per pass
    gamma: float  # discount per control step
    lam: float  # GAE lambda
    clip: float  # surrogate ratio clip
    value_clip: float  # value change clip (0: unclipped value loss)
    value_coef: float
    entropy_coef: float
    max_grad_norm: float
    learning_rate: float  # initial (adaptive) or constant (fixed)
    schedule: Literal["adaptive", "fixed"]  # adaptive: KL-driven as in rsl_rl
    desired_kl: float
    normalize_obs: bool  # running mean/std of observations, saved with the checkpoint
    normalize_advantages: bool  # per minibatch
    # the update's forward and backward passes under bfloat16 autocast (weights, Adam and the losses
    # stay float32): about 1.8x faster updates on a CPU with AVX512-BF16 or AMX. "auto": on where
    # the device is such a CPU; off on CUDA and on CPUs that would emulate bfloat16
    bf16: bool | Literal["auto"] = "auto"

    def __post_init__(self):
        for name in ("num_steps", "num_epochs", "num_minibatches"):
            _check(f"train.ppo.{name}", getattr(self, name), getattr(self, name) >= 1, "an integer >= 1")
        for name in ("gamma", "lam"):
            _check(f"train.ppo.{name}", getattr(self, name), 0 <= getattr(self, name) <= 1, "0 <= value <= 1")
        for name in ("clip", "max_grad_norm", "learning_rate", "desired_kl"):
            _check(f"train.ppo.{name}", getattr(self, name), getattr(self, name) > 0, "a number > 0")
        for name in ("value_clip", "value_coef", "entropy_coef"):
            _check(f"train.ppo.{name}", getattr(self, name), getattr(self, name) >= 0, "a number >= 0")
        bf16_ok = isinstance(self.bf16, bool) or self.bf16 == "auto"
        _check("train.ppo.bf16", self.bf16, bf16_ok, 'true, false or "auto"')


@dataclass(frozen=True)
class PolicyConfig:
    actor_hidden: tuple[int, ...]
    critic_hidden: tuple[int, ...]
    activation: Literal["elu", "relu", "tanh"]
    init_log_std: float  # initial log standard deviation of the Gaussian policy

    def __post_init__(self):
        for name in ("actor_hidden", "critic_hidden"):
            sizes = getattr(self, name)
            _check(f"train.policy.{name}", list(sizes), all(n >= 1 for n in sizes), "layer sizes >= 1")


@dataclass(frozen=True)
class TrainConfig:
    num_envs: int  # envs per process (per rank)
    max_iterations: int
    save_every: int  # iterations between checkpoints
    seed: int
    ppo: PPOConfig
    policy: PolicyConfig
    # torch's intra-op threads while rollouts and evaluations step the env on the CPU (0: torch's
    # own setting). The env's step runs on the scene's host threads; torch's idle OpenMP workers
    # would spin on the same cores after each of the policy's parallel ops and slow that step down
    rollout_threads: int = 1
    # CPU, Warp tasks: the envs are split into this many groups, each a vector env of its own that
    # steps on one host thread with its rows of the policy, all groups at once (0: one per host
    # thread a scene would step on; always 1 on CUDA). The groups draw the random numbers one
    # batch would (first_env), so the rollout does not depend on the split
    env_groups: int = 0
    # CUDA: record the rollout's steps (normalize, actor, sampling, env.step, storage writes) into
    # one CUDA graph at the second rollout and replay it from then on (training/rollout_graph.py)
    cuda_graph: bool = True
    # a deterministic evaluation every this many iterations (0: none) on eval_episodes fresh
    # episodes, the same each time, on envs of its own (rank 0; training/evaluate.py, Evaluations)
    eval_every: int = 0
    eval_episodes: int = 512

    def __post_init__(self):
        for name in ("num_envs", "max_iterations", "save_every"):
            _check(f"train.{name}", getattr(self, name), getattr(self, name) >= 1, "an integer >= 1")
        for name in ("rollout_threads", "eval_every"):
            _check(f"train.{name}", getattr(self, name), getattr(self, name) >= 0, "an integer >= 0")
        _check("train.eval_episodes", self.eval_episodes, self.eval_episodes >= 1, "an integer >= 1")
        _check(
            "train.env_groups",
            self.env_groups,
            0 <= self.env_groups <= self.num_envs,
            f"an integer from 0 to num_envs = {self.num_envs}",
        )
        _check(
            "train.ppo.num_minibatches",
            self.ppo.num_minibatches,
            self.ppo.num_minibatches <= self.batch_size,
            f"at most num_envs x num_steps = {self.batch_size}",
        )

    @property
    def batch_size(self) -> int:
        """Samples per iteration and rank."""
        return self.num_envs * self.ppo.num_steps


@dataclass(frozen=True)
class RunSpec:
    """Everything a run is built from: the task, its config file, the env overrides and the train config."""

    task: str
    config_file: str
    env_overrides: dict[str, Any]
    train: TrainConfig


def _check(key: str, value: Any, ok: bool, expected: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: expected {expected}, got {value!r}")


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["train.ppo.clip=0.1", "env.max_episode_steps=50"]`` -> nested dict."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {pair!r}: expected key=value")
        parts = key.strip().split(".")
        if parts[0] not in ("env", "train") or len(parts) < 2:
            raise ConfigError(f"override {pair!r}: keys start with 'env.' or 'train.'")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def load_run_spec(task: str, config: str | None = None, overrides: dict[str, Any] | None = None) -> RunSpec:
    """Read ``config`` (default: the task's file in ``configs/``) and apply ``overrides``."""
    if config is None:
        if task not in warpgym.CONFIGS:
            raise ConfigError(f"task: no config known for {task!r}; known: {sorted(warpgym.CONFIGS)}")
        config = warpgym.CONFIGS[task]
    path = config_path(config)
    data = read_toml(path)
    overrides = overrides or {}
    unknown = sorted(set(overrides) - {"env", "train"})
    if unknown:
        raise ConfigError(f"unknown config section(s) {unknown}; known: ['env', 'train']")
    if "train" not in data:
        raise ConfigError(f"config {path}: no [train] table")
    train = from_dict(TrainConfig, merge(data["train"], overrides.get("train")), "train")
    return RunSpec(task, str(Path(path).resolve()), overrides.get("env", {}), train)
