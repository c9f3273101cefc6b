"""PPO pieces against hand-computed cases, learning on a toy env, checkpoints and resume (on the same
device and from another), the progress line, TensorBoard videos, the CLI, and torchrun + DDP."""

import copy
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from host_sync import no_host_sync
from replay_graph import ReplayGraph
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

import sim_core as sc
from sim_core import host_threads
from warpgym.config import ConfigError, merge
from warpgym.render import RenderUnavailableError
from warpgym.training import cli, distributed, models
from warpgym.training.checkpoint import load_checkpoint
from warpgym.training.cli import play
from warpgym.training.config import load_run_spec, parse_overrides
from warpgym.training.evaluate import Evaluations
from warpgym.training.logger import Logger
from warpgym.training.models import Tanh
from warpgym.training.normalizer import ObsNormalizer
from warpgym.training.ppo import _cpu_has_bf16, uses_bf16
from warpgym.training.runner import Runner, env_groups
from warpgym.training.storage import bootstrap_truncated, gae
from warpgym.training.video import add_video_to_tensorboard

ASSETS = Path(__file__).parent / "assets"
ROOT = Path(__file__).parent.parent

if "Test/Point-v0" not in gym.registry:
    gym.register(id="Test/Point-v0", entry_point=None, vector_entry_point="toy_env:PointEnv")


def test_gae_against_a_hand_computed_case():
    """Two envs, three steps; env 0 ends (terminates) at t=1, env 1 runs through."""
    g, lam = 0.9, 0.5
    rewards = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.5, 1.0]])
    values = torch.tensor([[0.5, 1.0], [1.0, 2.0], [0.2, 3.0]])
    dones = torch.tensor([[False, False], [True, False], [False, False]])
    last = torch.tensor([0.3, 4.0])
    adv, ret = gae(rewards, values, dones, last, g, lam)
    # env 0: t=2 starts a new episode; t=1 ends, so it does not see t=2
    d2 = 0.5 + g * 0.3 - 0.2
    d1 = 2.0 - 1.0
    d0 = 1.0 + g * 1.0 - 0.5
    a0 = [d0 + g * lam * d1, d1, d2]
    # env 1: no ends
    e2 = 1.0 + g * 4.0 - 3.0
    e1 = 1.0 + g * 3.0 - 2.0
    e0 = 0.0 + g * 2.0 - 1.0
    a1 = [e0 + g * lam * (e1 + g * lam * e2), e1 + g * lam * e2, e2]
    expected = torch.tensor([a0, a1]).T
    assert torch.allclose(adv, expected, atol=1e-6) and torch.allclose(ret, expected + values, atol=1e-6)


def test_truncation_is_bootstrapped_and_termination_is_not():
    r = torch.tensor([1.0, 1.0, 1.0])
    truncated = torch.tensor([True, False, False])
    final_values = torch.tensor([10.0, 10.0, 10.0])
    assert bootstrap_truncated(r, truncated, final_values, 0.9).tolist() == pytest.approx([10.0, 1.0, 1.0])


def test_overrides_parse_and_unknown_keys_are_named():
    o = parse_overrides(["train.ppo.learning_rate=3e-4", "env.control_mode=ee_delta", "train.num_envs=8"])
    assert o == {"train": {"ppo": {"learning_rate": 3e-4}, "num_envs": 8}, "env": {"control_mode": "ee_delta"}}
    spec = load_run_spec("WarpGym/FrankaReach-v0", overrides=o)
    assert spec.train.ppo.learning_rate == 3e-4 and spec.train.num_envs == 8
    with pytest.raises(ValueError, match="train.ppo.learnign_rate"):
        load_run_spec("WarpGym/FrankaReach-v0", overrides=parse_overrides(["train.ppo.learnign_rate=1"]))


def _ctx():
    return distributed.Context(0, 1, 0, sc.device)


