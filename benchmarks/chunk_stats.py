"""Chunk count and mean chunk length of every chunker at its default settings on the five Chroma corpora.

    .venv/bin/python benchmarks/chunk_stats.py [--chunkers smart recursive ...] [--corpora finance ...]

Reads ../shared/datasets/chroma_chunking/corpora/*.md (KBENCH_DATA_DIR overrides); prints one table of
chunks and mean characters per (corpus, chunker), plus seconds per chunker over all corpora. The corpora
are markdown files, so ``ast`` falls back to its text chunker and ``endpoint`` to its fallback (both noted).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbench.chunking import chunk_corpus  # noqa: E402
from kbench.chunking.registry import CHUNKERS  # noqa: E402
from kbench.cli.tables import format_table  # noqa: E402
from kbench.config import ChunkingConfig  # noqa: E402
from kbench.paths import shared_datasets_dir  # noqa: E402
from kbench.records import Document  # noqa: E402

CORPORA = ["chatlogs", "finance", "pubmed", "state_of_the_union", "wikitexts"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunkers", nargs="*", default=CHUNKERS.names())
    parser.add_argument("--corpora", nargs="*", default=CORPORA)
    args = parser.parse_args()
    folder = shared_datasets_dir() / "chroma_chunking" / "corpora"
    documents = [Document(name, (folder / f"{name}.md").read_text(encoding="utf-8"), title=name,
                          url=f"{name}.md", doc_type="markdown") for name in args.corpora]
    rows, seconds = [], {}
    for chunker in args.chunkers:
        config = ChunkingConfig(strategy=chunker)
        for document in documents:
            start = time.perf_counter()
            chunks = chunk_corpus([document], config)
            seconds[chunker] = seconds.get(chunker, 0.0) + time.perf_counter() - start
            mean = sum(len(c.text) for c in chunks) / len(chunks) if chunks else 0.0
            fallback = {c.metadata.get("fallback") for c in chunks} - {None}
            rows.append([document.doc_id, chunker, len(chunks), round(mean, 1),
                         f"fallback: {', '.join(sorted(fallback))}" if fallback else ""])
    rows.sort(key=lambda r: (r[0], r[1]))
    print(f"{sum(len(d.text) for d in documents):,} characters in {len(documents)} corpora; default settings\n")
    print(format_table(["corpus", "chunker", "chunks", "mean_chars", "note"], rows))
    print()
    print(format_table(["chunker", "seconds (all corpora)"], [[k, round(v, 2)] for k, v in seconds.items()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
