"""Issue 51, the files `kbench label` reads and writes, without runs: any id written to the labels file reads back
(a property test over path strings), and every malformed judged-labels file (`--judged`) is one line and exit 2."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbench.cli import main as kbench_main
from kbench.errors import UserError
from kbench.labelling.labels import decode_id, encode_id, qrels_line, read_qrels
from kbench.labelling.pool import judged_grades

GRADES = {0: "no", 1: "related", 2: "partly", 3: "exactly"}
PATHS = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)  # any path a folder may hold


def _pool(rows):
    return SimpleNamespace(pairs=[SimpleNamespace(query_id=q, pair_id=p) for q, p, _ in rows], grades=GRADES,
                           scale="graded")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(PATHS, st.builds(lambda doc, a, b: f"{doc}@{a}-{a + b}", PATHS, st.integers(0, 10**6),
                                           st.integers(0, 10**4)), st.sampled_from(list(GRADES))),
                min_size=1, max_size=6, unique_by=lambda row: (row[0], row[1])))
def test_any_id_kbench_writes_reads_back(rows):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "labels.qrels"
        path.write_bytes("".join(qrels_line(q, p, g) for q, p, g in rows).encode("utf-8"))
        lines = path.read_text(encoding="utf-8").split("\n")
        assert lines[-1] == "" and all(len(line.split()) == 4 and line.isprintable() for line in lines[:-1])
        assert read_qrels(path, _pool(rows)) == {i: g for i, (_, _, g) in enumerate(rows)}


@given(PATHS)
def test_an_id_is_encoded_only_where_it_must_be(text):
    assert decode_id(encode_id(text)) == text
    if text.isprintable() and not any(c.isspace() for c in text) and "%" not in text:
        assert encode_id(text) == text  # a plain id is written as it is: other tools read the file as TREC qrels


def test_hostile_paths_are_written_readably():
    assert encode_id("docs/with space/<img src=x onerror=alert(1)>.md@0-10") == \
        "docs/with%20space/<img%20src=x%20onerror=alert(1)>.md@0-10"
    assert encode_id("tab\there 100%.md") == "tab%09here%20100%25.md"
    assert encode_id("naïve/日本語.md") == "naïve/日本語.md" and encode_id("new\nline") == "new%0Aline"


SECRET = "OPENAI_API_KEY=sk-live-S3CRETkeyS3CRETkey"
ONE = {"query_id": "q1", "doc_id": "d.md", "start": 0, "end": 40, "grade": 2}
JUDGED_BAD = {
    "a text grade": ({"judgements": [{**ONE, "grade": "high"}]}, "judgements[0]: \"grade\" is 'high'"),
    "a text offset": ({"judgements": [{**ONE, "start": "0"}]}, "judgements[0]: \"start\" is '0', not a whole number"),
    "judgements not a list": ({"judgements": {"q1": 2}}, "\"judgements\" is a JSON object, not a list"),
    "a list root": ([ONE], "a JSON array where `kbench judge` writes an object"),
    "a missing query_id": ({"judgements": [{k: v for k, v in ONE.items() if k != "query_id"}]},
                           "judgements[0]: \"query_id\" is missing"),
    "a judgement a number": ({"judgements": [ONE, 7]}, "judgements[1] is a JSON number, not an object"),
    "a grade of 9": ({"judgements": [{**ONE, "grade": 9}]}, "\"grade\" is 9, not a grade 0-3"),
    "end before start": ({"judgements": [{**ONE, "start": 50}]}, "start 50 and end 40 are no character range"),
    "a key as a grade": ({"judgements": [{**ONE, "grade": SECRET}]}, "judgements[0]: \"grade\" is a"),
    "not JSON": ("{\"judgements\": [", "not JSON"),
}


@pytest.mark.parametrize("case", list(JUDGED_BAD))
def test_every_malformed_judged_labels_file_is_one_line_and_exit_2(case, tmp_path, capsys):
    content, expected = JUDGED_BAD[case]
    side = tmp_path / "judged.qrels.json"
    side.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(UserError) as e:
        judged_grades(tmp_path / "judged.qrels")
    assert expected in str(e.value) and "\n" not in str(e.value) and "S3CRET" not in str(e.value)
    try:  # the command reads --judged before any run: the runs here need not exist
        code = kbench_main(["label", "run-a", "run-b", "--judged", str(tmp_path / "judged.qrels"),
                            "--labels", str(tmp_path / "labels.qrels")])
    except SystemExit as stopped:
        code = stopped.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err and "Traceback" not in err, err
    assert not (tmp_path / "labels.qrels").exists()  # nothing half-written


def test_a_judged_labels_file_kbench_judge_writes_reads(tmp_path):
    side = tmp_path / "judged.qrels.json"
    side.write_text(json.dumps({"judge_model": "qwen", "judgements": [ONE, {**ONE, "start": 40, "end": 80,
                                                                               "grade": None}]}))
    grades, model = judged_grades(tmp_path / "judged.qrels")
    assert grades == {("q1", "d.md", 0, 40): 2} and model == "judge qwen (judged.qrels.json)"