def test_ppo_learns_a_trivial_task(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    spec = load_run_spec("Test/Point-v0", config=str(ASSETS / "point.toml"))
    runner = Runner(spec, _ctx(), tmp_path)
    runner.train()
    (env,) = runner.envs  # a torch env: one group
    obs, _ = env.reset(seed=99)
    reached = torch.zeros(env.num_envs, dtype=torch.bool, device=obs.device)
    with torch.inference_mode():
        for _ in range(20):
            obs, _, terminated, truncated, _ = env.step(runner.module.actor(runner.normalizer(obs)))
            reached |= terminated
    assert reached.float().mean() > 0.9


def _reach_params(bf16: bool | str) -> torch.Tensor:
    """Reach's parameters after 2 small iterations of seed 0."""
    overrides = {"train": {"num_envs": 16, "ppo": {"num_steps": 8, "bf16": bf16}}}
    runner = Runner(load_run_spec("WarpGym/FrankaReach-v0", overrides=overrides), _ctx(), None)
    runner.train(max_iterations=2)
    return torch.cat([p.detach().reshape(-1) for p in runner.module.parameters()])


def test_same_seed_same_parameters():
    assert torch.equal(_reach_params(False), _reach_params(False))


@pytest.mark.parametrize("task", ["WarpGym/FrankaReach-v0", "WarpGym/FrankaLift-v0"])
def test_the_envs_split_into_groups_train_the_same_parameters(task):
    """Groups of envs stepping at once on host threads (``train.env_groups``), each with its rows of
    the policy, train what one vector env of all of them trains, bit for bit: every env draws what
    it would in one batch (``first_env``) and the action noise is drawn for the whole rollout.
    Groups of 16 rows or more: MKL multiplies fewer rows with kernels that round differently."""

    def params(groups: int) -> torch.Tensor:
        overrides = {"train": {"num_envs": 48, "env_groups": groups, "ppo": {"num_steps": 8}}}
        runner = Runner(load_run_spec(task, overrides=overrides), _ctx(), None)
        assert [len(range(48)[rows]) for rows in runner.groups] == [48 // groups] * groups
        runner.train(max_iterations=2)
        return _params(runner)

    one = params(1)
    groups = [1] if sc.device.type == "cuda" else [2, 3]  # one group on CUDA, whatever is asked
    assert all(torch.equal(params(g), one) for g in groups)


def test_env_groups_default_to_the_host_threads_for_warp_tasks_only():
    reach = load_run_spec("WarpGym/FrankaReach-v0", overrides={"train": {"num_envs": 8}})
    threads = min(8, host_threads.default_threads())
    assert len(env_groups(reach, torch.device("cpu"))) == threads
    assert env_groups(reach, torch.device("cuda")) == [slice(0, 8)]
    assert env_groups(_point_spec(), torch.device("cpu")) == [slice(0, 16)]  # a torch env
    expected = r"train\.env_groups: expected an integer from 0 to num_envs = 8, got 9"
    with pytest.raises(ConfigError, match=expected):
        load_run_spec("WarpGym/FrankaReach-v0", overrides={"train": {"num_envs": 8, "env_groups": 9}})


def _forced_bf16_params() -> torch.Tensor:
    """``_reach_params(True)``; a CPU without native bfloat16 must warn that it emulates it."""
    if _cpu_has_bf16():
        return _reach_params(True)
    with pytest.warns(UserWarning, match=r"train\.ppo\.bf16: this CPU has neither AVX512-BF16 nor AMX"):
        return _reach_params(True)


def test_a_bf16_update_repeats_bit_for_bit_and_is_not_the_float32_one():
    bf16 = _forced_bf16_params()
    assert torch.equal(bf16, _forced_bf16_params())
    assert not torch.equal(bf16, _reach_params(False))


def test_bf16_auto_is_on_for_a_cpu_with_native_bf16_only():
    assert uses_bf16("auto", torch.device("cpu")) == _cpu_has_bf16()
    assert torch.equal(_reach_params("auto"), _reach_params(_cpu_has_bf16()))  # the default takes effect
    assert uses_bf16("auto", torch.device("cuda")) is False
    assert uses_bf16(True, torch.device("cuda")) and not uses_bf16(False, torch.device("cpu"))
    assert load_run_spec("WarpGym/FrankaReach-v0").train.ppo.bf16 == "auto"
    with pytest.raises(ConfigError, match=r"train\.ppo\.bf16: expected a bool, got 'yes' or expected one of"):
        load_run_spec("WarpGym/FrankaReach-v0", overrides=parse_overrides(["train.ppo.bf16=yes"]))


def test_obs_normalizer_statistics_match_the_concatenated_batches():
    """Merged batch by batch, the running mean and variance are those of all rows at once (in
    float64), also for a feature whose mean is 10^4 times its spread; disabled, it passes through."""
    g = torch.Generator().manual_seed(0)
    batches = [
        torch.randn(n, 3, generator=g) * torch.tensor([1.0, 5.0, 1e-3]) + torch.tensor([0.0, -2.0, 10.0])
        for n in (64, 1000, 7)
    ]
    norm = ObsNormalizer(3)
    norm.count.zero_()  # no prior (its 1e-4 pseudo-count of mean 0, variance 1)
    for b in batches:
        norm.update(b)
    rows = torch.cat(batches).double()
    assert torch.allclose(norm.mean.double(), rows.mean(0), rtol=1e-6, atol=1e-6)
    assert torch.allclose(norm.var.double(), rows.var(0, correction=0), rtol=1e-3, atol=0)
    assert norm.count == rows.shape[0]
    disabled = ObsNormalizer(3, enabled=False)
    disabled.update(batches[0])
    assert torch.equal(disabled(batches[1]), batches[1]) and torch.equal(disabled.mean, torch.zeros(3))
    out = torch.empty_like(batches[1])  # into a given tensor (the rollout's storage): the same values
    expected = norm(batches[1])
    mean, var = norm.mean.double(), norm.var.double()
    exact = ((batches[1].double() - mean) / torch.sqrt(var + norm.eps)).clamp(-norm.clip, norm.clip)
    assert torch.allclose(expected.double(), exact, rtol=0, atol=1e-5)
    assert norm(batches[1], out=out) is out and torch.equal(out, expected)
    assert torch.equal(norm(batches[1], affine=norm.affine()), expected)
    stale = (torch.zeros_like(norm.mean), torch.zeros_like(norm.var))
    assert norm.affine(out=stale) is stale and torch.equal(norm(batches[1], affine=stale), expected)
    assert disabled(batches[1], out=out) is out and torch.equal(out, batches[1])


@pytest.mark.parametrize("slow_cpu_tanh", [True, False])
def test_tanh_matches_torch_tanh_in_value_and_gradient(monkeypatch, slow_cpu_tanh):
    monkeypatch.setattr(models, "_SLOW_CPU_TANH", slow_cpu_tanh)  # both forms, on any machine
    x = torch.cat([torch.linspace(-12, 12, 20001), torch.tensor([0.0, 1e-30, -1e-30])]).requires_grad_()
    ref = x.detach().clone().requires_grad_()
    y, y_ref = Tanh()(x), torch.tanh(ref)
    assert (y - y_ref).abs().max() <= 2.5e-7 and y.abs().max() == 1.0
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    y.backward(grad)
    y_ref.backward(grad)
    assert torch.allclose(x.grad, ref.grad, rtol=0, atol=1e-6)
    inplace_x = x.detach().clone().requires_grad_()
    hidden = inplace_x * 1.0  # a non-leaf, as a hidden layer's output
    y_inplace = Tanh(inplace=True)(hidden)
    assert y_inplace.data_ptr() == hidden.data_ptr() and torch.equal(y_inplace, y)
    y_inplace.backward(grad)
    assert torch.equal(inplace_x.grad, x.grad)
    half = x.detach().bfloat16().requires_grad_()  # a hidden layer under bfloat16 autocast
    y_half = Tanh()(half)
    exact = torch.tanh(half.detach().double())
    assert y_half.dtype == torch.bfloat16
    assert ((y_half.double() - exact).abs() <= 2**-8 * exact.abs() + 2.5e-7).all()  # bfloat16's rounding
    if not slow_cpu_tanh:
        assert torch.equal(y_half, torch.tanh(half.detach().float()).bfloat16())  # float32's, rounded
    y_half.backward(grad.bfloat16())
    assert torch.equal(half.grad, torch.ops.aten.tanh_backward(grad.bfloat16(), y_half.detach()))
    assert torch.isnan(Tanh()(torch.tensor([float("nan")]))).all()
    if not slow_cpu_tanh:
        assert torch.equal(y, y_ref)  # torch's own tanh
    with torch.inference_mode():  # without autograd, the same values
        hidden = x.detach().clone()
        assert torch.equal(Tanh()(x.detach()), y) and torch.equal(Tanh()(half.detach()), y_half)
        assert torch.equal(Tanh(inplace=True)(hidden), y) and torch.equal(hidden, y)


class _OpCount(TorchDispatchMode):
    count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("activation", ["tanh", "elu", "relu"])
def test_a_frozen_mlp_computes_the_module_in_fewer_ops(activation):
    """The rollout's snapshot of an MLP gives the module's output within float32 round-off (tanh's
    2 sigmoid(2z) - 1 folded into the weights), into ``out`` when given, in one matmul and at most
    one activation op per layer; it keeps the parameters as they were when it was taken, until
    ``load_`` takes the module's current ones into the same tensors."""
    torch.manual_seed(0)
    mlp = models._mlp([30, 64, 48, 7], activation, 0.01)
    for p in mlp.parameters():
        torch.nn.init.normal_(p, 0.0, 0.3)  # large weights: saturated units, outputs ~10
    x = torch.randn(256, 30) * 2.0
    frozen = models.FrozenMLP(mlp)
    with torch.inference_mode():
        expected = mlp(x)
        out = torch.empty(256, 7)
        with _OpCount() as ops:
            got = frozen(x, out=out)
        assert got is out and torch.allclose(got, expected, rtol=1e-6, atol=1e-5)
        assert ops.count == 5
    with torch.no_grad():
        for p in mlp.parameters():
            p.add_(1.0)
        assert torch.equal(frozen(x), got) and not torch.allclose(mlp(x), expected)
        addresses = [t.data_ptr() for layer in frozen.layers for t in layer]
        assert frozen.load_(mlp) is frozen  # the new parameters, in the same tensors
        assert [t.data_ptr() for layer in frozen.layers for t in layer] == addresses
        assert torch.equal(frozen(x), models.FrozenMLP(mlp)(x))
    with pytest.raises(TypeError, match="FrozenMLP: expected Linear layers"):
        models.FrozenMLP(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sigmoid(), torch.nn.Linear(2, 1)))


def _record_threads(monkeypatch) -> list[int]:
    """torch's thread count as on a 2-core machine (on any machine); the counts set from here on
    are recorded in the returned list instead of applied."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    return threads


def test_rollout_steps_run_torch_on_rollout_threads_and_restore_its_setting(monkeypatch):
    threads = _record_threads(monkeypatch)
    spec = load_run_spec(
        "WarpGym/FrankaReach-v0",
        overrides={"train": {"num_envs": 8, "rollout_threads": 1, "env_groups": 1, "ppo": {"num_steps": 2}}},
    )
    runner = Runner(spec, _ctx(), None)
    seen = []
    (env,) = runner.envs
    env_step = env.step

    def step(action):
        seen.append(threads[-1])
        if len(seen) == 3:
            raise KeyboardInterrupt
        return env_step(action)

    env.step = step
    critic = []  # the batch work after the steps runs while no env steps: on torch's own setting
    values = runner._values
    runner._values = lambda o: critic.append(threads[-1]) or values(o)
    runner.collect()
    assert critic and set(critic) == {2}
    with pytest.raises(KeyboardInterrupt):
        runner.collect()
    assert seen == [1, 1, 1] and threads[-1] == 2  # restored after the exception too
    with pytest.raises(ConfigError, match=r"train\.rollout_threads: expected an integer >= 0, got -1"):
        load_run_spec("WarpGym/FrankaReach-v0", overrides=parse_overrides(["train.rollout_threads=-1"]))


def _point_spec():
    """The toy task, small: 16 envs, 8 steps per iteration."""
    sys.path.insert(0, str(Path(__file__).parent))
    overrides = {"train": {"num_envs": 16, "ppo": {"num_steps": 8}}}
    return load_run_spec("Test/Point-v0", config=str(ASSETS / "point.toml"), overrides=overrides)


def _params(runner: Runner) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in runner.module.parameters()])


def test_evaluations_leave_training_as_it_is_and_link_the_best(tmp_path, capsys):
    """``train.eval_every``: the same episodes every time, logged and recorded, the best checkpoint
    linked; training draws exactly what it draws without them."""

    def run(eval_every: int, logdir: Path | None) -> Runner:
        train = {"num_envs": 16, "eval_every": eval_every, "eval_episodes": 8, "ppo": {"num_steps": 8}}
        runner = Runner(load_run_spec("WarpGym/FrankaReach-v0", overrides={"train": train}), _ctx(), logdir)
        runner.train(max_iterations=3)
        return runner

    plain, evaluated = run(0, None), run(1, tmp_path)
    assert torch.equal(_params(plain), _params(evaluated))
    records = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1, 2, 3] and {r["episodes"] for r in records} == {8}
    assert all(Path(r["checkpoint"]).name == f"model_{r['iteration']:06d}.pt" for r in records)
    best = max(records, key=lambda r: (r["success_rate"], r["mean_return"]))
    assert [r["best"] for r in records].count(True) >= 1 and best["best"]
    assert (tmp_path / "checkpoints" / "best.pt").samefile(best["checkpoint"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in out if line.startswith("eval it ")] == ["1", "2", "3"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path)).Reload()
    assert [e.value for e in events.Scalars("eval/success_rate")] == [r["success_rate"] for r in records]
    # a run resumed into the same directory starts from the best recorded there
    again = Evaluations(lambda: None, 8, tmp_path)
    assert again.best == (best["success_rate"], best["mean_return"])


@pytest.mark.parametrize("limit", [3, 8, 20])
def test_rollout_values_match_the_critic_on_every_row(limit):
    """The rollout's values, gathered terminal values and last values equal the critic run on every
    row, with the time limit cutting envs once, twice or three times per rollout (or not at all)."""
    sys.path.insert(0, str(Path(__file__).parent))
    overrides = {"env": {"max_episode_steps": limit}, "train": {"num_envs": 16, "ppo": {"num_steps": 8}}}
    spec = load_run_spec("Test/Point-v0", config=str(ASSETS / "point.toml"), overrides=overrides)
    runner = Runner(spec, _ctx(), None)
    runner.train(max_iterations=1)
    before = runner._obs
    runner.collect()
    s, critic = runner.storage, runner.module.value
    with torch.inference_mode():
        values, final, last = runner._values(runner._obs)
        every_final = critic(runner.normalizer(s.final_obs)) * s.bootstrapped
    per_env = s.bootstrapped.sum(0)
    assert per_env.max() <= -(-8 // limit) and (per_env.sum() > 0) == (limit <= 8)
    assert not torch.equal(before, runner._obs)
    assert torch.allclose(values, critic(s.obs), atol=1e-6)
    assert torch.allclose(final, every_final, atol=1e-6)
    assert torch.allclose(last, critic(runner.normalizer(runner._obs)), atol=1e-6)


def test_a_rollout_normalizes_with_the_statistics_it_began_with():
    """Every step of a rollout is normalized with the statistics as they stood at its start; they
    are then updated once, from the rollout's raw observations."""
    overrides = {"train": {"num_envs": 16}}
    spec = load_run_spec("Test/Point-v0", config=str(ASSETS / "point.toml"), overrides=overrides)
    runner = Runner(spec, _ctx(), None)
    runner.train(max_iterations=1)
    start = copy.deepcopy(runner.normalizer)
    first_obs = runner._obs.clone()
    runner.collect()
    s = runner.storage
    assert torch.equal(s.raw_obs[0], first_obs) and torch.equal(s.obs, start(s.raw_obs))
    start.update(s.flat("raw_obs"))
    for name in ("mean", "var", "count"):
        assert torch.equal(getattr(runner.normalizer, name), getattr(start, name))


def test_a_rollout_never_waits_on_the_device():
    """Normalize, policy, sampling, env step and storage writes, the values and advantages after
    them, and PPO's update run under the host-sync guard: the rollout step is safe to record in a
    CUDA graph, and the update reads nothing back per minibatch."""
    spec = load_run_spec("WarpGym/FrankaLift-v0", overrides={"train": {"num_envs": 8, "ppo": {"num_steps": 4}}})
    runner = Runner(spec, _ctx(), None)
    runner.iterate()  # the first step records the env's launches; Adam creates its state
    # Adam is built capturable on CUDA (no host read of its step count); torch allows that on GPUs
    # only, so on the CPU its step runs outside the guard
    adam_step = runner.ppo.optimizer.step

    def unguarded_step(*args, **kwargs):
        with _disable_current_modes():
            return adam_step(*args, **kwargs)

    runner.ppo.optimizer.step = unguarded_step
    with no_host_sync():
        runner.collect()
        losses = runner.ppo.update(runner.storage)
    assert torch.isfinite(runner.storage.returns).all() and all(torch.isfinite(v) for v in losses.values())


def test_a_recorded_rollout_replays_the_eager_rollouts_bit_for_bit():
    """From the second rollout on, a CUDA run records the rollout's steps into a graph and replays
    them: it fills the storage and trains exactly as eager rollouts do, the resets of finished
    episodes included. On the CPU a stand-in that behaves as a graph does (``replay_graph``: memory
    untouched by the capture, the recorded ops replayed without their Python) takes the graph's
    place."""
    overrides = {
        "train": {"num_envs": 8, "env_groups": 1, "ppo": {"num_steps": 8}},
        "env": {"max_episode_steps": 5, "sim": {"cpu_threads": 1}},  # resets inside the rollouts
    }
    spec = load_run_spec("WarpGym/FrankaLift-v0", overrides=overrides)
    eager_only = merge(overrides, {"train": {"cuda_graph": False}})
    eager_spec = load_run_spec("WarpGym/FrankaLift-v0", overrides=eager_only)
    eager, recorded = Runner(eager_spec, _ctx(), None), Runner(spec, _ctx(), None)
    if sc.device.type == "cpu":
        recorded._graph = ReplayGraph()
    for _ in range(4):
        eager.iterate()
        recorded.iterate()
        for name, value in vars(eager.storage).items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, getattr(recorded.storage, name)), name
        assert torch.equal(_params(eager), _params(recorded))
    assert recorded._graph.captured
    assert eager.storage.ep_ended.any()


