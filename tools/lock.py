"""requirements.lock: every dependency pinned, taken from a venv that passed, installed by `make install`.

    python tools/lock.py write [--skip NAME ...]   # `make lock`: pin what the venv holds now
    python tools/lock.py check                     # before installing: pyproject and lock agree
    python tools/lock.py verify [--skip NAME ...]  # after installing: nothing kbench needs is missing

Installing with ``pip install --no-deps -r requirements.lock`` gets exactly the pinned versions, never a newer
one; a dependency without a pin is then not installed at all, and ``verify`` fails naming it and the package
that wants it (a clear failure instead of a silent drift to whatever is newest). Left out of the lock:
torch (the Makefile installs the 2.13.0 CPU wheel first), any nvidia-* or triton package (a CUDA build must
never enter), kbench itself, and the packages the Makefile installs with --no-deps (``--skip``), whose
declared dependencies are not needed.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"
NEVER = re.compile(r"^(torch|nvidia-.*|triton|kbench|pip)$")  # installed apart, or never at all
HEADER = """\
# requirements.lock: written by `make lock` (tools/lock.py) from a venv whose tests passed. Do not edit.
# `make install` installs exactly these with --no-deps, after torch==2.13.0 (CPU) and before kbench itself.
# Left out: torch, nvidia-*/triton (never), kbench, pip, and the Makefile's --no-deps packages.
# Python 3.11, Linux x86_64.
"""


def lock_pins(path: Path = LOCK) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def write(skip: list[str]) -> int:
    skipped = {canonicalize_name(s) for s in skip}
    # --all: setuptools too (torch asks for a newer one than a fresh venv has)
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"], check=True,
                            capture_output=True, text=True).stdout.splitlines()
    lines = []
    for line in freeze:
        if not line or line.startswith("#"):
            continue
        if "==" not in line:
            print(f"lock: {line!r} is not a plain name==version pin (installed from a path or URL?); "
                  "install it from the package index and run `make lock` again", file=sys.stderr)
            return 2
        name = canonicalize_name(line.split("==")[0])
        if not NEVER.match(name) and name not in skipped:
            lines.append(line)
    LOCK.write_text(HEADER + "\n".join(sorted(lines, key=str.lower)) + "\n", encoding="utf-8")
    print(f"lock: {len(lines)} pins written to {LOCK.relative_to(REPO)}")
    return 0


def check(lock: Path = LOCK, pyproject: Path = REPO / "pyproject.toml") -> int:
    """The lock holds no CUDA package and pins every dependency pyproject.toml names (before installing)."""
    pins = lock_pins(lock)
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    wanted = project["dependencies"] + [r for extra in project.get("optional-dependencies", {}).values() for r in extra]
    problems = [f"{name}=={v} must not be in the lock" for name, v in pins.items() if NEVER.match(name)]
    for text in wanted:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if NEVER.match(name):
            continue
        if name not in pins:
            problems.append(f"pyproject.toml asks for {req.name}, requirements.lock has no pin for it")
        elif req.specifier and not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"pyproject.toml asks for {req}, requirements.lock pins {name}=={pins[name]}")
    return report(problems)


def verify(skip: list[str]) -> int:
    """After installing: walk kbench's requirements (with its extras) through the installed packages; any that
    is not installed is a pin missing from the lock."""
    skipped = {canonicalize_name(s) for s in skip}
    env = default_environment()
    seen: set[str] = set()
    problems, warnings = [], []
    todo = [("kbench", ("test", "docs"), "kbench")]
    while todo:
        name, extras, chain = todo.pop()
        key = canonicalize_name(name)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed (wanted by {chain}): requirements.lock has no pin for it")
            continue
        if key in skipped:
            continue
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in (extras or ("",))):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                problems.append(f"{req.name} is not installed (wanted by {chain} -> {dist.metadata['Name']}): "
                                "requirements.lock has no pin for it")
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                warnings.append(f"{dist.metadata['Name']} asks for {req}, the lock has {req.name}=={have}")
            todo.append((req.name, tuple(sorted(req.extras)), f"{chain} -> {dist.metadata['Name']}"))
    for line in sorted(set(warnings)):
        print(f"lock: warning: {line}", file=sys.stderr)
    return report(problems)


def report(problems: list[str]) -> int:
    for line in sorted(set(problems)):
        print(f"lock: {line}", file=sys.stderr)
    if problems:
        print("lock: install the missing package into the venv, run the tests, then `make lock` "
              "(one command rewrites requirements.lock)", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["write", "check", "verify"])
    parser.add_argument("--skip", nargs="*", default=[], help="packages installed with --no-deps")
    args = parser.parse_args()
    if args.action == "write":
        return write(args.skip)
    return check() if args.action == "check" else verify(args.skip)


if __name__ == "__main__":
    sys.exit(main())
