"""Sources: what gets chunked. A folder walked with include/exclude globs, files loaded by type."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".folder": ["FolderSource", "load_folder"],
    ".loaders": ["LoadedFile", "SkippedFile", "load_file"],
})
