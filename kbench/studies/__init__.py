"""Studies: the notebooks' shared helper (``Study``) and the papermill driver that runs them (``driver``)."""
from kbench.studies.driver import (NOTEBOOKS_DIR, NotebookResult, declared_parameters, notebook_names, notebook_path,
                                   parse_value, run_all, run_notebook)
from kbench.studies.inputs import NotebookError
from kbench.studies.study import Study

__all__ = ["NOTEBOOKS_DIR", "NotebookError", "NotebookResult", "Study", "declared_parameters", "notebook_names",
           "notebook_path", "parse_value", "run_all", "run_notebook"]