def test_resume_on_the_same_device_restores_everything_exactly(tmp_path):
    """Model, normalizer, optimizer and both random generators come back from the file as saved."""
    spec = _point_spec()
    runner = Runner(spec, _ctx(), tmp_path)
    runner.train(max_iterations=2)
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    resumed = Runner(spec, _ctx(), None)
    assert resumed.load_state_dict(ckpt) == []  # nothing to report
    assert resumed.iteration == 2 and resumed.env_steps == runner.env_steps
    assert torch.equal(resumed.sampler.get_state(), runner.sampler.get_state())
    assert torch.equal(resumed.ppo.generator.get_state(), runner.ppo.generator.get_state())
    assert torch.equal(_params(resumed), _params(runner))
    assert torch.equal(resumed.normalizer.var, runner.normalizer.var)
    saved, loaded = runner.ppo.optimizer.state_dict(), resumed.ppo.optimizer.state_dict()
    assert all(
        torch.equal(saved["state"][i][k], loaded["state"][i][k].to(saved["state"][i][k].device))
        for i in saved["state"]
        for k in ("exp_avg", "exp_avg_sq", "step")
    )
    assert resumed.ppo.lr.item() == runner.ppo.lr.item()


def _as_saved_on_the_other_device(ckpt: dict, *, bare: bool) -> dict:
    """``ckpt`` as a run on the other type of device would have saved it: generator states in that
    device's format (CUDA: 16 bytes, CPU: 5056) and Adam's ``capturable`` as set there. ``bare``:
    the states as bare tensors, without their device."""
    other = "cpu" if sc.device.type == "cuda" else "cuda"
    state = torch.Generator().get_state() if other == "cpu" else torch.arange(16, dtype=torch.uint8)
    generator = state if bare else {"device": other, "state": state}
    groups = [{**g, "capturable": other == "cuda"} for g in ckpt["optimizer"]["param_groups"]]
    optimizer = {**ckpt["optimizer"], "param_groups": groups}
    return {**ckpt, "sampler": generator, "minibatch_rng": generator, "optimizer": optimizer}


