"""Loader faults: each a DatasetError naming the file and line and what to fix; exit 2 from the CLI."""
from __future__ import annotations

import json

import pytest

from kbench.config import DatasetConfig
from kbench.datasets import DatasetError, load_dataset
from tests.reliability.inputs import (CORPUS, QUERIES, assert_nothing_written, config, copy_demo, error_lines,
                                      make_beir, read_questions, run_kbench, write_questions, write_yaml)

GOOD_CORPUS = "".join(json.dumps(r) + "\n" for r in CORPUS)
GOOD_QUERIES = "".join(json.dumps(r) + "\n" for r in QUERIES)
HEADER = "query-id\tcorpus-id\tscore\n"

BEIR_FAULTS = {
    "corpus_not_utf8": ({"corpus_text": GOOD_CORPUS.encode() + b'{"_id": "d4", "text": "caf\xe9"}\n'},
                        "corpus.jsonl:4: not UTF-8 (byte 26 of the line); save the file as UTF-8"),
    "queries_not_utf8": ({"queries_text": b'{"_id": "q1", "text": "\xff"}\n'}, "queries.jsonl:1: not UTF-8"),
    "qrels_not_utf8": ({"qrels_text": HEADER.encode() + b"q1\td2\t1\nq2\td\xe93\t1\n"}, "qrels/test.tsv:3: not UTF-8"),
    "score_not_a_number": ({"qrels_text": HEADER + "q1\td2\t1\nq2\td3\thigh\n"},
                           "qrels/test.tsv:3: score 'high' is not a whole number; the third column is the relevance"),
    "score_fraction": ({"qrels_text": HEADER + "q1\td2\t0.5\n"}, "qrels/test.tsv:2: score '0.5' is not a whole number"),
    "qrels_two_columns": ({"qrels_text": HEADER + "q1\td2\n"},
                          "qrels/test.tsv:2: 2 tab-separated columns (got 'q1' and 1 more word (not shown)); a qrels "
                          "line is query-id<TAB>"),
    "qrels_conflict": ({"qrels_text": HEADER + "q1\td2\t1\nq2\td3\t1\nq1\td2\t0\n"},
                       "qrels/test.tsv:4: query 'q1', document 'd2' judged 0 here and 1 at line 2; keep one"),
    "corpus_line_without_id": ({"corpus_text": GOOD_CORPUS + '{"text": "no id"}\n'},
                               "corpus.jsonl:4: no '_id' field; every row needs its id"),
    "corpus_line_is_array": ({"corpus_text": GOOD_CORPUS + '["d4", "text"]\n'},
                             "corpus.jsonl:4: a JSON array, not an object; each line must be one JSON object"),
    "corpus_bad_json": ({"corpus_text": GOOD_CORPUS + '{"_id": "d4", "text": "cut\n'},
                        "corpus.jsonl:4: not valid JSON (Unterminated string starting at column 23)"),
    "duplicate_document_id": ({"corpus_text": GOOD_CORPUS + '{"_id": "d2", "text": "again"}\n'},
                              "corpus.jsonl:4: document _id 'd2' repeats line 2; give every document its own _id"),
    "duplicate_query_id": ({"queries_text": GOOD_QUERIES + '{"_id": "q1", "text": "again"}\n'},
                           "queries.jsonl:3: query _id 'q1' repeats line 1"),
    "id_is_an_object": ({"corpus_text": '{"_id": {"n": 1}, "text": "x"}\n'},
                        "corpus.jsonl:1: _id must be a string or an integer (got object {'n': 1})"),
    "id_is_empty": ({"corpus_text": '{"_id": " ", "text": "x"}\n'}, "corpus.jsonl:1: _id is empty"),
    "text_is_a_list": ({"corpus_text": '{"_id": "d1", "text": ["a", "b"]}\n'},
                       "corpus.jsonl:1: text must be a string (got array ['a', 'b'])"),
    "query_without_text": ({"queries_text": '{"_id": "q1"}\n'}, "queries.jsonl:1: no 'text' field; add it"),
}


