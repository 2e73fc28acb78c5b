"""kbench datasets list"""
from __future__ import annotations

from kbench.cli.tables import format_table


def add_parser(sub) -> None:
    p = sub.add_parser("datasets", help="datasets: list, build")
    dsub = p.add_subparsers(dest="datasets_command", required=True, metavar="ACTION")
    ls = dsub.add_parser("list", help="registered datasets and where they are")
    ls.set_defaults(func=list_datasets)


def list_datasets(args) -> int:
    from kbench.datasets.registry import DATASETS

    rows = []
    for entry in DATASETS.values():
        path = entry.location()
        rows.append([entry.name, entry.layout, "yes" if path.is_dir() else "MISSING", str(path), entry.description])
    print(format_table(["name", "layout", "present", "path", "description"], rows))
    print("\nAny BEIR or span folder works too: dataset: {path: /path/to/folder}")
    return 0
