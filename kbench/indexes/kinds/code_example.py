"""``code_example``: Archon's code-example index (kbench/enrichment/code_examples.py): each fenced block of the
pages longer than ``enrichment.code_examples.min_code_chars``, with its LLM summary; embedded as production embeds
it (code and summary). With ``store.backend: duckdb`` it is also written to production's second table,
archon_code_examples (kbench/store/code_examples.py). Searched by the ``code_examples`` leg."""
from __future__ import annotations

from pathlib import Path

from kbench.enrichment import CODE_EXAMPLE_UNIT, build_code_examples
from kbench.errors import RunError
from kbench.indexes.index import BuildLog, Index, IndexSections, IndexSpec, Units
from kbench.indexes.registry import UNIT_KINDS, UnitKind
from kbench.records import Dataset
from kbench.store.code_examples import store_code_examples


@UNIT_KINDS.register(CODE_EXAMPLE_UNIT)
class CodeExampleUnits(UnitKind):
    """Fenced code blocks with an LLM summary each (Archon's agentic RAG)."""

    def build(self, spec: IndexSpec, dataset: Dataset, sections: IndexSections, log: BuildLog,
              cache_root: Path) -> Units:
        config = sections.enrichment.code_examples
        with log.timer.stage("code_examples"):
            built = build_code_examples(dataset.documents, config, cache_root, policy=sections.llm_policy,
                                        meter=log.meter)
        log.counts.update(built.counts())
        if not built.units:
            raise RunError(f"enrichment.code_examples found no fenced code block longer than {config.min_code_chars} "
                           f"characters in {len(dataset.documents)} documents; lower min_code_chars or drop the "
                           "code_examples leg")
        return Units(built.units, built.texts)

    def mirror(self, index: Index, dataset: Dataset, sections: IndexSections, log: BuildLog,
               workspace: Path) -> None:
        if sections.store.backend != "duckdb" or index.embedded is None:
            return
        with log.timer.stage("store_code_examples"):
            log.counts.update(store_code_examples(
                sections.store, sections.dataset, sections.enrichment.code_examples, sections.embedding.model,
                dataset.documents, index.units, index.embedded, index.made_by["embedding_namespace"], workspace))
