"""``kbench label``: a person's labels in the loop. Pool the top-k of the configs a recommendation cannot yet tell
apart, serve the pairs on a local page in an order that decides them soonest (with a seeded random share of whole
questions), keep every grade in a labels file, and combine the human grades with a model's (the LLM judge's, or a
generated set's labels) into PPI++ intervals the recommendation decides on (docs/how-to/labelling.md)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".estimate": ["estimate_labels"],
    ".label_studio": ["import_annotations", "write_tasks"],
    ".labels": ["LabelsFile", "LabelsLock", "pool_path"],
    ".page": ["estimate_lines", "labels_estimate", "start_page"],
    ".pool": ["LabelError", "LabelPool", "build_pool"],
})