@pytest.mark.parametrize("bare", [False, True], ids=["with_device", "bare_state"])
def test_resume_from_another_device_reseeds_the_generators_deterministically(tmp_path, bare):
    """A checkpoint saved on the other type of device resumes here: one line says the generators
    are reseeded, training goes on, and two resumes from it stay bit for bit the same."""
    spec = _point_spec()
    runner = Runner(spec, _ctx(), tmp_path)
    runner.train(max_iterations=1)
    ckpt = _as_saved_on_the_other_device(load_checkpoint(tmp_path / "checkpoints" / "last.pt"), bare=bare)
    params, states = [], []
    for _ in range(2):
        resumed = Runner(spec, _ctx(), None)
        notes = resumed.load_state_dict(ckpt)
        assert len(notes) == 1 and "reseeded" in notes[0], notes
        states.append((resumed.sampler.get_state(), resumed.ppo.generator.get_state()))
        resumed.iterate()
        params.append(_params(resumed))
    assert all(torch.equal(a, b) for a, b in zip(*states, strict=True))
    assert torch.equal(params[0], params[1])
    fresh = Runner(spec, _ctx(), None)  # reseeded from the saved state, not left at the run's seed
    assert not torch.equal(states[0][0], fresh.sampler.get_state())


def test_progress_line_shows_a_dash_where_no_episode_ended(tmp_path, capsys):
    logger = Logger(tmp_path, {})
    logger.log(1, 128, {"perf/env_steps_per_s": 1000.0}, 1.0, 2, None)
    scalars = {"perf/env_steps_per_s": 1000.0, "charts/episode_return": -3.5, "charts/success_rate": 0.25}
    logger.log(2, 256, scalars, 2.0, 2, None)
    logger.close()
    first, second = capsys.readouterr().out.strip().splitlines()
    assert "nan" not in first and first.split("return")[1].split()[:3] == ["-", "success", "-"], first
    assert "return    -3.50  success  0.25" in second, second


