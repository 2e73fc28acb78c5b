"""Small registries from a config name to the thing that implements it.

Each stage keeps one ``Registry``; a strategy module registers itself with a pydantic model of its knobs:

    CHUNKERS = Registry("chunking.strategy")

    class FixedParams(StrictModel):
        chunk_size: int = 600

    @CHUNKERS.register("fixed", FixedParams)
    def fixed_chunks(document, params): ...

The config loader validates a section's extra keys against the params model of the chosen name, so an
unknown strategy or knob fails with the allowed names before any work starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, values are re-validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class UnknownNameError(KeyError):
    def __init__(self, field: str, name: str, allowed: list[str]):
        self.field, self.name, self.allowed = field, name, allowed
        super().__init__(f"{field}: unknown value {name!r}; allowed: {', '.join(allowed)}")

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return self.args[0]


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    params: type[StrictModel]
    impl: T
    summary: str


class Registry(Generic[T]):
    def __init__(self, field: str):
        self.field = field  # the config path that names an entry, for error messages
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, params: type[StrictModel] | None = None) -> Callable[[T], T]:
        def decorator(impl: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.field}: {name!r} registered twice")
            doc = (getattr(impl, "__doc__", None) or "").strip().splitlines()
            self._entries[name] = Entry(name, params or StrictModel, impl, doc[0] if doc else "")
            return impl

        return decorator

    def get(self, name: str) -> Entry[T]:
        _ensure_builtin_modules_loaded()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.field, name, self.names()) from None

    def names(self) -> list[str]:
        _ensure_builtin_modules_loaded()
        return sorted(self._entries)

    def params(self, name: str, values: dict[str, Any]) -> StrictModel:
        return self.get(name).params(**values)


_loaded = False


def _ensure_builtin_modules_loaded() -> None:
    """Import every strategy module once, so their @register decorators have run."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import kbench.chunking  # noqa: F401
    import kbench.retrieval  # noqa: F401
