"""Exporting a checkpoint's deterministic policy (``warpgym export``): the exported ``.pt2`` and
``.onnx`` files give the actions the trainer's policy gives, for any batch size."""

import importlib.util
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import sim_core as sc
from warpgym.training import cli, distributed
from warpgym.training.config import load_run_spec
from warpgym.training.export import DeployedPolicy, export_policy
from warpgym.training.runner import Runner

ASSETS = Path(__file__).parent / "assets"

if "Test/Point-v0" not in gym.registry:
    gym.register(id="Test/Point-v0", entry_point=None, vector_entry_point="toy_env:PointEnv")


def _train(logdir: Path, policy: dict, ppo: dict):
    """A checkpoint of 3 iterations on the toy task, the runner, and observations: the env's, and
    the same scaled far outside the normalizer's clip."""
    sys.path.insert(0, str(Path(__file__).parent))
    overrides = {"train": {"num_envs": 32, "policy": policy, "ppo": {"num_steps": 8, **ppo}}}
    spec = load_run_spec("Test/Point-v0", config=str(ASSETS / "point.toml"), overrides=overrides)
    runner = Runner(spec, distributed.Context(0, 1, 0, sc.device), logdir)
    runner.train(max_iterations=3)
    (env,) = runner.envs
    obs, _ = env.reset(seed=5)
    obs = torch.cat([obs, obs * 1e3]).float().cpu()
    return logdir / "checkpoints" / "last.pt", runner, obs


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``_train`` with tanh layers (the trainer's own tanh on the CPU) and the normalizer."""
    return _train(tmp_path_factory.mktemp("run"), {"activation": "tanh"}, {})


def _trainer_actions(runner, obs):
    with torch.no_grad():
        model, normalizer = runner.module.cpu(), runner.normalizer.cpu()
        return model.actor(normalizer(obs)).clamp(-1.0, 1.0)


def test_the_deployed_module_acts_as_the_trainer_s_policy(trained):
    ckpt, runner, obs = trained
    expected = _trainer_actions(runner, obs)
    policy = DeployedPolicy(runner.module.actor, runner.normalizer)
    with torch.no_grad():
        actions = policy(obs)
    assert actions.shape == expected.shape and (actions.abs() <= 1.0).all()
    assert torch.allclose(actions, expected, atol=1e-5)  # torch.tanh against the trainer's fast tanh


def test_pt2_export_matches_the_policy_for_any_batch(trained, tmp_path):
    ckpt, runner, obs = trained
    meta = export_policy(ckpt, tmp_path / "policy.pt2")
    assert meta["task"] == "Test/Point-v0" and meta["obs_dim"] == obs.shape[1] and meta["iteration"] == 3
    extra = {"warpgym.json": ""}
    program = torch.export.load(tmp_path / "policy.pt2", extra_files=extra)
    assert json.loads(extra["warpgym.json"])["act_dim"] == meta["act_dim"]
    policy = DeployedPolicy(runner.module.cpu().actor, runner.normalizer.cpu())
    with torch.no_grad():
        for rows in (obs[:1], obs[:7], obs):
            assert torch.equal(program.module()(rows), policy(rows))


def test_an_elu_policy_without_normalizer_exports_to_the_same_bits(tmp_path):
    ckpt, runner, obs = _train(tmp_path / "run", {"activation": "elu"}, {"normalize_obs": False})
    program = torch.export.load(export_policy(ckpt, tmp_path / "policy.pt2")["path"])
    with torch.no_grad():
        assert torch.equal(program.module()(obs), _trainer_actions(runner, obs))


def test_onnx_export_matches_the_policy_for_any_batch(trained, tmp_path):
    onnx = pytest.importorskip("onnx")  # the test extra has it; a bare GPU host may not
    pytest.importorskip("onnxscript")
    from onnx.reference import ReferenceEvaluator

    ckpt, runner, obs = trained
    export_policy(ckpt, tmp_path / "policy.onnx")
    model = onnx.load(tmp_path / "policy.onnx")
    onnx.checker.check_model(model)
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["warpgym"])["obs_dim"] == obs.shape[1]
    evaluator = ReferenceEvaluator(model)
    expected = _trainer_actions(runner, obs).numpy()
    for n in (1, 7, len(obs)):
        (actions,) = evaluator.run(None, {"obs": obs[:n].numpy()})
        np.testing.assert_allclose(actions, expected[:n], atol=1e-5)


def test_cli_export_prints_json_and_names_bad_arguments(trained, tmp_path, capsys, monkeypatch):
    def export(checkpoint, output) -> int:
        return cli.main(["export", "--checkpoint", str(checkpoint), "--output", str(tmp_path / output)])

    assert export(trained[0], "p.pt2") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "pt2" and Path(out["path"]).is_file()
    with pytest.raises(ValueError, match="path: expected a file name ending in .pt2 or .onnx"):
        export_policy(trained[0], tmp_path / "p.pt")
    assert export(trained[0], "p.pt") == 2
    assert "argument --output: expected a name ending in .pt2 or .onnx" in capsys.readouterr().err
    assert export(tmp_path / "none.pt", "q.pt2") == 2
    err = capsys.readouterr().err
    assert "argument --checkpoint" in err and not (tmp_path / "q.pt2").exists()
    find_spec = importlib.util.find_spec  # an environment without onnxscript
    without = lambda name, *a: None if name == "onnxscript" else find_spec(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", without)
    assert export(trained[0], "p.onnx") == 2 and not (tmp_path / "p.onnx").exists()
    assert "argument --output: ONNX export needs the packages onnx and onnxscript (onnxscript missing)" in (
        capsys.readouterr().err
    )