def test_policy_video_is_an_animated_gif_in_tensorboard(tmp_path):
    """Frames become one image summary, a GIF with every frame, at the given step."""
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    frames = [np.full((24, 32, 3), 40 * i, dtype=np.uint8) for i in range(5)]
    writer = SummaryWriter(str(tmp_path))
    add_video_to_tensorboard(writer, "videos/policy", frames, step=7, fps=25)
    writer.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"images": 0}).Reload()
    (image,) = events.Images("videos/policy")
    assert image.step == 7 and (image.width, image.height) == (32, 24)
    gif = Image.open(io.BytesIO(image.encoded_image_string))
    assert gif.format == "GIF" and gif.n_frames == len(frames) and gif.info["duration"] == 40


def _env() -> dict:
    """This environment with the repository first on the import path (what was on it stays)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def _run(args, *, quiet: bool = False, **kw):
    """Run ``python args`` from the repository; its stdout. ``quiet``: it must print nothing but the
    trainer's own lines (no Warp banner, module-load lines or compiler warnings)."""
    env = _env()
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT, **kw
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    if quiet:
        own = ("training ", "building ", "built ", "it ", "eval it ", "done: ", "{")  # trainer's, play's JSON
        assert not out.stderr and all(line.startswith(own) for line in out.stdout.splitlines()), (
            out.stdout[-2000:] + out.stderr[-3000:]
        )
    return out.stdout


