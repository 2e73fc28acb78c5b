"""``kbench judge``: pool the top-k of runs, grade the unlabeled (query, chunk) pairs with an LLM (0-3),
write qrels with provenance; ``--calibrate`` measures the judge on pairs that already carry labels."""
from kbench.lazy import lazy_exports

# judged_at_k below this: a run's metrics re-scored with judged qrels are marked as computed on a thin pool
# (judging/rescore.py); here, where ``kbench compare --help`` reads it without loading the re-scoring
MIN_JUDGED = 0.8

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".agreement": ["cohen_kappa", "confusion"],
    ".judge": ["Calibration", "JudgeReport", "Pair", "calibrate", "judge_runs", "judged_at_k", "pool_runs"],
    ".prompt": ["PROMPT_SHA256", "judge_prompt", "parse_grade"],
})
