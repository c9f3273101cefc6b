"""The command line as a user meets it: each user error is one line on stderr naming the argument,
with exit status 2 and no traceback; a checkpoint whose unpickling would run code is refused before
any of it runs; Warp prints nothing unless ``--verbose``.

``main`` runs in this process (its errors come before any work, so this is quick); a tiny Reach run
makes the one real checkpoint the tests share.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from warpgym.training import cli
from warpgym.training.cli import main

ROOT = Path(__file__).parent.parent
REACH = "WarpGym/FrankaReach-v0"


@pytest.fixture(scope="module")
def device(runtime) -> str:
    """The test device as ``--device`` takes it."""
    return runtime.type if runtime.index is None else f"{runtime.type}:{runtime.index}"


@pytest.fixture(scope="module")
def reach_ckpt(tmp_path_factory, device) -> Path:
    """A checkpoint of one short Reach iteration."""
    logdir = tmp_path_factory.mktemp("reach")
    argv = ["train", "--task", REACH, "--num-envs", "8", "--max-iterations", "1", "--device", device]
    assert main([*argv, "--logdir", str(logdir), "train.ppo.num_steps=4"]) == 0
    return logdir / "checkpoints" / "last.pt"


def _fails(capsys, argv: list[str], *words: str) -> str:
    """Run ``warpgym argv``: exit status 2 and one line on stderr, no traceback, containing ``words``."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    line = err.strip()
    for word in words:
        assert word in line, line
    return line


@pytest.mark.parametrize(
    "argv, argument",
    [
        (["train", "--num-envs", "-1"], "--num-envs"),
        (["train", "--num-envs", "0"], "--num-envs"),
        (["train", "--max-iterations", "0"], "--max-iterations"),
        (["train", "--max-time", "-3"], "--max-time"),
        (["train", "--max-time", "nan"], "--max-time"),
        (["train", "--video-every", "0"], "--video-every"),
        (["play", "--checkpoint", "x.pt", "--episodes", "0"], "--episodes"),
        (["play", "--checkpoint", "x.pt", "--num-envs", "0"], "--num-envs"),
        (["play", "--checkpoint", "x.pt", "--video-envs", "0"], "--video-envs"),
    ],
)
def test_a_bad_number_is_one_line_naming_the_argument(capsys, argv, argument):
    _fails(capsys, argv, f"argument {argument}:")


@pytest.mark.parametrize("device_arg", ["tpu", "cuda:7", "cuda", "gpu", ""])
def test_a_device_that_is_not_there_is_one_line(capsys, device_arg):
    if device_arg == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    if device_arg == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 or more GPUs")
    for command in (["train"], ["play", "--checkpoint", "x.pt"]):
        _fails(capsys, [*command, "--device", device_arg], "argument --device:", repr(device_arg))


def test_missing_or_unreadable_files_are_one_line(capsys, tmp_path):
    missing = tmp_path / "missing.pt"
    _fails(capsys, ["play", "--checkpoint", missing], "argument --checkpoint:", "no such file")
    _fails(capsys, ["train", "--resume", missing], "argument --resume:", "no such file")
    _fails(capsys, ["train", "--config", tmp_path / "missing.toml"], "argument --config:", "missing.toml")
    _fails(capsys, ["play", "--checkpoint", tmp_path], "argument --checkpoint:", "cannot read")
    _fails(capsys, ["train", "--config", tmp_path], "argument --config:")


def test_a_file_that_is_not_a_checkpoint_is_one_line(capsys, tmp_path):
    text, tensor, empty = tmp_path / "notes.pt", tmp_path / "tensor.pt", tmp_path / "empty.pt"
    text.write_text("not a checkpoint\n")
    torch.save(torch.zeros(3), tensor)
    empty.touch()
    weights = tmp_path / "weights.pt"  # a model's state dict: a dict, but not a checkpoint
    torch.save(torch.nn.Linear(2, 2).state_dict(), weights)
    for path in (text, tensor, empty, weights):
        _fails(capsys, ["play", "--checkpoint", path], "argument --checkpoint:", "not a")
        _fails(capsys, ["train", "--resume", path], "argument --resume:", "not a")


