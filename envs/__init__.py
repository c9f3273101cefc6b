"""Gymnasium vector environments over ``sim_core`` (filled in by the envs issue)."""

__all__: list[str] = []
