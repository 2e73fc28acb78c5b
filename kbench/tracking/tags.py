"""Every MLflow tag kbench writes or reads, by one name each (a tag renamed here is renamed everywhere)."""
from kbench.language.run import DOCUMENTS_TAG, QUESTIONS_TAG, WARNING_TAG

RUN_KEY = "kbench.run_key"            # content hash of the config (Experiment.run_key): equal key, equal results
DATASET = "kbench.dataset"            # the dataset's name
ERROR = "kbench.error"                # a FAILED run's error message (first 5000 characters)
IMPORTED_FROM = "kbench.imported_from"  # a TREC run file scored by `kbench compare import`
NOTEBOOK = "kbench.notebook"          # the notebook that logged the run
PROFILE = "kbench.profile"            # the notebook profile (ci, full, ...)
LABEL = "kbench.label"                # a notebook study's label for one of its runs
FAILED_CELL = "kbench.failed_cell"    # the notebook cell that failed
FINGERPRINT = "kbench.fingerprint"    # hash of the run's fingerprint.json (tracking/fingerprint.py)
DATASET_HASH = "kbench.dataset_hash"  # content hash of the dataset's documents, questions and judgements
COMPUTES_IN = "kbench.computes_in"    # OpenVINO's float precision here: "embedding bf16, rerank int8/bf16"
WORKER = "kbench.worker"              # host:pid that computed a sweep config
OWNER = "kbench.owner"                # host:pid:process start of the process writing a run (tracking/guard.py)
ABANDONED = "kbench.abandoned"        # why a later run marked this one KILLED (its process died mid-logging)
RUN_FOLDER = "kbench.run_folder"      # the run folder's name (<workspace>/runs/<name>): what the MLflow run exports
TRACES = "kbench.traces"              # the run's traces counted apart: "98 question traces + 1 run trace (kbench.run)"
EXPORT_ERROR = "kbench.export_error"  # why the run's traces, dataset input or prompts are missing (mlflow_export)
LLM_PARTIAL = "kbench.llm.partial"    # LLM stages that went on below llm.policy.min_usable (allow_partial)
LANGUAGE_DOCUMENTS = DOCUMENTS_TAG  # the documents' languages: "fr 96% (119), en 4% (5)" (kbench/language/run.py)
LANGUAGE_QUESTIONS = QUESTIONS_TAG  # the questions' languages, as above
LANGUAGE_WARNING = WARNING_TAG  # the embedder covers under half of the documents: the stderr line
LANGUAGE_TAGS = (LANGUAGE_DOCUMENTS, LANGUAGE_QUESTIONS, LANGUAGE_WARNING)  # what a sweep's linked child copies

SWEEP_KEY = "kbench.sweep.key"        # identifies a sweep (its baseline and configs)
SWEEP_ROLE = "kbench.sweep.role"      # parent | child
SWEEP_LABEL = "kbench.sweep.label"    # a child's label (the knobs that differ from the baseline)
SWEEP_CONFIG_KEY = "kbench.sweep.config_key"  # a child's run key
SWEEP_REUSED_FROM = "kbench.sweep.reused_from"  # a child that links an equal config's run: that run's id
SWEEP_KNOBS = "kbench.sweep.knobs"    # "a=1, b=2" or "baseline"
SWEEP_ALIASES = "kbench.sweep.aliases"
SWEEP_CONFIGS = "kbench.sweep.configs"
SWEEP_NOTE = "kbench.sweep.note"
SWEEP_SUMMARY = "kbench.sweep.summary"
SWEEP_EXECUTOR = "kbench.sweep.executor"
KNOB_PREFIX = "kbench.knob."          # one tag per knob of a sweep child
SWEEP_WARNINGS = "kbench.sweep.warnings"  # what makes some configs lose by construction (e.g. top_k below a k)
SWEEP_HEADLINE = "kbench.sweep.headline"  # the metric the sweep's configs are ranked on
SWEEP_WINNER = "kbench.sweep.winner"  # the recommended config's label (evaluation.recommend): the sweep's one pick
SWEEP_WINNER_RUN = "kbench.sweep.winner_run_id"  # its child run
SWEEP_RECOMMENDATION = "kbench.sweep.recommendation"  # the recommended config's label, or "none" (every over budget)
SWEEP_DECIDED = "kbench.sweep.decided"  # "true": shown within the margin of every other config; "false": provisional
SWEEP_WITHIN_MARGIN = "kbench.sweep.within_margin"  # the best and the configs shown within the margin of it
SWEEP_BOUND = "kbench.sweep.bound"  # no config here is better than the pick by more than this (headline units)
SWEEP_RULED_OUT = "kbench.sweep.ruled_out"  # the configs shown worse than the pick by more than the margin
SWEEP_SETS = "kbench.sweep.sets"  # a decision across sets: the sweeps' parent run ids, one per set (JSON)
SWEEP_RECOMMEND_BY = "kbench.sweep.recommend_by"  # the recommend section it used (JSON: margin, guards, cost, budgets)
SWEEP_CONFIRMED = "kbench.sweep.confirmed"  # the confirmation split: "<winner> on <held-back queries>"

MLFLOW_NOTE = "mlflow.note.content"   # MLflow's run description (markdown, shown on the run's page)
