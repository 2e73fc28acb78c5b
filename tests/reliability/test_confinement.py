"""Nothing outside the folder a config names is read: links out are skipped and counted, or refused."""
from __future__ import annotations

import json
import logging
import os

import pytest

from kbench.config import ConfigError, DatasetConfig, load_experiment
from kbench.datasets import DatasetError, load_dataset
from kbench.sources.folder import FolderSource
from tests.reliability.inputs import (assert_nothing_written, config, error_lines, make_beir, read_questions,
                                      run_kbench, write_yaml)

SECRET = "SECRET-0f3a9c: this text lives outside every root"


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    (folder / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    (folder / "sub" / "more.md").write_text(f"# More\n\n{SECRET}\n")
    return folder


def test_a_folder_source_skips_links_out_of_its_root_and_never_reads_them(tmp_path, outside):
    root = tmp_path / "root"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "intro.md").write_text("# Intro\n\nQueues and workers.\n")
    os.symlink(outside / "secret.md", root / "guides" / "leak.md")
    os.symlink("/etc/passwd", root / "passwd.txt")
    os.symlink(outside / "sub", root / "linked-folder", target_is_directory=True)
    os.symlink(root / "guides" / "intro.md", root / "alias.md")  # stays inside: read
    os.symlink(root / "missing.md", root / "dangling.md")
    os.symlink("loop.md", root / "loop.md")
    documents, skipped = FolderSource(root).load()
    assert sorted(d.doc_id for d in documents) == ["alias.md", "guides/intro.md"]
    assert skipped == {"outside_root": ["guides/leak.md", "linked-folder", "passwd.txt"],
                       "broken_link": ["dangling.md", "loop.md"]}
    assert not any(SECRET in d.text or "root:" in d.text for d in documents)


def test_a_span_dataset_counts_a_link_out_logs_it_and_strict_refuses_it(demo_copy, outside, caplog):
    os.symlink(outside / "secret.md", demo_copy / "docs" / "guides" / "leak.md")
    os.symlink("/etc/passwd", demo_copy / "docs" / "passwd.md")
    with caplog.at_level(logging.WARNING, logger="kbench.datasets.registry"):
        dataset = load_dataset(DatasetConfig(path=str(demo_copy)))
    assert dataset.skipped == {"outside_root": ["guides/leak.md", "passwd.md"]}
    assert len(dataset.documents) == 32 and not any(SECRET in d.text for d in dataset.documents)
    assert "2 links leading outside the folder (not read) [outside_root] (guides/leak.md, passwd.md)" in caplog.text
    with pytest.raises(DatasetError, match=r"dataset.strict refuses 2 links leading outside the folder"):
        load_dataset(DatasetConfig(path=str(demo_copy), strict=True))


def test_a_question_about_a_linked_out_document_is_refused_saying_why(demo_copy, outside):
    target = demo_copy / "docs" / "getting-started" / "overview.md"
    (outside / "overview.md").write_text(target.read_text())
    target.unlink()
    os.symlink(outside / "overview.md", target)
    with pytest.raises(DatasetError) as info:
        load_dataset(DatasetConfig(path=str(demo_copy)))
    assert "questions.jsonl:1 references[0]: reference names document 'getting-started/overview.md'" in str(info.value)
    assert "it links outside the dataset folder and was not read" in str(info.value)


@pytest.mark.parametrize("linked", ["docs", "questions.jsonl"])
def test_span_dataset_files_that_link_out_are_refused(demo_copy, tmp_path, linked):
    moved = tmp_path / "elsewhere"
    (demo_copy / linked).rename(moved)
    os.symlink(moved, demo_copy / linked)
    with pytest.raises(DatasetError, match=rf"{linked}: a link to .*elsewhere, outside the dataset folder"):
        load_dataset(DatasetConfig(path=str(demo_copy)))