def _can_render() -> bool:
    """Whether this machine has a headless OpenGL (the CPU CI has OSMesa; a GPU box may lack libEGL)."""
    env = gym.make_vec("WarpGym/FrankaReach-v0", num_envs=1, render_mode="rgb_array", render={"width": 32})
    env.reset(seed=0)
    try:
        env.render()
    except RenderUnavailableError:
        return False
    return True


def test_cli_train_resume_play(tmp_path, monkeypatch, capsys):
    """Train with a TensorBoard video, resume, play with a video file (videos only where GL works)."""
    videos = _can_render()
    small = ["--num-envs", "32", "--device", "cpu", "--eval-every", "1"]
    small += ["train.ppo.num_steps=8", "train.save_every=1", "train.eval_episodes=4"]
    video_every = ["--video-every", "2"] if videos else []
    _run(
        [
            "-m",
            "warpgym.training",
            "train",
            "--max-iterations",
            "2",
            *video_every,
            "--logdir",
            str(tmp_path),
            *small,
        ],
        quiet=True,
    )
    ckpt = tmp_path / "checkpoints" / "last.pt"
    assert (tmp_path / "checkpoints" / "model_000002.pt").is_file() and ckpt.is_file()
    assert list(tmp_path.glob("events.out.tfevents.*")) and (tmp_path / "config.json").is_file()
    _run(
        [
            "-m",
            "warpgym.training",
            "train",
            "--resume",
            str(ckpt),
            "--max-iterations",
            "3",
            "--logdir",
            str(tmp_path),
        ],
        quiet=True,
    )
    state = torch.load(ckpt, weights_only=True)
    assert state["iteration"] == 3 and state["env_steps"] == 3 * 32 * 8
    evaluated = [json.loads(line)["iteration"] for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert evaluated == [1, 2, 3] and (tmp_path / "checkpoints" / "best.pt").is_file()  # the resumed run's too
    video = tmp_path / "play.mp4"
    play_args = ["--checkpoint", str(ckpt), "--episodes", "8", "--device", "cpu"]
    out = _run(
        ["-m", "warpgym.training", "play", *play_args, *(["--video", str(video)] if videos else [])], quiet=True
    )
    result = json.loads(out)  # the JSON alone on stdout
    assert result["episodes"] == 8 and 0.0 <= result["success_rate"] <= 1.0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path), size_guidance={"images": 0}).Reload()
    assert "losses/approx_kl" in events.Tags()["scalars"]
    assert not videos or (video.stat().st_size > 0 and "videos/policy" in events.Tags()["images"])
    # play evaluates on the rollouts' torch threads (train.rollout_threads = 1), then restores them
    threads, seen, evaluate = _record_threads(monkeypatch), [], cli.evaluate

    def recording_evaluate(*args):
        seen.append(threads[-1] if threads else None)  # None: torch's own setting
        return evaluate(*args)

    monkeypatch.setattr(cli, "evaluate", recording_evaluate)
    assert play(str(ckpt), episodes=4, num_envs=2, progress=True)["episodes"] == 4
    assert capsys.readouterr().err.startswith("building the envs")  # what a terminal's user sees
    assert seen == [1] and threads[-1] == 2


