"""Dotted paths into nested config data (``chunking.chunk_size``): set one, read one, flatten a tree."""
from __future__ import annotations

from typing import Any, Callable

from kbench.errors import ConfigError


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"{dotted}: {part!r} is a value, not a section")
        node = nxt
    node[parts[-1]] = value


def get_dotted(data: dict[str, Any], dotted: str) -> Any:
    """The value at ``dotted``, or None when any part is missing."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def flatten_dotted(data: dict[str, Any], prefix: str = "",
                   is_leaf: Callable[[str, Any], bool] = lambda path, value: False) -> dict[str, Any]:
    """``{a: {b: 1}}`` -> ``{"a.b": 1}``. Non-empty dicts are descended into unless ``is_leaf(path, value)``
    says the dict is one value (e.g. a metadata filter); values are kept as they are."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and not is_leaf(path, value):
            flat.update(flatten_dotted(value, path + ".", is_leaf))
        else:
            flat[path] = value
    return flat
