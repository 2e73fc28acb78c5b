"""Sources: what gets chunked. A folder walked with include/exclude globs, files loaded by type."""
from kbench.sources.folder import FolderSource, load_folder
from kbench.sources.loaders import LoadedFile, SkippedFile, load_file

__all__ = ["FolderSource", "LoadedFile", "SkippedFile", "load_file", "load_folder"]
