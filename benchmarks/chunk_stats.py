"""Chunk count and mean chunk length of every chunker at its default settings on the five Chroma corpora.

    .venv/bin/python benchmarks/chunk_stats.py [--chunkers smart recursive ...] [--corpora finance ...]

Reads the ``chroma_chunking`` dataset's corpora (../shared/datasets/chroma_chunking/corpora/*.md; KBENCH_DATA_DIR
overrides); prints one table of chunks and mean characters per (corpus, chunker), plus seconds per chunker over
all corpora. The corpora are markdown files, so ``ast`` falls back to its text chunker and ``endpoint`` to its
fallback (both noted).
"""
from __future__ import annotations

import argparse
import sys
import time

from kbench import chunk_dataset, CHUNKERS, ChunkingConfig, DatasetConfig, format_table, read_dataset, RunError
# The chunkers are what is measured: the registry lists them (not in the public API).

CORPORA = ["chatlogs", "finance", "pubmed", "state_of_the_union", "wikitexts"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunkers", nargs="*", default=CHUNKERS.names())
    parser.add_argument("--corpora", nargs="*", default=CORPORA)
    args = parser.parse_args()
    dataset = read_dataset(DatasetConfig(name="chroma_chunking", subset=args.corpora))
    missing = sorted(set(args.corpora) - {d.doc_id for d in dataset.documents})
    if missing:
        parser.error(f"--corpora: no corpus {', '.join(missing)} in chroma_chunking")
    rows, seconds = [], {}
    for chunker in args.chunkers:
        start = time.perf_counter()
        try:
            chunks = chunk_dataset(dataset, ChunkingConfig(strategy=chunker))  # no cache: every run chunks
        except RunError:  # no chunks from any corpus: report zeros, as for one corpus
            chunks = []
        seconds[chunker] = time.perf_counter() - start
        for document in dataset.documents:
            own = [c for c in chunks if c.doc_id == document.doc_id]
            mean = sum(len(c.text) for c in own) / len(own) if own else 0.0
            fallback = {c.metadata.get("fallback") for c in own} - {None}
            rows.append([document.doc_id, chunker, len(own), round(mean, 1),
                         f"fallback: {', '.join(sorted(fallback))}" if fallback else ""])
    rows.sort(key=lambda r: (r[0], r[1]))
    documents = dataset.documents
    print(f"{sum(len(d.text) for d in documents):,} characters in {len(documents)} corpora; default settings\n")
    print(format_table(["corpus", "chunker", "chunks", "mean_chars", "note"], rows))
    print()
    print(format_table(["chunker", "seconds (all corpora)"], [[k, round(v, 2)] for k, v in seconds.items()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