@pytest.mark.parametrize("case", sorted(BEIR_FAULTS))
def test_beir_faults_name_file_and_line(tmp_path, case):
    files, fragment = BEIR_FAULTS[case]
    beir = make_beir(tmp_path / "beir", **files)
    with pytest.raises(DatasetError) as info:
        load_dataset(DatasetConfig(path=str(beir)))
    message = str(info.value)
    assert fragment in message and "\n" not in message, message
    assert message.startswith(str(beir)), message


def test_beir_integer_ids_a_byte_order_mark_and_crlf_lines_load(tmp_path):
    corpus = "\ufeff" + "".join(json.dumps({**r, "_id": n}) + "\r\n" for n, r in enumerate(CORPUS, start=1))
    beir = make_beir(tmp_path / "beir", corpus_text=corpus, qrels_text=HEADER + "q1\t2\t1\r\nq2\t3\t1\r\n")
    dataset = load_dataset(DatasetConfig(path=str(beir)))
    assert [d.doc_id for d in dataset.documents] == ["1", "2", "3"]
    assert dataset.qrels == {"q1": {"2": 1}, "q2": {"3": 1}} and dataset.skipped == {}


def _edit_first_reference(**changes):
    def edit(rows):
        rows[0]["references"][0].update(changes)
        return rows
    return edit


def _set_first(**changes):
    def edit(rows):
        rows[0].update(changes)
        return rows
    return edit


def _without_first(key):
    def edit(rows):
        rows[0].pop(key)
        return rows
    return edit


SPAN_FAULTS = {
    "no_references": (_without_first("references"), "questions.jsonl:1: no 'references' field; give a list of"),
    "no_question": (_without_first("question"), "questions.jsonl:1: no 'question' field"),
    "malformed_line": (lambda rows: rows[:2] + ['{"query_id": "q", "question": "x", "references": [']
                       + rows[2:], "questions.jsonl:3: not valid JSON (Expecting value at column 51)"),
    "array_line": (lambda rows: rows[:1] + [[1, 2]] + rows[1:], "questions.jsonl:2: a JSON array, not an object"),
    "offset_is_a_string": (_edit_first_reference(start_index="1131"),
                           "questions.jsonl:1 references[0]: start_index must be a whole number of characters "
                           "(got string '1131')"),
    "offset_is_a_boolean": (_edit_first_reference(end_index=True),
                            "end_index must be a whole number of characters (got boolean True)"),
    "offset_missing": (lambda rows: [rows[0] | {"references": [{"doc_id": "getting-started/overview.md",
                                                                "start_index": 0}]}] + rows[1:],
                       "questions.jsonl:1 references[0]: no 'end_index' field"),
    "start_after_end": (_edit_first_reference(start_index=40, end_index=10, content=""),
                        "reference [40:10] of 'getting-started/overview.md' is empty or reversed; start_index must "
                        "be smaller than end_index"),
    "empty_span": (_edit_first_reference(start_index=40, end_index=40, content=""), "[40:40]"),
    "negative_offset": (_edit_first_reference(start_index=-5, end_index=10), "has a negative offset"),
    "past_the_end": (_edit_first_reference(start_index=10, end_index=10**6), "ends past the document ("),
    "content_mismatch": (_edit_first_reference(content="something else"),
                         "reference [1131:1313] of 'getting-started/overview.md' does not match its content"),
    "content_not_a_string": (_edit_first_reference(content=42), "content must be a string (got number 42)"),
    "unknown_document": (_edit_first_reference(doc_id="nope.md"),
                         "reference names document 'nope.md', which is not in the corpus"),
    "duplicate_query_id": (lambda rows: rows + [dict(rows[0])],
                           "questions.jsonl:99: query_id 'q001' repeats line 1; give every question its own"),
    "references_not_a_list": (_set_first(references={"doc_id": "x"}), "references must be a list (got object"),
    "reference_not_an_object": (_set_first(references=["getting-started/overview.md"]),
                                "a reference must be an object"),
}


