"""The ``heading`` unit kind (kbench/indexes/kinds/heading.py): heading paths over the sections they head, and a
keyword leg on them fused with a vector leg on the run's chunks, on the demo set."""
from __future__ import annotations

from kbench.config import RetrievalConfig, load_experiment
from kbench.indexes import unit_names
from kbench.indexes.kinds.heading import heading_units, plain
from kbench.pipeline import prepare_corpus, run_pipeline
from kbench.records import Document
from tests.conftest import make_config


def test_a_leg_asks_for_the_heading_index_by_name():
    config = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"},
                             leg_params={"vector": {"unit": "heading"}, "bm25": {"unit": "heading"}})
    specs, of_leg = config.index_specs()
    assert of_leg == {"vector": "heading", "bm25": "heading"}
    assert [(s.name, s.kind, s.embed) for s in specs] == [("chunk", "chunk", False), ("heading", "heading", True)]
    assert "heading" in unit_names()


def test_heading_units_carry_their_path_and_cover_their_section():
    text = ("Intro.\n\n# Path Parameters\n\nText.\n\n## Order matters\n\n```python\n# a comment\n```\n\n"
            "## `Depends` with [yield](y.md)\n\nMore.\n")
    units = heading_units(Document("d", text, title="Tutorial", doc_type="markdown"))
    assert [u.text for u in units] == ["Tutorial", "Tutorial > Path Parameters",
                                       "Tutorial > Path Parameters > Order matters",
                                       "Tutorial > Path Parameters > Depends with yield"]
    assert units[0].start == 0 and all(a.end == b.start for a, b in zip(units, units[1:]))
    assert units[-1].end == len(text) and text[units[2].start:].startswith("## Order matters")
    same = heading_units(Document("d", "# Guide\n\nx\n## Install\n\ny", title="Guide", doc_type="markdown"))
    assert [u.text for u in same] == ["Guide", "Guide > Install"]  # the top heading is the title: said once
    code = heading_units(Document("c.py", "# a comment\nx = 1\n", title="c.py", doc_type="code"))
    assert [(u.text, u.start, u.end) for u in code] == [("c.py", 0, 18)]  # a code comment is no heading
    assert plain("**[`app.get()`](api.md)** _now_") == "app.get() now"


def test_a_leg_on_headings_fuses_with_chunks_and_its_offsets_are_valid(workspace):
    config = make_config(workspace, retrieval={"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf"},
                                               "leg_params": {"bm25": {"unit": "heading"}}, "top_k": 20},
                         tracking={"enabled": False})
    experiment = load_experiment(config)
    corpus = prepare_corpus(experiment, progress=False)
    corpus.close()
    headings = corpus.indexes["heading"]
    assert headings.units and all(u.chunk_id.startswith(f"{u.doc_id}#heading:") for u in headings.units)
    assert corpus.counts["units_heading_units"] == len(headings.units)
    done = run_pipeline(experiment, progress=False)
    texts = {d.doc_id: d.text for d in done.dataset.documents}
    by_heading = 0
    for qid in done.run.query_ids:
        for hit in done.run[qid]:
            for leg, passage in hit.passages.items():
                assert 0 <= passage.start < passage.end <= len(texts[hit.doc_id])
                by_heading += leg == "bm25"
    assert by_heading > 0 and done.metrics["doc_ndcg_at_10"] > 0.3
