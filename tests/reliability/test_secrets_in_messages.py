"""No secret and no file's content in a message: one line naming the problem and the fix, exit 2, nothing written.

Before: a ``dataset.judged_qrels`` path to any readable file quoted its first line (``/etc/shadow``'s included);
``api_key_env`` given the key itself printed the key; a ``base_url`` with credentials was printed whole; a DSN
psycopg refuses a value of ended in a traceback quoting it.
"""
from __future__ import annotations

import pytest

from tests.reliability.inputs import assert_nothing_written, config, error_lines, make_beir, run_kbench, write_yaml

SHADOW = "root:$6$S3CRETsalt$Zq9fakehashZq9fakehashZq9fakehash:19800:0:99999:7:::\n"
KEY = "sk-proj-S3CRETkeyS3CRETkeyS3CRETkey0123456789"


def refused_run(tmp_path, **sections):
    workspace = tmp_path / "ws"
    dataset = sections.pop("dataset", {"path": str(make_beir(tmp_path / "beir"))})
    cfg = write_yaml(tmp_path / "c.yaml", config(workspace, dataset, **sections))
    done = run_kbench("run", str(cfg), "--quiet", cwd=tmp_path, timeout=120, env={"KBENCH_TEST_SET_KEY": "x"})
    assert done.code == 2, done.err[-3000:]
    assert "Traceback" not in done.err, done.err[-3000:]
    (line,) = error_lines(done.err)
    assert_nothing_written(workspace)
    return line, done


@pytest.mark.parametrize("content", [SHADOW, "q1 0 d2 " + SHADOW, SHADOW.encode() + b"\xff\xfe\x00binary"])
def test_judged_qrels_naming_another_file_never_quotes_it(tmp_path, content):
    shadow = tmp_path / "shadow"
    shadow.write_bytes(content if isinstance(content, bytes) else content.encode())
    line, done = refused_run(tmp_path, dataset={"path": str(make_beir(tmp_path / "beir")),
                                                "judged_qrels": str(shadow)})
    assert "S3CRET" not in done.err + done.out, line
    assert line.startswith(f"kbench: error: dataset.judged_qrels: {shadow}"), line
    assert ("is not UTF-8 text" if isinstance(content, bytes) else "expected 'qid 0 docid grade'") in line, line
    assert "give the --out of `kbench judge`" in line


