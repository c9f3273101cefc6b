"""Task configs shipped with warpgym: one TOML file per task (``[env]`` and ``[train]`` tables).

Installed as ``warpgym.configs``; ``warpgym.config.config_dir()`` finds them through this package, so
they load the same from a source checkout and from an installed wheel."""
