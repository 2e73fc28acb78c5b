"""One base class for the errors a user can fix (kbench.errors.UserError), caught once by the CLI: every error class
of the package is either a UserError (keeping its built-in base where callers catch it by that) or one of the few
internal ones listed here, and a UserError raised anywhere under a command is one line on stderr and exit 2."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

import kbench
from kbench.cli import main
from kbench.cli.errors import USER_ERRORS
from kbench.errors import ConfigError, UserError

# Raised and caught inside kbench, never shown to a user as such: control flow, a plugin author's contract, HTTP.
INTERNAL = {"kbench.sources.loaders._Skip", "kbench.llm.client._Retryable", "kbench.config._YamlProblem",
            "kbench.serve.chat_model.GenerationCancelled", "kbench.serve.server.RequestError",
            "kbench.retrieval.contracts.ContractError"}


def _all_error_classes() -> list[type]:
    for module in pkgutil.walk_packages(kbench.__path__, "kbench."):
        importlib.import_module(module.name)

    def below(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    return sorted({c for c in below(Exception) if c.__module__.startswith("kbench.") and not issubclass(c, Warning)},
                  key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_error_class_is_a_user_error_or_listed_as_internal():
    classes = _all_error_classes()
    names = {f"{c.__module__}.{c.__qualname__}" for c in classes}
    assert INTERNAL <= names, f"listed as internal but gone: {INTERNAL - names}"
    not_user = [n for c, n in ((c, f"{c.__module__}.{c.__qualname__}") for c in classes)
                if not issubclass(c, UserError) and n not in INTERNAL]
    assert not not_user, f"subclass kbench.errors.UserError (or list as internal): {not_user}"
    assert len(classes) - len(INTERNAL) >= 35  # the 38 of the issue, less ones merged since


def test_built_in_bases_are_kept_where_callers_catch_them():
    from kbench.datasets.reading import DatasetError
    from kbench.registry import UnknownNameError
    from kbench.store.pgvector_store import PostgresUnreachableError
    from kbench.llm import LLMError

    assert issubclass(ConfigError, ValueError) and issubclass(DatasetError, ValueError)
    assert issubclass(UnknownNameError, KeyError) and str(UnknownNameError("a.b", "x", ["y"])).startswith("a.b:")
    assert issubclass(PostgresUnreachableError, ConnectionError) and issubclass(LLMError, RuntimeError)


def test_the_cli_catches_the_one_base_and_nothing_it_should_not():
    assert USER_ERRORS[0] is UserError
    assert all(issubclass(e, OSError) for e in USER_ERRORS[1:])  # a path given by the user, from Python itself


@pytest.mark.parametrize("error", ["kbench.compare.gate.GateError", "kbench.sweep.run.SweepError",
                                   "kbench.store.duckdb_store.StoreLockedError"])
def test_a_user_error_under_any_command_is_one_line_and_exit_2(error, monkeypatch, capsys):
    module, name = error.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)

    def fail(args):
        raise cls("the problem; the fix")

    import kbench.cli.cache_cmd as cache_cmd
    monkeypatch.setattr(cache_cmd, "stats", fail)
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "stats"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "kbench: error: the problem; the fix\n"
