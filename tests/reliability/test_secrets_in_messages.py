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
