"""Looking at an evaluation set before trusting it: ``kbench datasets inspect``."""
from kbench.evalsets.inspection import InspectError, Inspection, inspect_dataset, log_inspection, minimum_detectable_difference

__all__ = ["InspectError", "Inspection", "inspect_dataset", "log_inspection", "minimum_detectable_difference"]