@pytest.mark.parametrize("linked", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_beir_files_that_link_out_are_refused(tmp_path, linked):
    beir = make_beir(tmp_path / "beir")
    moved = tmp_path / "moved"
    (beir / linked).rename(moved)
    os.symlink(moved, beir / linked)
    with pytest.raises(DatasetError, match=f"{linked}: a link to .*moved, outside the dataset folder"):
        load_dataset(DatasetConfig(path=str(beir)))


def test_a_chroma_corpus_that_links_out_is_skipped_and_its_questions_refused(tmp_path, outside):
    root = tmp_path / "chroma"
    (root / "corpora").mkdir(parents=True)
    (root / "corpora" / "notes.md").write_text("Queues hold jobs. Workers take them.\n")
    os.symlink(outside / "secret.md", root / "corpora" / "leak.md")
    refs = json.dumps([{"content": "Queues hold jobs.", "start_index": 0, "end_index": 17}]).replace('"', '""')
    (root / "questions_df.csv").write_text(f'question,references,corpus_id\nWhat holds jobs?,"{refs}",notes\n')
    dataset = load_dataset(DatasetConfig(path=str(root)))
    assert [d.doc_id for d in dataset.documents] == ["notes"]
    assert dataset.skipped == {"outside_root": ["corpora/leak.md"]}
    with (root / "questions_df.csv").open("a") as f:
        f.write(f'What is secret?,"{refs}",leak\n')
    with pytest.raises(DatasetError, match="row 3 references.0.: reference names document 'leak'.*links outside"):
        load_dataset(DatasetConfig(path=str(root)))


def test_cli_run_counts_the_link_and_nothing_of_it_reaches_the_cache_or_the_run(demo_copy, outside, tmp_path):
    os.symlink(outside / "secret.md", demo_copy / "docs" / "leak.md")
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(demo_copy)}))
    done = run_kbench("run", str(path), "--quiet", "--no-log", cwd=tmp_path)
    assert done.code == 0, done.err
    assert "left out 1 links leading outside the folder (not read) [outside_root] (leak.md)" in done.err
    (run_dir,) = (workspace / "runs").iterdir()
    assert json.loads((run_dir / "stages.json").read_text())["counts"]["skipped_outside_root"] == 1
    for file in [*(workspace / "cache").rglob("*"), *run_dir.rglob("*")]:
        assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file


def test_cli_strict_refuses_the_link_and_writes_nothing(demo_copy, outside, tmp_path):
    os.symlink(outside / "secret.md", demo_copy / "docs" / "leak.md")
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(demo_copy), "strict": True}))
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 2
    (line,) = error_lines(done.err)
    assert "dataset.strict refuses 1 links leading outside the folder (not read) [outside_root] (leak.md)" in line
    assert_nothing_written(workspace)


def test_cli_chunk_lists_links_out_with_the_skipped_files(tmp_path, outside):
    root = tmp_path / "folder"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nQueues.\n")
    os.symlink(outside / "secret.md", root / "leak.md")
    done = run_kbench("chunk", str(root), "--chunker", "fixed", "--show", "1", cwd=tmp_path)
    assert done.code == 0, done.err
    assert "skipped files: outside_root 1" in done.out and SECRET not in done.out


def test_questions_still_match_after_the_links_are_skipped(demo_copy, outside):
    os.symlink(outside / "secret.md", demo_copy / "docs" / "leak.md")
    dataset = load_dataset(DatasetConfig(path=str(demo_copy)))
    assert [q.query_id for q in dataset.queries] == [row["query_id"] for row in read_questions(demo_copy)]


@pytest.mark.parametrize("split", ["../../outside/qrels", "/etc/passwd", "a/b", ".hidden", ""])
def test_a_split_is_a_file_name_never_a_path(tmp_path, split):
    beir = make_beir(tmp_path / "beir")
    with pytest.raises(ConfigError, match=r"dataset.split: not a split name \(got .*\); give the name of a file in "):
        load_experiment({"dataset": {"path": str(beir), "split": split}})


def test_cli_a_split_path_exits_2_and_writes_nothing(tmp_path):
    beir = make_beir(tmp_path / "beir")
    (tmp_path / "judgements.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    workspace = tmp_path / "ws"
    data = config(workspace, {"path": str(beir), "split": "../../judgements"})
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", data)), "--quiet", cwd=tmp_path)
    assert done.code == 2 and "dataset.split: not a split name (got '../../judgements')" in done.err
    assert_nothing_written(workspace)
