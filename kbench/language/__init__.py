"""Which languages a knowledge base is written and asked in: detection (``detect.py``, py3langid's offline model),
the census of a dataset's documents and questions (``census.py``), with the embedder coverage it implies, and what
a run says of them (``run.py``: its tags, metrics and language slice)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".detect": ["UNDETERMINED", "detect_language", "detect_languages"],
    ".census": ["Census", "Coverage", "census_lines", "coverage_of", "take_census", "warn_uncovered"],
    ".run": ["RunLanguages", "language_census"],
})
