"""On-device PPO for the warpgym vector envs, its CLI (``warpgym train`` / ``warpgym play``) and the
multi-process paths (one process per GPU, ``torchrun`` + DDP)."""