@pytest.mark.parametrize("case", sorted(SPAN_FAULTS))
def test_span_faults_name_file_line_and_reference(tmp_path, case):
    edit, fragment = SPAN_FAULTS[case]
    demo = copy_demo(tmp_path)
    write_questions(demo, edit(read_questions(demo)))
    with pytest.raises(DatasetError) as info:
        load_dataset(DatasetConfig(path=str(demo)))
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_span_questions_not_utf8(demo_copy):
    (demo_copy / "questions.jsonl").write_bytes(b'{"query_id": "q\xff1"}\n')
    with pytest.raises(DatasetError, match=r"questions.jsonl:1: not UTF-8"):
        load_dataset(DatasetConfig(path=str(demo_copy)))


def chroma(tmp_path, csv_text: str, corpus: bytes = b"Queues hold jobs. Workers take them.\n"):
    root = tmp_path / "chroma"
    (root / "corpora").mkdir(parents=True)
    (root / "corpora" / "notes.md").write_bytes(corpus)
    (root / "questions_df.csv").write_text(csv_text, encoding="utf-8")
    return root


REFS = '"[{""content"": ""Queues hold jobs."", ""start_index"": 0, ""end_index"": 17}]"'


@pytest.mark.parametrize("csv_text, corpus, subset, fragment", [
    ("question,references\nWhat?,[]\n", None, None, "questions_df.csv:1: no column corpus_id"),
    ("question,references,corpus_id\nWhat holds jobs?,[{oops,notes\n", None, None,
     "questions_df.csv row 2: references is not valid JSON"),
    (f"question,references,corpus_id\nWhat holds jobs?,{REFS}\n", None, None,
     "row 2: 2 columns where the header has 3"),
    (f"question,references,corpus_id\nWhat holds jobs?,{REFS},notes\n", b"Queues \xff", None,
     "corpora/notes.md:1: not UTF-8"),
    (f"question,references,corpus_id\nWhat holds jobs?,{REFS},notes\n", None, ["nope"],
     "dataset.subset: no corpus 'nope'"),
    (f"question,references,corpus_id\nWhat holds jobs?,{REFS},other\n", None, None,
     "row 2 references[0]: reference names document 'other', which is not in the corpus"),
])
def test_chroma_faults(tmp_path, csv_text, corpus, subset, fragment):
    root = chroma(tmp_path, csv_text, **({"corpus": corpus} if corpus else {}))
    with pytest.raises(DatasetError) as info:
        load_dataset(DatasetConfig(path=str(root), subset=subset))
    assert fragment in str(info.value), str(info.value)


CLI_CASES = {
    "beir_not_utf8": "corpus_not_utf8",
    "beir_score": "score_not_a_number",
    "beir_no_id": "corpus_line_without_id",
    "beir_array": "corpus_line_is_array",
    "beir_duplicate_document": "duplicate_document_id",
    "beir_duplicate_query": "duplicate_query_id",
    "span_no_references": "no_references",
    "span_malformed": "malformed_line",
    "span_offset_string": "offset_is_a_string",
    "span_start_after_end": "start_after_end",
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_loader_faults_exit_2_with_one_line_and_write_nothing(tmp_path, case):
    fault = CLI_CASES[case]
    if case.startswith("beir"):
        files, fragment = BEIR_FAULTS[fault]
        dataset = make_beir(tmp_path / "beir", **files)
    else:
        edit, fragment = SPAN_FAULTS[fault]
        dataset = copy_demo(tmp_path)
        write_questions(dataset, edit(read_questions(dataset)))
    workspace = tmp_path / "ws"
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(dataset)}))),
                      "--quiet", cwd=tmp_path)
    assert done.code == 2, done.err
    (line,) = error_lines(done.err)
    assert fragment in line and "Traceback" not in done.err
    assert_nothing_written(workspace)