def test_torchrun_ddp_keeps_ranks_identical(tmp_path):
    args = [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "warpgym.training",
        "train",
    ]
    args += ["--device", "cpu", "--num-envs", "16", "--max-iterations", "2", "--logdir", str(tmp_path)]
    _run([*args, "train.ppo.num_steps=8"])
    check = json.loads((tmp_path / "ddp_check.json").read_text())
    assert check["in_sync"] and len(check["param_checksums"]) == 2
    state = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert state["env_steps"] == 2 * 2 * 16 * 8  # iterations x ranks x envs x steps


def test_multi_gpu_launcher_on_cpu_workers(tmp_path):
    """Two CPU workers (GPUs or not) form a DDP job; a failing worker stops the launcher with its status."""
    script = str(ROOT / "scripts" / "multi_gpu.py")
    common = ["--num-envs", "16", "--max-iterations", "1", "train.ppo.num_steps=8"]
    out = _run([script, "--cpu", "--workers", "2", "--ddp", "--logdir", str(tmp_path), "--", *common])
    assert "worker 1: CPU" in out and json.loads((tmp_path / "ddp_check.json").read_text())["in_sync"]
    bad = subprocess.run(
        [
            sys.executable,
            script,
            "--cpu",
            "--workers",
            "2",
            "--logdir",
            str(tmp_path / "bad"),
            "--",
            "train.nope=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        cwd=ROOT,
    )
    assert bad.returncode != 0 and "exited with status" in bad.stderr


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_save_a_checkpoint(tmp_path, sig, status):
    args = [
        "-m",
        "warpgym.training",
        "train",
        "--num-envs",
        "16",
        "--max-iterations",
        "100000",
        "--device",
        "cpu",
    ]
    # a test run started in the background inherits SIGINT ignored, and so would the trainer
    proc = subprocess.Popen(
        [sys.executable, *args, "--logdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for line in proc.stdout:  # wait for the first progress line: training is under way
        if line.startswith("it "):
            break
    proc.send_signal(sig)
    proc.communicate(timeout=120)
    assert proc.returncode == status
    state = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert state["iteration"] >= 1


def test_a_diverged_policy_stops_training_with_a_clear_error():
    sys.path.insert(0, str(Path(__file__).parent))
    runner = Runner(load_run_spec("Test/Point-v0", config=str(ASSETS / "point.toml")), _ctx(), None)
    with torch.no_grad():
        runner.module.actor[0].weight.fill_(float("nan"))
    with pytest.raises(RuntimeError, match="diverged"):
        runner.iterate()
