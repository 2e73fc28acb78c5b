"""What every study notebook shares: configs built from its parameters, runs logged under the notebook's run.

    study = Study(dataset="demo", max_queries=20, workspace="experiments", parent_run_id=..., plots_dir=...)
    result = study.run("fixed-600", chunking={"strategy": "fixed", "chunk_size": 600})
    study.save(fig, "lengths")       # -> plots_dir/lengths.png (attached to the notebook's MLflow run)
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.config import load_experiment, read_yaml_mapping, set_dotted
from kbench.paths import REPO_ROOT
from kbench.runner import RunResult, run_experiment
from kbench.tracking import tags as tag

EXPERIMENT = "notebooks"


@dataclass
class Study:
    notebook: str
    dataset: str = "demo"
    max_queries: int | None = None
    max_documents: int | None = None
    model: str = "all-MiniLM-L6-v2"
    workspace: str = "experiments"
    tracking_uri: str | None = None
    parent_run_id: str | None = None
    plots_dir: str | None = None
    results: dict[str, RunResult] = field(default_factory=dict)

    def __post_init__(self):
        # JupyterLab starts kernels in notebooks/; a relative workspace means the repository's, as in the CLI
        if not Path(self.workspace).is_absolute():
            self.workspace = str(REPO_ROOT / self.workspace)

    def config(self, source: str | Path | dict[str, Any] | None = None, **sections: Any):
        """An Experiment from a YAML file or dict (default: fixed 600/100 chunks, vector search), with this
        study's dataset, sample, model, workspace and tracking; ``sections`` override whole keys by dotted path
        (``chunking={...}`` replaces the section, ``**{"retrieval.top_k": 50}`` sets one knob)."""
        if source is None:
            source = {"chunking": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
                      "embedding": {"model": self.model}, "retrieval": {"legs": ["vector"], "top_k": 20}}
        if isinstance(source, (str, Path)):
            source = read_yaml_mapping(source)
        data = copy.deepcopy(source)
        data["dataset"] = {"name": self.dataset, "max_queries": self.max_queries, "max_documents": self.max_documents}
        data["workspace"] = str(self.workspace)
        data.setdefault("evaluation", {})["k"] = [1, 5, 10]
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
