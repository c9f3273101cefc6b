"""Gymnasium vector environments of the Franka Panda on ``sim_core``.

Importing this package registers the tasks::

    import gymnasium as gym
    import warpgym  # noqa: F401

    vec = gym.make_vec("WarpGym/FrankaReach-v0", num_envs=1024, device="cpu")  # native batched env
    single = gym.make("WarpGym/FrankaReach-v0")  # one env, NumPy arrays (gymnasium.Env)
"""

import sim_core  # noqa: F401, I001 (first: sets torch's OpenMP busy-wait before torch loads)
from functools import partial

import gymnasium as gym

from .checker import check_vector_env
from .config import ConfigError
from .franka_cube import FrankaLiftEnv, FrankaPickPlaceEnv, FrankaPushEnv, FrankaStackEnv
from .franka_drawer import FrankaOpenDrawerEnv
from .franka_reach import FrankaReachEnv
from .single import SingleEnv
from .vector_env import WarpVectorEnv

__all__ = [
    "WarpVectorEnv",
    "FrankaReachEnv",
    "FrankaLiftEnv",
    "FrankaPushEnv",
    "FrankaPickPlaceEnv",
    "FrankaStackEnv",
    "FrankaOpenDrawerEnv",
    "SingleEnv",
    "check_vector_env",
    "ConfigError",
    "TASKS",
    "CONFIGS",
]

TASKS = {
    "WarpGym/FrankaReach-v0": "warpgym.franka_reach:FrankaReachEnv",
    "WarpGym/FrankaLift-v0": "warpgym.franka_cube:FrankaLiftEnv",
    "WarpGym/FrankaPush-v0": "warpgym.franka_cube:FrankaPushEnv",
    "WarpGym/FrankaPickPlace-v0": "warpgym.franka_cube:FrankaPickPlaceEnv",
    "WarpGym/FrankaStack-v0": "warpgym.franka_cube:FrankaStackEnv",
    "WarpGym/FrankaOpenDrawer-v0": "warpgym.franka_drawer:FrankaOpenDrawerEnv",
}
CONFIGS = {  # task id -> config file in configs/
    "WarpGym/FrankaReach-v0": "franka_reach",
    "WarpGym/FrankaLift-v0": "franka_lift",
    "WarpGym/FrankaPush-v0": "franka_push",
    "WarpGym/FrankaPickPlace-v0": "franka_pick_place",
    "WarpGym/FrankaStack-v0": "franka_stack",
    "WarpGym/FrankaOpenDrawer-v0": "franka_open_drawer",
}

for _id, _entry in TASKS.items():
    if _id not in gym.registry:
        gym.register(
            id=_id,
            entry_point=partial(SingleEnv, _entry),
            vector_entry_point=_entry,
        )
