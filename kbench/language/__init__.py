"""Which languages a knowledge base is written and asked in: detection (``detect.py``, py3langid's offline model)
and the census of a dataset's documents and questions (``census.py``), with the embedder coverage it implies."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".detect": ["UNDETERMINED", "detect_language", "detect_languages"],
    ".census": ["Census", "Coverage", "census_lines", "coverage_of", "take_census", "warn_uncovered"],
})
