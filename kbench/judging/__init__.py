"""``kbench judge``: pool the top-k of runs, grade every pooled (query, chunk) pair with an LLM or a trained judge
(0-3), write qrels with provenance; ``--calibrate`` measures the judges on pairs that carry labels; ``--train``
trains a judge (a cross-encoder) on a generated set's pairs."""
from kbench.lazy import lazy_exports

# judged_at_k below this: a run's metrics re-scored with judged qrels are marked as computed on a thin pool
# (judging/rescore.py); here, where ``kbench compare --help`` reads it without loading the re-scoring
MIN_JUDGED = 0.8

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".agreement": ["cohen_kappa", "confusion"],
    ".judge": ["Calibration", "JudgeAnswers", "JudgeReport", "LLMJudge", "LabelledPair", "Pair", "balanced_sample",
               "calibrate", "calibrate_items", "judge_runs", "judged_at_k", "pool_runs", "read_judgements"],
    ".trained": ["TrainedJudge", "TrainedJudgeError", "train_judge_on_runs", "training_pairs"],
    ".prompt": ["PROMPT_SHA256", "judge_prompt", "parse_grade"],
})
