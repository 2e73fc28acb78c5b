"""kbench list [TOPIC]: what each registry holds, with every knob (the settings reference, in the terminal)."""
from __future__ import annotations

import argparse
import sys
from typing import get_args

from kbench import cli
from kbench.chunking.registry import CHUNKERS
from kbench.cli import add_command
from kbench.cli.datasets_cmd import list_datasets
from kbench.cli.models_cmd import list_models
from kbench.cli.notebooks_cmd import list_notebooks
from kbench.cli.tables import format_table
from kbench.datasets.registry import DATASETS
from kbench.embedding.models import CATALOGUE
from kbench.evaluation.measures import IR_MEASURES
from kbench.evaluation.metrics import METRICS
from kbench.indexes.registry import UNIT_KINDS
from kbench.retrieval.fusion import normalization
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS
from kbench.studies import notebook_names

MAX_CELL = 70  # characters of a default or description the terminal shows; docs/settings/ has them whole


def _first_line(obj) -> str:
    return " ".join(((obj.__doc__ or "").strip().split("\n\n")[0]).split())


def _names(topic: str) -> list[str]:
    return {"chunkers": CHUNKERS.names(), "legs": LEGS.names(), "fusions": FUSIONS.names(),
            "normalizations": list(get_args(normalization.Normalization)), "rerankers": RERANKERS.names(), "models": list(CATALOGUE),
            "metrics": list(METRICS), "datasets": [e.name for e in DATASETS.values()], "notebooks": notebook_names(),
            "units": ["chunk", *(n for n in UNIT_KINDS.names() if n != "chunking"), "<chunker>"]}[topic]


TOPICS = ["chunkers", "legs", "fusions", "normalizations", "rerankers", "models", "metrics", "datasets", "notebooks",
          "units"]
WHERE = {"chunkers": "chunking.strategy", "legs": "retrieval.legs (knobs: retrieval.leg_params.<leg>)",
         "fusions": "retrieval.fusion.strategy", "normalizations": "retrieval.fusion.normalization (weighted)",
         "rerankers": "rerank.strategy", "models": "embedding.model", "metrics": "evaluation.k / evaluation.metrics",
         "datasets": "dataset.name", "notebooks": "kbench notebooks run NAME",
         "units": "retrieval.leg_params.<leg>.unit"}


def add_parser(sub) -> None:
    p = add_command(sub, "list", description="Without a topic: the names in every registry. With one: each entry, "
                                             "what it does and its knobs (type, default, unit, allowed values); "
                                             "docs/settings/ has the same for every config section.")
    p.add_argument("topic", nargs="?", choices=TOPICS, metavar="TOPIC", help=", ".join(TOPICS))
    p.set_defaults(func=run)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 3] + "..."


def print_groups(groups: list[cli.reference.Group]) -> None:
    for group in groups:
        print(f"{group.title}: {group.summary}" if group.summary else group.title)
        if group.knobs:
            rows = [[k.path.removeprefix(group.path + "."), k.type, _cut(k.default), k.unit, _cut(k.allowed),
                     _cut(k.description)] for k in group.knobs]
            print("  " + format_table(cli.reference.HEADERS, rows).replace("\n", "\n  "))
        else:
            print("  no knobs")
        print()


def run(args: argparse.Namespace) -> int:
    topic = args.topic
    if topic is None:
        for name in TOPICS:
            names = _names(name)
            print(f"{name} ({len(names)}, {WHERE[name]}): {', '.join(names)}")
        print("\nkbench list TOPIC: each one with its knobs; docs/settings/: every config section")
        return 0
    if topic in ("chunkers", "fusions", "rerankers"):
        registry = {"chunkers": CHUNKERS, "fusions": FUSIONS, "rerankers": RERANKERS}[topic]
        print(f"{WHERE[topic]}: its knobs sit beside it, e.g. {registry.field.rsplit('.', 1)[0]}: "
              f"{{strategy: {registry.names()[0]}, ...}}\n")
        print_groups(cli.reference.registry_groups(registry, registry.field.rsplit(".", 1)[0]))
    elif topic == "legs":
        print("retrieval.legs names them; each leg's knobs sit under retrieval.leg_params.<leg>\n")
        print_groups(cli.reference.registry_groups(LEGS, "retrieval.leg_params.<name>"))
    elif topic == "units":
        group = cli.reference.unit_group()
        print(f"{group.path}: {group.summary}\n")
        print(format_table(["unit", "what", "allowed"], [[k.path, _cut(k.description), _cut(k.allowed)]
                                                         for k in group.knobs]))
    elif topic == "normalizations":
        print(f"{WHERE[topic]}: one per leg, or one for both ({{vector: none, bm25: min-max}})\n")
        print(format_table(["normalization", "what"], [[n, _first_line(sys.modules[fn.__module__])]
                                                       for n, fn in normalization.NORMALIZATIONS.items()]))
    elif topic == "metrics":
        measure = {column: name for name, column in IR_MEASURES.items()}
        rows = [[name, f"doc_{name}_at_<k>, chunk_{name}_at_<k>", measure.get(name, ""), _first_line(fn)]
                for name, fn in METRICS.items()]
        rows += [[name, f"span_{name}_at_<k>", "", what] for name, what in (
            ("recall", "share of the reference characters inside the top k chunks (unions of characters)"),
            ("precision", "share of the top k chunks' characters that are reference"),
            ("iou", "intersection over union of the two unions"))]
        print("Every metric at every evaluation.k; document level for every dataset, chunk and span level for span "
              "datasets. evaluation.metrics takes ir_measures names instead (nDCG@10, R@100, P(rel=2)@5).\n")
        print(format_table(["metric", "run columns", "ir_measures", "definition"], rows))
    elif topic == "models":
        return list_models(args)
    elif topic == "datasets":
        return list_datasets(args)
    elif topic == "notebooks":
        return list_notebooks(args)
    return 0
