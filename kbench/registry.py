"""Small registries from a config name to the thing that implements it, and the config section that names one.

Each stage keeps one ``Registry``; a strategy module registers itself with a pydantic model of its knobs:

    CHUNKERS = Registry("chunking.strategy")

    class FixedParams(StrictModel):
        chunk_size: int = 600

    @CHUNKERS.register("fixed", FixedParams)
    def fixed_chunks(document, params): ...

A registry declares each name with the module that registers it, and imports that module the first time the
name is used (``get``): every name is known from the start, so listing them or refusing an unknown one imports no
strategy, and a run imports the strategies it uses and no other (a BM25 run never loads the cross-encoder's code):

    CHUNKERS = Registry("chunking.strategy", {"fixed": "kbench.chunking.fixed", ...})

The registry names its modules as text and never imports them at its top, so no strategy module can be part of
an import cycle with it. A ``StrategySection`` (e.g. ``chunking: {strategy: smart, chunk_size: 600}``) validates its extra
keys against the params model of the name it gives, so an unknown strategy or knob fails with the allowed
names before any work starts.
"""
from __future__ import annotations

import importlib
import math
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Callable, ClassVar, Generic, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kbench.errors import UserError, deprecated, format_error, shorten

T = TypeVar("T")


def _members(annotations: list[Any]) -> list[Any]:
    """The types a value may take: unions and ``Annotated`` flattened."""
    out = []
    for ann in annotations:
        origin = get_origin(ann)
        if origin is Annotated:
            out += _members([get_args(ann)[0]])
        elif origin is Union or origin is types.UnionType:
            out += _members(list(get_args(ann)))
        else:
            out.append(ann)
    return out


def _inner(members: list[Any], containers: tuple[type, ...], position: int) -> list[Any]:
    """Annotations of the items (``position`` -1) or values (1) of the container members; Any if untyped."""
    inner = [Any] if any(m is Any or m is object for m in members) else []
    for m in members:
        origin = get_origin(m) or m
        if isinstance(origin, type) and issubclass(origin, containers):
            args = [a for a in get_args(m) if a is not Ellipsis]
            inner += [args[position]] if args else [Any]
    return inner


def number_problem(annotations: list[Any], value: Any, at: str = "") -> PydanticCustomError | None:
    """A non-finite float anywhere in ``value``, or a boolean where the annotation wants a number.

    NaN compares false with every score and dumps to JSON null, so a NaN knob would hide in the saved
    config and the run key; lax pydantic reads ``true`` as 1 in an int field. Both are refused.
    """
    members = _members(annotations)
    if isinstance(value, bool):
        takes_bool = any(m is bool or m is Any or m is object or isinstance(m, TypeVar) for m in members)
        if not takes_bool and any(m is int or m is float for m in members):
            return PydanticCustomError(
                "bool_for_number", "a boolean where a number belongs (got {got}); write a number, e.g. 1",
                {"at": at, "got": repr(value)})
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return PydanticCustomError("non_finite_number", "not a finite number (got {got}); NaN and infinities "
                                   "are refused, write a finite number", {"at": at, "got": repr(value)})
    if isinstance(value, Mapping):
        inner = _inner(members, (Mapping,), 1)
        for key, item in value.items():
            if problem := number_problem(inner, item, f"{at}.{key}"):
                return problem
    elif isinstance(value, (list, tuple, set, frozenset)):
        inner = _inner(members, (list, tuple, set, frozenset), -1)
        for i, item in enumerate(value):
            if problem := number_problem(inner, item, f"{at}[{i}]"):
                return problem
    return None


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, values are re-validated on assignment, and a
    number is a finite number, never a boolean (see ``number_problem``), in every field and nested value.

    A knob added after runs were logged names, in ``late_knobs``, the value that reproduces the behaviour before
    it existed, and a renamed knob its old name in ``hashed_as``: ``run_key_knobs`` then hashes a model's knobs
    as runs logged before either change did, so their run keys hold."""

    # defer_build: a model's validator is built when it first validates, not when its module is imported, so
    # importing the config layer (every section and knob) stays cheap: `kbench run missing.yaml` validates nothing
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, defer_build=True)
    late_knobs: ClassVar[dict[str, Any]] = {}
    hashed_as: ClassVar[dict[str, str]] = {}
    renamed_keys: ClassVar[dict[str, str]] = {}  # an old key -> its name now; the old one still works

    @field_validator("*", mode="before")
    @classmethod
    def _finite_numbers_not_booleans(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and (problem := number_problem([field.annotation], value)):
            raise problem
        return value


def in_unit(name: str) -> dict[str, str]:
    """A knob's unit for the settings reference: ``Field(600, json_schema_extra=in_unit("characters"))``."""
    return {"unit": name}


def run_key_knobs(model: type[BaseModel], knobs: dict[str, Any]) -> dict[str, Any]:
    """``knobs`` (a ``model``'s dumped values) as a run key hashes them: late knobs at their old-behaviour value
    left out, renamed knobs under their old names (``StrictModel.late_knobs``, ``hashed_as``)."""
    out = dict(knobs)
    for knob, old_value in getattr(model, "late_knobs", {}).items():
        if knob in out and out[knob] == old_value:
            del out[knob]
    for knob, old_name in getattr(model, "hashed_as", {}).items():
        if knob in out:
            out[old_name] = out.pop(knob)
    return out


