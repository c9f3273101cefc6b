"""On-device PPO for the ``envs`` tasks (filled in by the training issue)."""

__all__: list[str] = []
