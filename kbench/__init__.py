"""kbench: a workbench for measuring every stage of a RAG knowledge-base pipeline.

The public API (README, "Python API"); everything a notebook or a benchmark needs is importable from here:

    from kbench import load_experiment, run_experiment
    result = run_experiment(load_experiment("configs/quickstart.yaml", ["chunking.chunk_size=400"]))
    result.metrics["chunk_ndcg_at_10"], result.run.doc_ids("q1")

- configs: ``load_experiment``, ``Experiment`` and each stage's section model (``ChunkingConfig``, ...)
- one experiment: ``run_experiment`` (pipeline + run folder + MLflow) -> ``RunResult``
- the pipeline's steps: ``read_dataset``, ``chunk_dataset``, ``chunked_dataset``, ``prepare_corpus`` (the dataset
  and the ``Index`` of every unit its legs search), ``search_corpus``, ``evaluate_run``, ``run_pipeline``;
  ``preflight`` (a missing model or endpoint, before work). ``load_corpus`` and ``chunked_corpus`` are the old
  names of ``read_dataset`` and ``chunked_dataset``.
- sweeps: ``load_sweep``, ``make_executor``, ``run_sweep``
- comparing: ``compare_runs``, ``write_report``; exporting: ``export_run``, ``import_trec_run``
- records: ``Document``, ``Chunk``, ``Query``, ``Span``, ``Dataset``, ``Run``, ``RankedHit``
- notebooks: ``Study`` (runs logged under the notebook's MLflow run), ``reference_table``, ``load_encoder``
- models: ``models_dir``, ``RerankerTrainingConfig``, ``train_reranker``; chunkers: ``CHUNKERS``
- printing: ``format_table`` (the CLI's plain-text tables)

``import kbench`` imports none of them: each name is imported from its module the first time it is used
(kbench/lazy.py), so a notebook pays for MLflow, pandas or torch only when it calls what needs them.
"""
import os

# Nothing is fetched at run time: models load from local folders only. Set before any HF import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from kbench.lazy import lazy_exports  # noqa: E402

# Each name is imported from its module when first used (kbench/lazy.py), so ``import kbench`` loads no library
# and ``from kbench import load_experiment`` loads the config layer only.
_getattr, __dir__, _ = lazy_exports(__name__, {
    "kbench.compare.compare": ["Comparison", "CompareError", "compare_runs"],
    "kbench.compare.report": ["write_report"],
    "kbench.config": ["ChunkingConfig", "ConfigError", "DatasetConfig", "EmbeddingConfig", "EnrichmentConfig",
                      "EvaluationConfig", "Experiment", "RerankConfig", "RetrievalConfig", "StoreConfig",
                      "TrackingConfig", "load_experiment", "validate_experiment"],
    "kbench.datasets.registry": ["load_dataset"],
    "kbench.embedding.stage": ["load_encoder"],
    "kbench.evaluation.spans": ["reference_table"],
    "kbench.paths": ["REPO_ROOT", "models_dir", "workspace_dir"],
    "kbench.chunking.registry": ["CHUNKERS"],
    "kbench.cli.tables": ["format_table"],
    "kbench.indexes.index": ["Index"],
    "kbench.pipeline": ["Corpus", "PipelineResult", "chunk_dataset", "chunked_dataset", "evaluate_run", "preflight",
                        "prepare_corpus", "read_dataset", "run_pipeline", "search_corpus"],
    "kbench.records": ["Chunk", "Dataset", "Document", "Query", "RankedHit", "Run", "Span"],
    "kbench.runner": ["RunError", "RunResult", "export_run", "import_trec_run", "run_experiment"],
    "kbench.studies.study": ["Study"],
    "kbench.sweep.expand": ["load_sweep"],
    "kbench.sweep.executors": ["make_executor"],
    "kbench.sweep.run": ["run_sweep"],
    "kbench.tracking.mlflow_run": ["tracking_uri"],
    "kbench.tracking.read": ["tracking_client"],
    "kbench.training.reranker": ["RerankerTrainingConfig", "train_reranker"],
})

RENAMED = {"load_corpus": "read_dataset", "chunked_corpus": "chunked_dataset"}  # names before 2026-11 (a Dataset)


def __getattr__(name: str):
    return _getattr(RENAMED.get(name, name))


__version__ = "0.1.0"

__all__ = [
    "CHUNKERS", "chunk_dataset", "chunked_dataset", "format_table", "Index", "read_dataset", "preflight",
    "Chunk", "ChunkingConfig", "compare_runs", "CompareError", "Comparison", "ConfigError", "Corpus",
    "Dataset", "DatasetConfig", "Document", "EmbeddingConfig", "EnrichmentConfig", "evaluate_run",
    "EvaluationConfig", "Experiment", "export_run", "import_trec_run", "load_dataset", "load_encoder",
    "load_experiment", "load_sweep", "make_executor", "models_dir", "PipelineResult", "prepare_corpus",
    "Query", "RankedHit", "reference_table", "REPO_ROOT", "RerankConfig", "RerankerTrainingConfig",
    "RetrievalConfig", "Run", "run_experiment", "run_pipeline", "run_sweep", "RunError", "RunResult",
    "search_corpus", "Span", "StoreConfig", "Study", "tracking_client", "tracking_uri", "TrackingConfig",
    "train_reranker", "validate_experiment", "workspace_dir", "write_report",
]
