"""Adapters that let other RL libraries train on the warpgym vector envs.

- ``warpgym.adapters.sb3.Sb3VecEnv``: Stable-Baselines3's ``VecEnv`` (NumPy arrays, list of info dicts).
- ``warpgym.adapters.rsl_rl.RslRlVecEnv``: rsl_rl 5.x's ``VecEnv`` (TensorDict observations, on device).
- ``warpgym.adapters.skrl.wrap``: a torch-native skrl wrapper (skrl's own ``"gymnasium"`` wrapper
  converts actions to NumPy every step, which also breaks on CUDA).

Each module imports its library only when used; install them with ``pip install -e ".[adapters]"``.
"""
