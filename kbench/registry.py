"""Small registries from a config name to the thing that implements it, and the config section that names one.

Each stage keeps one ``Registry``; a strategy module registers itself with a pydantic model of its knobs:

    CHUNKERS = Registry("chunking.strategy")

    class FixedParams(StrictModel):
        chunk_size: int = 600

    @CHUNKERS.register("fixed", FixedParams)
    def fixed_chunks(document, params): ...

A registry never imports its users: the stage package's ``__init__`` imports its strategy modules, and
Python runs that ``__init__`` before any module of the package, so a registry is full whenever it can be
reached. A ``StrategySection`` (e.g. ``chunking: {strategy: smart, chunk_size: 600}``) validates its extra
keys against the params model of the name it gives, so an unknown strategy or knob fails with the allowed
names before any work starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from kbench.errors import format_error

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
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.field, name, self.names()) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def params(self, name: str, values: dict[str, Any]) -> StrictModel:
        return self.get(name).params(**values)


class StrategySection(StrictModel):
    """A config section whose extra keys are the knobs of the strategy it names.

    Subclasses set ``registry`` (where the names live) and ``name_field`` (the key that names one); after
    validation the extra keys hold every knob of the chosen strategy with its default filled in.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=False)
    registry: ClassVar[Registry]
    name_field: ClassVar[str] = "strategy"

    def _should_validate(self) -> bool:
        return True

    @model_validator(mode="after")
    def _validate_knobs(self):
        if not self._should_validate():
            return self
        name = getattr(self, self.name_field)
        try:
            entry = self.registry.get(name)
        except UnknownNameError as e:
            raise ValueError(str(e)) from None
        try:
            params = entry.params(**(self.model_extra or {}))
        except ValidationError as e:
            prefix = self.registry.field.rsplit(".", 1)[0]
            raise ValueError("; ".join(format_error(err, prefix, entry.params) for err in e.errors())) from None
        self.__pydantic_extra__ = params.model_dump()
        return self

    @property
    def params(self) -> Any:
        """The strategy's params model instance (defaults filled)."""
        return self.registry.get(getattr(self, self.name_field)).params(**(self.model_extra or {}))
