"""docs/kbench-gate.yml stays runnable: it is valid YAML and every kbench command in it parses."""
from __future__ import annotations

import shlex

import yaml

from kbench.cli import build_parser
from kbench.paths import REPO_ROOT


def test_every_kbench_command_of_the_example_workflow_parses():
    workflow = yaml.safe_load((REPO_ROOT / "docs" / "kbench-gate.yml").read_text(encoding="utf-8"))
    env = {**workflow["env"], "GITHUB_STEP_SUMMARY": "summary.md"}
    commands = []
    for step in workflow["jobs"]["gate"]["steps"]:
        for line in step.get("run", "").replace("\\\n", " ").splitlines():
            words = shlex.split(line)
            if words and words[0].endswith("/kbench"):
                commands.append([env.get(w[1:], w) if w.startswith("$") else w for w in words[1:]])
    assert [c[0] for c in commands] == ["notebooks", "gate"]
    for command in commands:
        args = build_parser().parse_args(command)
        assert callable(args.func)
    gate = build_parser().parse_args(commands[1])
    assert gate.summary == "summary.md" and gate.json == "gate.json" and gate.margin == 0.01