class _Touch:
    """Unpickling this object runs ``os.system``: what a malicious checkpoint would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_that_would_run_code_is_refused(capsys, tmp_path, reach_ckpt):
    """The payload is a real checkpoint with one extra entry whose unpickling would create a file:
    ``play`` and ``train --resume`` refuse it in one line and the file is never created."""
    marker = tmp_path / "marker"
    ckpt = torch.load(reach_ckpt, weights_only=True)
    evil = tmp_path / "evil.pt"
    torch.save({**ckpt, "extra": _Touch(marker)}, evil)
    _fails(capsys, ["play", "--checkpoint", evil], "argument --checkpoint:", "refused")
    _fails(capsys, ["train", "--resume", evil], "argument --resume:", "refused")
    assert not marker.exists()
    # the payload works: an unsafe load would have run it
    torch.load(evil, weights_only=False)
    assert marker.exists()


def test_a_checkpoint_of_another_task_is_one_line(capsys, reach_ckpt):
    _fails(
        capsys,
        ["train", "--resume", reach_ckpt, "--task", "WarpGym/FrankaLift-v0"],
        "argument --task:",
        REACH,
    )


def test_a_checkpoint_of_other_shapes_is_one_line(capsys, tmp_path, reach_ckpt, device):
    """Resumed with an override that changes the action size, or played with an env whose
    observations are larger than its model's: the model does not fit, said in one line."""
    resume = ["train", "--resume", reach_ckpt, "--device", device, "--logdir", tmp_path / "run"]
    _fails(capsys, [*resume, "env.control_mode=ee_delta"], "argument --resume:", "does not fit")
    _fails(capsys, [*resume, "train.policy.actor_hidden=[16]"], "argument --resume:", "does not fit")
    ckpt = torch.load(reach_ckpt, weights_only=True)
    spec = {**ckpt["spec"], "env_overrides": {"control_mode": "ee_delta"}}
    other = tmp_path / "other.pt"
    torch.save({**ckpt, "spec": spec}, other)
    play = ["play", "--checkpoint", other, "--device", device]
    _fails(capsys, play, "argument --checkpoint:", "does not fit")


def test_bad_task_config_keys_values_and_output_paths_are_one_line(capsys, tmp_path):
    _fails(capsys, ["train", "--task", "WarpGym/Nope-v0"], "WarpGym/Nope-v0")
    _fails(capsys, ["train", "train.ppo.learnign_rate=1"], "train.ppo.learnign_rate")
    _fails(capsys, ["train", "train.num_envs=0"], "train.num_envs")
    _fails(capsys, ["train", "train.ppo.gamma=2"], "train.ppo.gamma")
    _fails(capsys, ["train", "nope=1"], "nope=1")
    a_file = tmp_path / "file"
    a_file.touch()
    _fails(capsys, ["train", "--logdir", a_file, "--device", "cpu"], "argument --logdir:")
    _fails(capsys, ["play", "--checkpoint", "x.pt", "--video", a_file / "out.mp4"], "argument --video:")


def test_verbose_reaches_sim_core(monkeypatch, reach_ckpt, device):
    """``--verbose`` is what ``sim_core.init`` gets as ``debug`` (see the next test for its effect)."""
    seen = []
    monkeypatch.setattr(cli, "_init_sim", lambda dev, verbose: seen.append(verbose))
    play = ["play", "--checkpoint", str(reach_ckpt), "--episodes", "1", "--device", device]
    for flags in ([], ["--verbose"]):
        assert main([*play, *flags]) == 0
    assert seen == [False, True]


_COMPILE = """
import sys
import torch
import warp as wp
from warpgym.training.cli import _init_sim

_init_sim(torch.device("cpu"), verbose=sys.argv[1] == "verbose")


@wp.kernel(enable_backward=False)
def k(a: wp.array(dtype=wp.int32)):
    a[0] = 2221713035  # above 2**31: clang warns about the int32 constant Warp emits for it


a = wp.zeros(1, dtype=wp.int32)
wp.launch(k, 1, inputs=[a])
print(int(a.numpy()[0]))
"""


def test_warp_is_silent_unless_verbose(tmp_path):
    """With an empty kernel cache, starting Warp and compiling a kernel that draws a compiler
    warning prints nothing but the script's own line; verbose shows the banner, the module-load
    line and the warning."""
    script = tmp_path / "compile.py"
    script.write_text(textwrap.dedent(_COMPILE))
    outputs = {}
    for mode in ("quiet", "verbose"):
        env = {**os.environ, "WARP_CACHE_PATH": str(tmp_path / f"cache_{mode}")}
        run = subprocess.run(
            [sys.executable, str(script), mode], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
        )
        assert run.returncode == 0, run.stderr[-3000:]
        outputs[mode] = run.stdout + run.stderr
    assert outputs["quiet"].split() == ["-2073254261"], outputs["quiet"]
    verbose = outputs["verbose"]
    assert "initialized" in verbose and "Module" in verbose and "warning:" in verbose, verbose
