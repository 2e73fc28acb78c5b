"""kbench chunk CONFIG_OR_PATH [--chunker NAME] [--set KNOB=VALUE ...] [--show N]

Chunks a corpus without embedding anything and prints what the chunker made: chunk count, length
percentiles, the languages of the documents (and of the questions, for a dataset), skipped files by reason, chunk
types, and sample chunks with their offsets and metadata.
CONFIG_OR_PATH is an experiment YAML (its dataset and chunking section), a registered dataset name
(``demo``), a dataset folder, any folder of files (a folder source with --include/--exclude), or one file.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from kbench.cli import add_command
from kbench.cli.tables import format_table
from kbench.chunking import chunk_corpus
from kbench.chunking.registry import CHUNKERS
from kbench.config import ChunkingConfig, ConfigError, DatasetConfig, load_experiment, parse_override
from kbench.datasets.registry import DATASETS, load_dataset
from kbench.language.census import census_lines, take_census
from kbench.sources.folder import DEFAULT_EXCLUDE, FolderSource, to_document
from kbench.sources.loaders import DEFAULT_MAX_FILE_BYTES, LoadedFile, load_file


def add_parser(sub) -> None:
    p = add_command(sub, "chunk")
    p.add_argument("source", metavar="CONFIG_OR_PATH",
                   help="an experiment YAML, a dataset name (demo), a dataset folder, any folder or one file")
    p.add_argument("--chunker", help="chunking strategy (default: the config's, else smart); see the list below")
    p.add_argument("--set", dest="knobs", action="append", default=[], metavar="KNOB=VALUE",
                   help="a knob of the chunker, e.g. --set chunk_size=400 (repeatable)")
    p.add_argument("--show", type=int, default=3, metavar="N", help="sample chunks to print (default 3)")
    p.add_argument("--include", action="append", default=None, metavar="GLOB",
                   help="folder sources: files to take, e.g. '**/*.md' (repeatable)")
    p.add_argument("--exclude", action="append", default=None, metavar="GLOB",
                   help="folder sources: files to leave out (repeatable; default .git, node_modules, dist, build)")
    p.add_argument("--max-file-bytes", type=int, default=None, help="folder sources: skip larger files")
    p.set_defaults(func=chunk)


def read_documents(args) -> tuple[str, list, dict[str, list[str]], dict]:
    """(label, documents, skipped by reason, chunking section) for CONFIG_OR_PATH."""
    label, documents, _, skipped, section = read_source(args)
    return label, documents, skipped, section


def read_source(args) -> tuple[str, list, list, dict[str, list[str]], dict]:
    """(label, documents, questions, skipped by reason, chunking section) for CONFIG_OR_PATH; a folder or a file
    has no questions."""
    source = args.source
    path = Path(source).expanduser()
    folder_knobs = {"include": args.include, "exclude": args.exclude,
                    **({"max_file_bytes": args.max_file_bytes} if args.max_file_bytes else {})}
    if path.is_file() and path.suffix.lower() in (".yaml", ".yml"):
        try:
            experiment = load_experiment(path)
        except ConfigError:
            experiment = None  # a YAML that is not an experiment (an OpenAPI spec): chunk it as a file
        if experiment is not None:
            dataset = load_dataset(experiment.dataset)
            return str(path), dataset.documents, dataset.queries, dataset.skipped, experiment.chunking.model_dump()
    if path.is_file():
        loaded = load_file(path, args.max_file_bytes or DEFAULT_MAX_FILE_BYTES)
        if not isinstance(loaded, LoadedFile):
            return str(path), [], [], {loaded.reason: [str(path)]}, {}
        return str(path), [to_document(path.name, loaded, path.parent.name)], [], {}, {}
    if source in DATASETS and not path.exists():
        dataset = load_dataset(DatasetConfig(name=source, **{k: v for k, v in folder_knobs.items() if v}))
        return source, dataset.documents, dataset.queries, dataset.skipped, {}
    if path.is_dir():
        is_dataset = any((path / marker).exists() for marker in ("corpus.jsonl", "questions_df.csv", "questions.jsonl"))
        if is_dataset:
            dataset = load_dataset(DatasetConfig(path=str(path), **{k: v for k, v in folder_knobs.items() if v}))
            return str(path), dataset.documents, dataset.queries, dataset.skipped, {}
        folder = FolderSource(path, list(args.include or []), list(DEFAULT_EXCLUDE if args.exclude is None else args.exclude),
                              args.max_file_bytes or DEFAULT_MAX_FILE_BYTES, skip_generated=True)
        documents, skipped = folder.load()
        return str(path), documents, [], skipped, {}
    raise FileNotFoundError(f"{source}: not a file, a folder or a registered dataset name "
                            f"({', '.join(DATASETS)}); give an experiment YAML, a dataset or a folder")


def chunking_config(section: dict, chunker: str | None, knobs: list[str]):
    from pydantic import ValidationError


    values = dict(section)
    if chunker and chunker != values.get("strategy"):
        values = {"strategy": chunker}  # another chunker: the config's knobs belong to its own strategy
    values.setdefault("strategy", "smart")
    for item in knobs:
        key, value = parse_override(item)
        values[key.removeprefix("chunking.")] = value
    try:
        return ChunkingConfig(**values)
    except ValidationError as e:  # the section validator's own messages name the knob and the allowed ones
        raise ConfigError("; ".join(str(err.get("ctx", {}).get("error", err["msg"])) for err in e.errors())) from None


def chunk_statistics(chunks, documents) -> dict[str, float]:
    lengths = np.array([len(c.text) for c in chunks]) if chunks else np.zeros(1)
    return {"documents": len(documents), "chunks": len(chunks), "mean_chars": float(lengths.mean()),
            "p50_chars": float(np.percentile(lengths, 50)), "p90_chars": float(np.percentile(lengths, 90)),
            "p99_chars": float(np.percentile(lengths, 99)), "min_chars": int(lengths.min()),
            "max_chars": int(lengths.max())}


def chunk(args) -> int:

    label, documents, questions, skipped, section = read_source(args)
    config = chunking_config(section, args.chunker, args.knobs)
    chunks = chunk_corpus(documents, config)
    stats = chunk_statistics(chunks, documents)
    print(f"{label}: chunker {config.strategy} {json.dumps(config.params.model_dump(), default=str)}")
    print(format_table(list(stats), [list(stats.values())]))
    print()
    types = Counter(d.doc_type for d in documents)
    print("documents by type: " + (", ".join(f"{t} {n}" for t, n in sorted(types.items())) or "none"))
    for line in census_lines(take_census(documents, questions))[: None if questions else 1]:
        print(line)
    print("skipped files: " + (", ".join(f"{r} {len(p)}" for r, p in sorted(skipped.items())) or "none"))
    for reason, paths in sorted(skipped.items()):
        print(f"  {reason}: {', '.join(paths[:5])}{' ...' if len(paths) > 5 else ''}")
    made_by = Counter(c.metadata.get("chunker") for c in chunks)
    if len(made_by) > 1:
        print("chunks by chunker: " + ", ".join(f"{k} {n}" for k, n in made_by.most_common()))
    fallbacks = Counter(c.metadata["fallback_reason"] for c in chunks if c.metadata.get("fallback_reason"))
    if fallbacks:
        print("fallback chunks: " + ", ".join(f"{k}: {n}" for k, n in fallbacks.most_common()))
    step = max(1, len(chunks) // max(args.show, 1))
    for chunk_ in chunks[::step][: args.show]:
        meta = {k: v for k, v in chunk_.metadata.items() if k not in ("chunker_params", "imports")}
        print(f"\n--- {chunk_.chunk_id} [{chunk_.start}:{chunk_.end}] {len(chunk_.text)} chars")
        print("    " + json.dumps(meta, default=str, ensure_ascii=False))
        text = chunk_.text if len(chunk_.text) <= 600 else chunk_.text[:600] + " [...]"
        print("    " + text.replace("\n", "\n    "))
    if not documents:
        print(f"\nno documents to chunk. Chunkers: {', '.join(CHUNKERS.names())}")
    return 0
