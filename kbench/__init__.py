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
"""
import os

# Nothing is fetched at run time: models load from local folders only. Set before any HF import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from kbench.compare import Comparison, CompareError, compare_runs, write_report  # noqa: E402
from kbench.config import (ChunkingConfig, ConfigError, DatasetConfig, EmbeddingConfig,  # noqa: E402
                           EnrichmentConfig, EvaluationConfig, Experiment, RerankConfig, RetrievalConfig,
                           StoreConfig, TrackingConfig, load_experiment, validate_experiment)
from kbench.datasets import load_dataset  # noqa: E402
from kbench.embedding.stage import load_encoder  # noqa: E402
from kbench.evaluation.spans import reference_table  # noqa: E402
from kbench.paths import REPO_ROOT, models_dir, workspace_dir  # noqa: E402
from kbench.chunking import CHUNKERS  # noqa: E402
from kbench.cli.tables import format_table  # noqa: E402
from kbench.indexes import Index  # noqa: E402
from kbench.pipeline import (Corpus, PipelineResult, chunk_dataset, chunked_dataset, evaluate_run,  # noqa: E402
                             preflight, prepare_corpus, read_dataset, run_pipeline, search_corpus)
from kbench.records import Chunk, Dataset, Document, Query, RankedHit, Run, Span  # noqa: E402
from kbench.runner import RunError, RunResult, export_run, import_trec_run, run_experiment  # noqa: E402
from kbench.studies.study import Study  # noqa: E402
from kbench.sweep import load_sweep, make_executor, run_sweep  # noqa: E402
from kbench.tracking.mlflow_run import tracking_uri  # noqa: E402
from kbench.tracking.read import tracking_client  # noqa: E402
from kbench.training import RerankerTrainingConfig, train_reranker  # noqa: E402

__version__ = "0.1.0"

load_corpus, chunked_corpus = read_dataset, chunked_dataset  # their names before 2026-11 (both return a Dataset)

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