class UnknownNameError(UserError, KeyError):
    def __init__(self, field: str, name: str, allowed: list[str]):
        self.field, self.name, self.allowed = field, name, allowed
        super().__init__(f"{field}: unknown value {shorten(name)}; allowed: {', '.join(allowed)}")

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return self.args[0]


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    params: type[StrictModel]
    impl: T
    summary: str


class Registry(Generic[T]):
    def __init__(self, field: str, modules: Mapping[str, str] | None = None):
        self.field = field  # the config path that names an entry, for error messages
        self.modules = dict(modules or {})  # name -> the module that registers it, imported on the name's first use
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
        if name not in self._entries and name in self.modules:
            importlib.import_module(self.modules[name])  # its decorator registers it (and checks its contract)
            if name not in self._entries:
                raise ImportError(f"{self.field}: {self.modules[name]} is declared to register {name!r} and does not")
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.field, name, self.names()) from None

    def names(self) -> list[str]:
        """Every name, declared or registered; imports nothing."""
        return sorted(self._entries.keys() | self.modules.keys())

    def entries(self) -> list[Entry[T]]:
        """Every entry, importing every strategy module (the settings reference, ``kbench list TOPIC``)."""
        return [self.get(name) for name in self.names()]

    def validate_name(self, name: str) -> str:
        """``name`` when registered or declared, else a ValueError listing the allowed names (for a field
        validator; the error formatter adds the field path)."""
        if name not in self._entries and name not in self.modules:
            raise ValueError(f"unknown value {name!r}; allowed: {', '.join(self.names())}")
        return name

    def params(self, name: str, values: dict[str, Any]) -> StrictModel:
        return self.get(name).params(**values)


def rename_keys(data: Any, renamed: dict[str, str], section: str) -> Any:
    """``data`` with each old key of ``renamed`` under its new name (saying so once); both given is an error."""
    if not isinstance(data, dict) or not any(old in data for old in renamed):
        return data
    data = dict(data)
    for old, new in renamed.items():
        if old not in data:
            continue
        if new in data and data[new] != data[old]:
            raise ValueError(f"{section}.{old} ({shorten(data[old])}) and {section}.{new} ({shorten(data[new])}) "
                             f"are one setting ({old} is its old name); keep {new}")
        deprecated(f"{section}.{old}", f"{section}.{new}")
        data[new] = data.pop(old)
    return data


class StrategySection(StrictModel):
    """A config section whose extra keys are the knobs of the strategy it names.

    Subclasses set ``registry`` (where the names live) and ``name_field`` (the key that names one); after
    validation the extra keys hold every knob of the chosen strategy with its default filled in.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=False)
    registry: ClassVar[Registry]
    name_field: ClassVar[str] = "strategy"
    renamed_keys: ClassVar[dict[str, str]] = {}  # an old key -> its name now; the old one still works

    def _should_validate(self) -> bool:
        return True

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return rename_keys(data, cls.renamed_keys, cls.registry.field.rsplit(".", 1)[0])

    @model_validator(mode="after")
    def _validate_knobs(self):
        if not self._should_validate():
            return self
        name = getattr(self, self.name_field)
        try:
            entry = self.registry.get(name)
        except UnknownNameError as e:
            raise ValueError(str(e)) from None
        prefix = self.registry.field.rsplit(".", 1)[0]
        renamed = getattr(entry.params, "renamed_keys", {})  # an old spelling the params model still reads
        foreign = [k for k in self.model_extra or {} if k not in entry.params.model_fields and k not in renamed]
        if foreign:  # say whose knob it is: the usual cause is a strategy switched and its old knobs kept
            raise ValueError("; ".join(self._foreign_knob(prefix, name, entry.params, k) for k in foreign))
        try:
            params = entry.params(**(self.model_extra or {}))
        except ValidationError as e:
            raise ValueError("; ".join(format_error(err, prefix, entry.params) for err in e.errors())) from None
        self.__pydantic_extra__ = params.model_dump()
        return self

    def _foreign_knob(self, prefix: str, name: str, params: type[StrictModel], knob: str) -> str:
        field = self.registry.field
        knob = knob if len(knob) <= 60 else shorten(knob, 60)
        mine = (f"{field} {name} takes no knobs" if not params.model_fields
                else f"unknown key for {field} {name}, whose knobs are {', '.join(params.model_fields)}")
        owners = [n for n in self.registry.names() if knob in self.registry.get(n).params.model_fields]
        whose = f" ({knob} is a knob of {', '.join(owners)})" if owners else ""
        return f"{prefix}.{knob}: {mine}{whose}"

    @property
    def params(self) -> Any:
        """The strategy's params model instance (defaults filled)."""
        return self.registry.get(getattr(self, self.name_field)).params(**(self.model_extra or {}))
