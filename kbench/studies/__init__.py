"""Studies: the notebooks' shared helper (``Study``), their curves with intervals (``plots``) and the papermill driver
that runs them (``driver``)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".driver": ["NOTEBOOKS_DIR", "NotebookResult", "declared_parameters", "notebook_names", "notebook_path",
                "parse_value", "run_all", "run_notebook"],
    ".inputs": ["NotebookError"],
    ".plots": ["curve", "from_zero", "interval"],
    ".study": ["Study"],
})
