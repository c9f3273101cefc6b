"""Task configs: TOML files in ``configs/`` read into frozen dataclasses, strictly.

Every key in the file must be a field of the dataclass and every field without a default must be in
the file, so a typo fails loudly with the key's dotted path. Overrides are nested dicts merged over
the file before validation (``{"reward": {"success_bonus": 5.0}}``), so they obey the same rules.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ConfigError", "config_dir", "config_path", "read_toml", "from_dict", "merge", "to_dict"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or override does not match its dataclass."""


def config_dir() -> Path:
    """Directory holding the task configs: ``$WARPGYM_CONFIG_DIR``, else the installed package
    ``warpgym.configs`` (the repository's ``configs/``)."""
    override = os.environ.get("WARPGYM_CONFIG_DIR")
    if override:
        return Path(override)
    from . import configs

    return Path(configs.__file__).resolve().parent


def config_path(name_or_path: str | os.PathLike) -> Path:
    """A path as given if it exists, else ``config_dir() / f"{name}.toml"``."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    q = config_dir() / f"{p.name}.toml"
    if q.is_file():
        return q
    raise ConfigError(f"config: no file {str(p)!r} and no {q}; set WARPGYM_CONFIG_DIR or pass a path")


def read_toml(path: str | os.PathLike) -> dict[str, Any]:
    with open(path, "rb") as f:
        try:
            return tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config {path}: {e}") from e


def merge(base: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Recursive dict merge: tables merge, anything else replaces."""
    out = dict(base)
    for k, v in (overrides or {}).items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; unknown or missing keys raise ``ConfigError``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or cls.__name__}: expected a table, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        keys = ", ".join(_dotted(where, k) for k in unknown)
        raise ConfigError(f"unknown config key {keys}; known keys here: {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        key = _dotted(where, name)
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"missing config key {key}")
            continue
        kwargs[name] = _coerce(hints[name], data[name], key)
    return cls(**kwargs)


def to_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass as nested plain dicts/lists (for saving the resolved config)."""
    return {
        k: (to_dict(v) if dataclasses.is_dataclass(v) else list(v) if isinstance(v, tuple) else v)
        for k, v in ((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg))
    }


def _dotted(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _coerce(typ: Any, value: Any, key: str) -> Any:
    if dataclasses.is_dataclass(typ):
        return from_dict(typ, value, key)
    origin = typing.get_origin(typ)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(typ)
        if value is None and type(None) in args:
            return None
        errors = []
        for inner in (a for a in args if a is not type(None)):
            try:
                return _coerce(inner, value, key)
            except ConfigError as err:
                errors.append(str(err).removeprefix(f"{key}: "))
        raise ConfigError(f"{key}: {' or '.join(errors)}")
    if origin is tuple:
        args = typing.get_args(typ)
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v, key) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{key}: expected {len(args)} values, got {len(value)}")
        return tuple(_coerce(a, v, key) for a, v in zip(args, value, strict=True))
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if typ is bool or typ is str:
        if not isinstance(value, typ):
            raise ConfigError(f"{key}: expected a {typ.__name__}, got {value!r}")
        return value
    if typing.get_origin(typ) is typing.Literal:
        if value not in typing.get_args(typ):
            raise ConfigError(f"{key}: expected one of {typing.get_args(typ)}, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported field type {typ!r}")
