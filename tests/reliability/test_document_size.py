"""One document must not cost minutes and gigabytes: a document longer than dataset.max_document_chars is
refused with the limit named (a 50 MB single line with chunking none ran ten minutes at 7 GB)."""
from __future__ import annotations

import json

import pytest

from kbench.config import DatasetConfig, load_experiment
from kbench.datasets import DatasetError, load_dataset
from tests.reliability.inputs import CORPUS, assert_nothing_written, config, error_lines, make_beir, run_kbench, \
    write_yaml

LIMIT = 5_000_000


def huge_corpus(chars: int) -> str:
    big = {"_id": "huge", "title": "", "text": "word " * (chars // 5)}
    return "".join(json.dumps(row) + "\n" for row in [*CORPUS, big])


def test_cli_a_single_line_document_over_the_limit_with_chunking_none_exits_2(tmp_path):
    beir = make_beir(tmp_path / "beir", corpus_text=huge_corpus(LIMIT + 1_000_000))
    workspace = tmp_path / "ws"
    cfg = config(workspace, {"path": str(beir)}, chunking={"strategy": "none"})
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", cfg)), "--quiet", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    assert error_lines(done.err) == [
        f"kbench: error: {beir}: 1 document(s) longer than dataset.max_document_chars (5,000,000 characters), e.g. "
        "'huge' with 6,000,000; split them, leave them out, or raise dataset.max_document_chars"]
    assert_nothing_written(workspace)


@pytest.mark.parametrize("chars, limit, refused", [(1000, 999, True), (1000, 1000, False), (1000, 1001, False)])
def test_the_limit_is_a_knob_and_its_edge_is_inclusive(tmp_path, chars, limit, refused):
    beir = make_beir(tmp_path / "beir", corpus=[*CORPUS, {"_id": "d9", "title": "", "text": "x" * chars}])
    cfg = DatasetConfig(path=str(beir), max_document_chars=limit)
    if refused:
        with pytest.raises(DatasetError, match=rf"longer than dataset.max_document_chars \({limit:,} characters\)"):
            load_dataset(cfg)
    else:
        assert max(len(d.text) for d in load_dataset(cfg).documents) == chars


def test_the_limit_does_not_change_the_run_key():
    assert load_experiment({"dataset": {"name": "demo"}}).run_key() == \
        load_experiment({"dataset": {"name": "demo", "max_document_chars": 10}}).run_key()