def rerank(**params) -> dict:
    return {"enabled": True, "strategy": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", **params}


def test_an_api_key_given_as_api_key_env_is_never_repeated(tmp_path):
    line, done = refused_run(tmp_path, rerank=rerank(api_key_env=KEY))
    assert "S3CRET" not in done.err + done.out, line
    assert "rerank.api_key_env: names no variable that is set" in line and "give its NAME here" in line, line
    synthetic = run_kbench("datasets", "build", "synthetic", str(make_beir(tmp_path / "src")), "--method", "llm",
                           "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", KEY,
                           "--out", str(tmp_path / "set"), "--workspace", str(tmp_path / "ws2"), cwd=tmp_path)
    assert synthetic.code == 2 and "S3CRET" not in synthetic.err + synthetic.out, synthetic.err[-2000:]
    assert "synthetic.api_key_env: names no variable that is set" in synthetic.err, synthetic.err[-2000:]


def test_a_base_url_with_credentials_is_refused_and_never_printed_whole(tmp_path):
    url = "https://kbench:S3CRETpassword@llm.example.org/v1?api-key=S3CRETquery"
    line, done = refused_run(tmp_path, rerank=rerank(base_url=url, api_key_env="KBENCH_TEST_SET_KEY"))
    assert "S3CRET" not in done.err + done.out, line
    assert "rerank.base_url: https://***@llm.example.org/v1?*** carries a password" in line, line
    synthetic = run_kbench("datasets", "build", "synthetic", str(make_beir(tmp_path / "src")), "--method", "llm",
                           "--model", "m", "--base-url", url, "--api-key-env", "KBENCH_TEST_SET_KEY",
                           "--out", str(tmp_path / "set"), "--workspace", str(tmp_path / "ws2"), cwd=tmp_path,
                           env={"KBENCH_TEST_SET_KEY": "x"})
    assert synthetic.code == 2 and "S3CRET" not in synthetic.err + synthetic.out, synthetic.err[-2000:]
    assert not (tmp_path / "set").exists()


def test_a_dsn_psycopg_refuses_a_value_of_is_one_line_without_it(tmp_path):
    line, done = refused_run(tmp_path, retrieval={"legs": ["vector"], "top_k": 5},
                             store={"backend": "pgvector",
                                    "dsn": "postgresql://kb:S3CRETpw@127.0.0.1/kb?connect_timeout=S3CRETvalue"})
    assert "S3CRET" not in done.err + done.out, line
    assert "store.dsn: PostgreSQL at 127.0.0.1:5432, database kb, user kb: psycopg refuses a parameter" in line, line


SECRET_LINE = "export OPENAI_API_KEY=sk-live-S3CRETkeyS3CRETkey0123456789"


def reader_cases(tmp_path):
    """Each reader of a file a user names, given a file holding a key-like secret on a line it cannot read."""
    from types import SimpleNamespace

    from kbench.config import read_yaml_mapping
    from kbench.datasets.beir import read_qrels
    from kbench.datasets.reading import iter_jsonl
    from kbench.datasets.registry import read_judged_qrels
    from kbench.labelling.labels import read_qrels as read_labels
    from kbench.retrieval.text.stopwords import read_list_file
    from kbench.tracking.mlflow_feedback import read_judgements

    def file(name: str, text: str):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return {
        "qrels": lambda: read_qrels(file("test.tsv", f"query-id\tcorpus-id\tscore\n{SECRET_LINE}\n")),
        "qrels score": lambda: read_qrels(file("score.tsv", "q\td\tscore\nq1\td1\tsk-live-S3CRETkeyS3CRETkey\n")),
        "stop words": lambda: read_list_file(str(file("secret.env", f"the\n{SECRET_LINE}\n"))),
        "judged qrels": lambda: read_judged_qrels(file("judged.qrels", SECRET_LINE + "\n")),
        "labels": lambda: read_labels(file("labels.qrels", SECRET_LINE + "\n"), SimpleNamespace(pairs=[])),
        "judgements": lambda: read_judgements(file("judged.qrels.json", SECRET_LINE + "\n")),
        "question set": lambda: list(iter_jsonl(file("questions.jsonl", SECRET_LINE + "\n"), "{}")),
        "config": lambda: read_yaml_mapping(file("c.yaml", SECRET_LINE + "\n")),
        "config mapping": lambda: read_yaml_mapping(file("d.yaml", f"dataset:\n  {SECRET_LINE}: [\n")),
    }


@pytest.mark.parametrize("reader", ["qrels", "qrels score", "stop words", "judged qrels", "labels", "judgements",
                                    "question set", "config", "config mapping"])
def test_no_reader_quotes_a_secret_from_a_file_it_cannot_read(tmp_path, reader):
    """Issue 45: a stop-word file with a bad line was quoted in the error (`secret.env:2: 2 words on one line
    ('export OPENAI_API_KEY=sk-live-...')`), the class fixed for qrels files. Every reader goes through
    kbench.errors.quoted_token: at most a short, harmless first word."""
    from kbench.errors import UserError

    with pytest.raises(UserError) as e:
        reader_cases(tmp_path)[reader]()
    message = str(e.value)
    assert "S3CRET" not in message and "sk-live" not in message and "OPENAI_API_KEY" not in message, message
    assert len(message.splitlines()) == 1, message


def test_a_quoted_token_is_a_short_harmless_first_word_or_nothing():
    from kbench.errors import quoted_token

    assert quoted_token(SECRET_LINE) == "'export' and 1 more word (not shown)"
    assert quoted_token("the quick brown") == "'the' and 2 more words (not shown)"
    assert quoted_token("sk-live-S3CRET") == "a 14-character word (not shown)"
    assert quoted_token("OPENAI_API_KEY=x") == "a 16-character word (not shown)"
    assert quoted_token("x" * 40) == "a 40-character word (not shown)"
    assert quoted_token("  ") == "an empty value"


def test_a_config_value_that_holds_a_key_is_never_echoed(tmp_path):
    from kbench.config import load_experiment
    from kbench.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text("dataset:\n  name: demo\nchunking:\n  chunk_size: sk-live-S3CRETkeyS3CRETkey\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_experiment(path)
    assert "S3CRET" not in str(e.value) and "chunking.chunk_size" in str(e.value), str(e.value)
