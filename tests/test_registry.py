"""Registries declare each name with the module that registers it and import that module on the name's first use:
every declaration is right, names cost no import, and an unknown name is refused with the allowed ones."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from kbench.chunking.registry import CHUNKERS
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.indexes.registry import UNIT_KINDS
from kbench.paths import REPO_ROOT
from kbench.registry import Registry, StrictModel, UnknownNameError
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS
from kbench.store.registry import STORE_BACKENDS, STORED_CORPORA

REGISTRIES = [CHUNKERS, LEGS, FUSIONS, RERANKERS, EMBEDDING_PROVIDERS, UNIT_KINDS, STORE_BACKENDS, STORED_CORPORA]


def test_every_module_that_registers_is_declared_under_the_names_it_registers():
    registering = [p for p in (REPO_ROOT / "kbench").rglob("*.py")
                   if ".register(" in p.read_text(encoding="utf-8") and p.name != "registry.py"]
    for path in registering:  # every strategy module, imported: each registers all it has
        importlib.import_module(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts))
    assert len(registering) >= 30
    for registry in REGISTRIES:
        registered = {name: entry.impl.__module__ for name, entry in registry._entries.items()}
        assert registered == registry.modules, registry.field


def test_every_declared_entry_loads_from_its_module():
    for registry in REGISTRIES:
        entries = registry.entries()
        assert [e.name for e in entries] == registry.names() == sorted(registry.modules)
        assert all(issubclass(e.params, StrictModel) for e in entries)


def test_names_import_no_strategy_and_a_name_imports_its_own_module_only():
    code = ("import json, sys\n"
            "from kbench.chunking.registry import CHUNKERS\n"
            "from kbench.retrieval.registry import LEGS\n"
            "names = CHUNKERS.names() + LEGS.names()\n"
            "before = sorted(m for m in sys.modules if m.startswith(('kbench.chunking.', 'kbench.retrieval.legs.')))\n"
            "LEGS.get('bm25')\n"
            "after = sorted(m for m in sys.modules if m.startswith('kbench.retrieval.legs.'))\n"
            "print(json.dumps([names, before, after]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    names, before, after = json.loads(done.stdout)
    assert "fixed" in names and "bm25" in names
    assert before == ["kbench.chunking.registry"]
    assert after == ["kbench.retrieval.legs.bm25"]


def test_an_unknown_name_is_refused_with_every_allowed_name():
    with pytest.raises(UnknownNameError) as refused:
        LEGS.get("bm52")
    assert str(refused.value) == f"retrieval.legs: unknown value 'bm52'; allowed: {', '.join(LEGS.names())}"
    with pytest.raises(ValueError, match="unknown value 'bm52'; allowed: bm25, code_examples"):
        LEGS.validate_name("bm52")


def test_a_declared_module_that_does_not_register_its_name_is_a_loud_error():
    registry = Registry("test.strategy", {"ghost": "kbench.paths"})
    assert registry.names() == ["ghost"]
    with pytest.raises(ImportError, match="kbench.paths is declared to register 'ghost' and does not"):
        registry.get("ghost")
