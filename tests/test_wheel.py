"""The built wheel, installed apart from the source tree, makes every task, trains and plays.

The wheel is built from the repository (``pip wheel --no-deps``), installed with ``pip install
--no-deps --target`` into a temporary folder, and used from another working directory by a fresh
interpreter whose ``PYTHONPATH`` puts that folder first; the dependencies come from the test
environment. This catches what an editable install hides: files left out of the wheel, paths
relative to the source tree, and generic top-level import names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = r"""
import json, sys
from pathlib import Path
import gymnasium as gym
import warpgym, sim_core
from warpgym.training.cli import main

target = Path(sys.argv[1]).resolve()
for mod in (warpgym, sim_core):
    assert Path(mod.__file__).resolve().is_relative_to(target), f"{mod.__name__} from {mod.__file__}"
made = {}
for task in sorted(warpgym.TASKS):
    env = gym.make_vec(task, num_envs=2, device="cpu")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(env.action_space.sample() * 0)
    env.close()
    single = gym.make(task)
    single.reset(seed=0)
    single.close()
    made[task] = list(obs.shape)
logdir = Path("run")
assert main(["train", "--num-envs", "8", "--max-iterations", "1", "--device", "cpu",
             "--logdir", str(logdir), "train.ppo.num_steps=4"]) == 0
assert main(["play", "--checkpoint", str(logdir / "checkpoints" / "last.pt"), "--episodes", "2",
             "--device", "cpu"]) == 0
print(json.dumps(made))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from a copy of this checkout's files (tracked or not ignored, so no stale
    ``build/`` or ``*.egg-info`` can fill gaps), unpacked into a ``--target`` folder."""
    work = tmp_path_factory.mktemp("wheel")
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    src = work / "src"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(src)],
        check=True,
        cwd=work,
    )
    (wheel,) = (work / "dist").glob("warpgym-*.whl")
    target = work / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    return target


def test_wheel_installs_only_distinct_top_level_names(installed):
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"}
    assert top == {"sim_core", "warpgym"}, top
    assert (installed / "warpgym" / "configs" / "franka_lift.toml").is_file()
    assert (installed / "sim_core" / "assets" / "franka_panda.xml").is_file()
    assert (installed / "bin" / "warpgym").is_file(), "the console script is missing"


def test_installed_wheel_makes_every_task_trains_and_plays_outside_the_source_tree(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(installed)}
    env.pop("WARPGYM_CONFIG_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(installed)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    made = json.loads(out.stdout.strip().splitlines()[-1])
    import warpgym

    assert sorted(made) == sorted(warpgym.TASKS)
    assert all(shape[0] == 2 for shape in made.values())
    played = json.loads(out.stdout.strip().splitlines()[-2])
    assert 0.0 <= played["success_rate"] <= 1.0
