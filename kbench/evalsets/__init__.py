"""Looking at an evaluation set before trusting it: ``kbench datasets inspect``; how far it is from the questions
users ask: ``kbench datasets match``."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".inspection": ["InspectError", "Inspection", "inspect_dataset", "log_inspection", "minimum_detectable_difference"],
    ".match": ["MatchError", "MatchReport", "decision_line", "match_sets"],
})
