"""ranx's mean scores of a TREC run file against a TREC qrels file, printed as one JSON object.

tests/tracking/test_export.py runs this in a process of its own with ``NUMBA_DISABLE_JIT=1``: ranx's metric
functions then run as the plain Python they are written in (the same code, the same definitions), instead of
numba compiling every kernel first. On the six questions of the export test the compilation was the whole cost
(39 s and 25 s per level in a clean-clone run, about 20 CPU seconds against 2 without it); the flag must be set
before numba is imported, which an xdist worker that ran other ranx tests already did, hence the process.
ranx's other parity tests (tests/sweep/test_tuning.py, tests/retrieval/test_fusion_ranx_parity.py) still compile
the kernels they call, once per venv (numba keeps them in ranx's __pycache__), nDCG's among them.

    python -m tests.tracking.ranx_means RUN QRELS METRIC [METRIC ...]
"""
from __future__ import annotations

import json
import sys

from ranx import Qrels, Run, evaluate

from kbench.tracking.export import read_trec_qrels, read_trec_run, to_ranx_qrels


def ranx_means(run_file: str, qrels_file: str, metrics: list[str]) -> dict[str, float]:
    run, _ = read_trec_run(run_file)
    qrels = read_trec_qrels(qrels_file)
    for q in qrels:  # ranx wants every judged query in the run
        run.setdefault(q, {})
    ranx_qrels = to_ranx_qrels(qrels)  # kbench's own conversion, checked here
    assert isinstance(ranx_qrels, Qrels), type(ranx_qrels)
    return evaluate(ranx_qrels, Run({q: r for q, r in run.items() if r}), metrics, make_comparable=True)


if __name__ == "__main__":
    print(json.dumps(ranx_means(sys.argv[1], sys.argv[2], sys.argv[3:])))
