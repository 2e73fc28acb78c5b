"""Properties of the loaders over generated hostile values: a clear DatasetError or correct data, nothing else."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kbench.config import DatasetConfig
from kbench.datasets import DatasetError, load_dataset
from tests.reliability.inputs import make_beir

TEXT = "Queues hold jobs until a worker takes them. Failed jobs are retried with backoff.\n"
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                       max_size=3), max_leaves=6)
OFFSETS = st.one_of(st.integers(-5, len(TEXT) + 5), st.integers(-10**20, 10**20), JSON_VALUES)


def span_dataset(root: Path, reference: dict) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text(TEXT, encoding="utf-8")
    rows = [{"query_id": "q1", "question": "What holds jobs?", "references": [reference]}]
    (root / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


@settings(max_examples=200, deadline=None)
@given(start=OFFSETS, end=OFFSETS, with_content=st.booleans(), content=st.none() | st.text(max_size=20))
def test_a_loaded_span_is_always_a_real_non_empty_range_with_its_content(start, end, with_content, content):
    reference = {"doc_id": "notes.md", "start_index": start, "end_index": end}
    if with_content:
        ok = isinstance(start, int) and isinstance(end, int) and not isinstance(start, bool) \
            and not isinstance(end, bool)
        reference["content"] = TEXT[start:end] if ok and content is None else content
    with tempfile.TemporaryDirectory() as tmp:
        try:
            dataset = load_dataset(DatasetConfig(path=str(span_dataset(Path(tmp) / "d", reference))))
        except DatasetError as e:
            assert str(e).startswith("questions.jsonl:1 references[0]: ") and "\n" not in str(e), str(e)
            return
    (span,) = dataset.spans["q1"]
    assert 0 <= span.start < span.end <= len(TEXT)
    if with_content:
        assert TEXT[span.start:span.end] == reference["content"]


@settings(max_examples=200, deadline=None)
@given(score=st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\t\n\r"),
                     max_size=12) | st.sampled_from(["nan", "inf", "-1", "0", "1e3", "2.0", "1_0", " 3 "]))
def test_a_qrels_score_is_a_whole_number_or_a_clear_error(score):
    with tempfile.TemporaryDirectory() as tmp:
        beir = make_beir(Path(tmp) / "beir", qrels_text=f"query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td3\t{score}\n")
        try:
            dataset = load_dataset(DatasetConfig(path=str(beir)))
        except DatasetError as e:
            assert "qrels/test.tsv:3: " in str(e) and "\n" not in str(e), str(e)
            return
    as_number = float(score.strip())  # accepted: a whole number, with the whitespace a cell may carry (\x1f too)
    assert as_number.is_integer() and score.strip().lstrip("+-").replace(".", "", 1).isascii(), score
    if as_number > 0:
        assert dataset.qrels["q2"] == {"d3": int(as_number)}
    else:
        assert dataset.skipped == {"qrels_not_relevant": ["qrels/test.tsv:3"],
                                   "no_relevant_judgement": ["queries.jsonl:2 (query q2)"]}
