"""Which tests must run on the same pytest-xdist worker, and the scheduler that keeps them there.

A test shares something with others when it carries an ``xdist_group`` mark, uses a session fixture that holds a
server (tests/conftest.py ``SHARED_SERVERS``), or uses a module- or class-scoped fixture (built once per worker
that runs one of its tests: on one worker it is built once). Tests linked that way, directly or through another
test, form one group, named after the first ``xdist_group`` mark among them (else after what they share).

pytest-xdist's own ``--dist loadgroup`` reads the marks by rewriting node ids, which pytest 9.2's structured node
ids ignore (pytest-dev/pytest-xdist#1386: every test is scheduled alone). So each worker writes the groups it
collected to the run folder, and the controller's scheduler (``--dist loadgroup``, through the
``pytest_xdist_make_scheduler`` hook) sends each group to one worker as one unit of work.

The slow tests are put first, the groups holding one before them, largest first: a worker is handed a few tests
ahead, so a long test near the end of the queue would keep one worker busy after the others have run out of work.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

GROUPS_FILE = "xdist-groups.json"  # in the run folder: {node id: group}, written by every worker alike


def mark_name(mark) -> str:
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def group_keys(item: pytest.Item, shared_servers: dict[str, str]) -> list[str]:
    """What ``item`` shares with other tests: its xdist_group marks, the shared servers and the module- or
    class-scoped fixtures it uses."""
    keys = [mark_name(mark) for mark in item.iter_markers("xdist_group")]
    info = getattr(item, "_fixtureinfo", None)
    for name in info.names_closure if info else ():
        if name in shared_servers:
            keys.append(shared_servers[name])
            continue
        for definition in info.name2fixturedefs.get(name, ())[-1:]:  # the definition this test gets
            if definition.scope in ("module", "class", "package"):
                keys.append(f"{item.path.relative_to(item.config.rootpath)}::{name}")
    return keys


def groups(items: list[pytest.Item], shared_servers: dict[str, str]) -> dict[pytest.Item, str]:
    """Each test that shares something, and the name of its group (see the module's docstring)."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keys_of = {item: group_keys(item, shared_servers) for item in items}
    for keys in keys_of.values():
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])
    named: dict[str, str] = {}
    for item in items:
        for mark in item.iter_markers("xdist_group"):
            name = mark_name(mark)
            if named.setdefault(find(name), name) != name:
                raise pytest.UsageError(f"xdist groups {named[find(name)]!r} and {name!r} share tests "
                                        f"({item.nodeid}): give them one name")
    return {item: named.get(find(keys[0]), find(keys[0])) for item, keys in keys_of.items() if keys}


def group_and_order(config: pytest.Config, items: list[pytest.Item], shared_servers: dict[str, str]) -> None:
    """Mark each test's group, put the slow tests first and, on an xdist worker, write the groups for the
    controller's scheduler."""
    group_of = groups(items, shared_servers)
    for item, name in group_of.items():
        if name not in {mark_name(mark) for mark in item.iter_markers("xdist_group")}:
            item.add_marker(pytest.mark.xdist_group(name))
    slow_groups = {group_of[item] for item in items if item in group_of and item.get_closest_marker("slow")}
    size = Counter(group_of.values())

    def order(item: pytest.Item) -> tuple[int, int]:
        """Slow groups, largest first (the longest chain starts at once), then slow tests, then the rest."""
        if group_of.get(item) in slow_groups:
            return 0, -size[group_of[item]]
        return (1, 0) if item.get_closest_marker("slow") else (2, 0)

    items.sort(key=order)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        path = config._tmp_path_factory.getbasetemp().parent / GROUPS_FILE  # what pytest-xdist itself reads
        temp = path.with_name(f".{path.name}.{os.environ['PYTEST_XDIST_WORKER']}")
        temp.write_text(json.dumps({item.nodeid: name for item, name in group_of.items()}), encoding="utf-8")
        os.replace(temp, path)


def make_scheduler(config: pytest.Config, log):
    """The controller's scheduler for ``--dist loadgroup``: pytest-xdist's scope scheduler, whose scopes are the
    groups the workers wrote (a test in no group is a scope of its own)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups_file: Path = config._tmp_path_factory.getbasetemp() / GROUPS_FILE
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # read once every worker has collected (the scheduler asks only then)
                self._groups = json.loads(self.groups_file.read_text(encoding="utf-8"))
            return self._groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
