"""What every study notebook shares: configs built from its parameters, runs logged under the notebook's run.

    study = Study(dataset="demo", max_queries=20, workspace="experiments", parent_run_id=..., plots_dir=...)
    result = study.run("fixed-600", chunking={"strategy": "fixed", "chunk_size": 600})
    study.save(fig, "lengths")       # -> plots_dir/lengths.png (attached to the notebook's MLflow run)

What a run is made of, first to last: the ``config`` file (every section, its dataset and model included), or
kbench's default study config (fixed 600/100 chunks, vector search) without one; then ``dataset`` (a
registered name or a dataset folder) and ``model`` when given, and ``max_queries`` / ``max_documents``; then
what the notebook sets for its comparison. ``dataset`` and ``model`` left None keep the config's (else
``demo`` and all-MiniLM-L6-v2), so ``-p config my.yaml`` runs on my.yaml's dataset, never on the demo set.
The notebook's own parts are the workspace, the tracking (its MLflow run), batch latency, and evaluation at
k 1, 5 and 10 besides the config's k.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.config import load_experiment, read_yaml_mapping, set_dotted
from kbench.datasets.config import DatasetConfig
from kbench.paths import REPO_ROOT
from kbench.runner import RunResult, run_experiment
from kbench.studies.inputs import resolve_config, resolve_dataset
from kbench.tracking import tags as tag

EXPERIMENT = "notebooks"
DEFAULT_DATASET = "demo"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
NOTEBOOK_K = [1, 5, 10]  # the cut-offs every notebook reads


@dataclass
class Study:
    notebook: str
    dataset: str | None = None  # a registered name or a dataset folder; None: the config's, else demo
    max_queries: int | None = None
    max_documents: int | None = None
    model: str | None = None  # None: the config's embedding model, else all-MiniLM-L6-v2
    workspace: str = "experiments"
    tracking_uri: str | None = None
    parent_run_id: str | None = None
    plots_dir: str | None = None
    config_file: str | None = None  # an experiment YAML every run starts from (the notebook's ``config``)
    results: dict[str, RunResult] = field(default_factory=dict)

    def __post_init__(self):
        # JupyterLab starts kernels in notebooks/; a relative workspace means the repository's, as in the CLI
        if not Path(self.workspace).is_absolute():
            self.workspace = str(REPO_ROOT / self.workspace)
        self.base = read_yaml_mapping(resolve_config(self.config_file)) if self.config_file else None
        if self.dataset:
            self.dataset = resolve_dataset(self.dataset)

    @property
    def dataset_config(self) -> DatasetConfig:
        """The dataset every run of this study reads: ``dataset`` when given, else the config's, else demo;
        with this study's sample."""
        if self.dataset:
            section: dict[str, Any] = ({"path": self.dataset} if Path(self.dataset).is_absolute()
                                       else {"name": self.dataset})
        elif self.base and isinstance(self.base.get("dataset"), dict):
            section = dict(self.base["dataset"])
        else:
            section = {"name": DEFAULT_DATASET}
        for key in ("max_queries", "max_documents"):
            if getattr(self, key) is not None:
                section[key] = getattr(self, key)
        return DatasetConfig(**section)

    @property
    def dataset_name(self) -> str:
        """A short name for titles and folders: the registered name, or the folder's name."""
        config = self.dataset_config
        return config.name or Path(config.path or DEFAULT_DATASET).name

    @property
    def dataset_source(self) -> str:
        """What a function taking "a registered name or a dataset folder" takes (reranker training)."""
        config = self.dataset_config
        return config.path or config.name or DEFAULT_DATASET

    def config(self, source: str | Path | dict[str, Any] | None = None, **sections: Any):
        """An Experiment from a YAML file or dict (default: the study's config file, else fixed 600/100 chunks
        and vector search), with this study's dataset, sample, model, workspace and tracking; ``sections``
        override whole keys by dotted path (``chunking={...}`` replaces the section, ``**{"retrieval.top_k": 50}``
        sets one knob)."""
        if source is None:
            source = self.base if self.base is not None else {
                "chunking": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
                "retrieval": {"legs": ["vector"], "top_k": 20}}
        if isinstance(source, (str, Path)):
            source = read_yaml_mapping(source)
        data = copy.deepcopy(source)
        data["dataset"] = self.dataset_config.model_dump(exclude_defaults=True)
        if self.model or not (isinstance(data.get("embedding"), dict) and data["embedding"].get("model")):
            data.setdefault("embedding", {})["model"] = self.model or DEFAULT_MODEL
        data["workspace"] = str(self.workspace)
        evaluation = data.setdefault("evaluation", {})
        evaluation["k"] = sorted(set(evaluation.get("k") or []) | set(NOTEBOOK_K))
        data.setdefault("retrieval", {})["latency"] = "batch"  # notebooks compare quality; batch keeps them quick
        data["tracking"] = {"experiment": EXPERIMENT, "tracking_uri": self.tracking_uri}
        for dotted, value in sections.items():
            set_dotted(data, dotted, value)
        return load_experiment(data)

    def run(self, label: str, source: str | Path | dict[str, Any] | None = None, **sections: Any) -> RunResult:
        """Run one config as a child of the notebook's MLflow run (run name = label); keeps the result."""
        experiment = self.config(source, **sections)
        experiment.name = label
        experiment.tracking.run_name = label
        result = run_experiment(experiment, progress=False, parent_run_id=self.parent_run_id,
                                extra_tags={tag.NOTEBOOK: self.notebook, tag.LABEL: label})
        self.results[label] = result
        return result

    def save(self, fig, name: str) -> Path | None:
        """Save a figure as <plots_dir>/<name>.png (the driver attaches plots_dir to the MLflow run) and show it in
        the notebook, so a reader of the executed notebook (or its HTML) sees every chart the run keeps."""
        path = None
        if self.plots_dir:
            path = Path(self.plots_dir) / f"{name}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=110, bbox_inches="tight")
        show_figure(fig)
        return path


def show_figure(fig) -> None:
    """Display ``fig`` in the running notebook, once: pyplot forgets it afterwards, so the cell does not show it a
    second time when it ends. Outside IPython (a script) nothing is shown."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    display(fig)
    import matplotlib.pyplot as plt

    plt.close(fig)
