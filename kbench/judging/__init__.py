"""``kbench judge``: pool the top-k of runs, grade the unlabeled (query, chunk) pairs with an LLM (0-3),
write qrels with provenance; ``--calibrate`` measures the judge on pairs that already carry labels."""
from kbench.judging.agreement import cohen_kappa, confusion
from kbench.judging.judge import Calibration, JudgeReport, Pair, calibrate, judge_runs, judged_at_k, pool_runs
from kbench.judging.prompt import PROMPT_SHA256, judge_prompt, parse_grade

__all__ = ["Calibration", "JudgeReport", "Pair", "PROMPT_SHA256", "calibrate", "cohen_kappa", "confusion",
           "judge_prompt", "judge_runs", "judged_at_k", "parse_grade", "pool_runs"]
