"""kbench gate on a SciFact sample (300 abstracts, 40 test claims, MiniLM): an equal candidate passes, postgres_fts
against vector fails, a slightly worse candidate within the margin passes, bad input exits 2."""
from __future__ import annotations

import json

import pytest
import yaml

from kbench.cli import main
from kbench.compare.gate import gate, resolve_side
from tests.conftest import link_shared_cache

SAMPLE = {"name": "scifact", "max_documents": 300, "max_queries": 40}


@pytest.fixture(scope="module")
def configs(tmp_path_factory, shared_cache_workspace):
    root = tmp_path_factory.mktemp("gate")
    ws = link_shared_cache(root / "ws", shared_cache_workspace) if (root / "ws").mkdir() is None else None

    def write(name, retrieval, dataset=SAMPLE):
        data = {"name": name, "workspace": str(ws), "dataset": dataset, "chunking": {"strategy": "none"},
                "retrieval": {"top_k": 10, "latency": "batch", **retrieval}, "evaluation": {"k": [10]},
                "tracking": {"experiment": "gate"}}
        path = root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return str(path)

    return {
        "baseline": write("vector", {"legs": ["vector"]}),
        "equal": write("vector-again", {"legs": ["vector"]}),  # same run key: the baseline's run is read back
        "fts": write("postgres-fts", {"legs": ["postgres_fts"]}),
        # top 8 instead of 10: nDCG@10 can only drop, and only on the claims whose relevant abstract sits at 9-10
        "top8": write("vector-top8", {"legs": ["vector"], "top_k": 8}),
        "demo": write("demo-bm25", {"legs": ["bm25"]}, dataset={"name": "demo", "max_queries": 6}),
        "root": root,
    }


def run_cli(args, capsys):
    capsys.readouterr()  # what earlier steps printed is not this command's output
    try:
        code = main(["gate", *args])
    except SystemExit as e:  # a user error: one line on stderr and exit 2, from the CLI's one handler
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_equal_candidate_passes_and_reuses_the_finished_run(configs, capsys):
    out_json = configs["root"] / "equal.json"
    code, md, err = run_cli([configs["baseline"], configs["equal"], "--json", str(out_json)], capsys)
    verdict = json.loads(out_json.read_text())
    assert code == 0 and verdict["passed"] and verdict["exit_code"] == 0
    assert verdict["candidate"]["how"] == "reused" and "reusing finished run" in err
    (metric,) = verdict["metrics"]
    assert metric["metric"] == "doc_ndcg_at_10" and metric["diff"] == 0.0 and metric["verdict"] == "pass"
    assert verdict["n_queries"] == 40
    assert verdict["baseline"]["fingerprint"]["dataset_hash"] == verdict["candidate"]["fingerprint"]["dataset_hash"]
    assert "kbench gate passed" in md and "| doc_ndcg_at_10 |" in md


def test_postgres_fts_against_vector_fails(configs, capsys):
    summary = configs["root"] / "summary.md"
    code, md, _ = run_cli([configs["baseline"], configs["fts"], "--summary", str(summary), "--json", "-"], capsys)
    verdict = json.loads(md)
    (metric,) = verdict["metrics"]
    assert code == 1 and not verdict["passed"] and metric["verdict"] == "FAIL"
    assert metric["diff"] < -0.01 and metric["p_adjusted"] < 0.05
    assert "kbench gate failed" in summary.read_text()


def test_worse_within_the_margin_passes_and_past_it_fails(configs, capsys):
    base = resolve_side(configs["baseline"])
    top8 = resolve_side(configs["top8"])
    within = gate(base, top8, margin=0.05)
    (v,) = within.verdicts
    assert v.diff < 0 and v.diff > -0.05 and within.passed  # worse, but by less than the margin
    # the same candidate gated with every metric by run id, no margin: recall@10 drops for sure
    store = f"sqlite:///{configs['root'] / 'ws' / 'mlflow.db'}"
    code, md, _ = run_cli([base.run_id, top8.run_id, "--tracking-uri", store, "--margin", "0", "--metric", "doc_recall_at_10",
                           "--metric", "doc_ndcg_at_10", "--json", "-"], capsys)
    verdict = json.loads(md)
    assert [m["metric"] for m in verdict["metrics"]] == ["doc_recall_at_10", "doc_ndcg_at_10"]
    assert all(m["diff"] <= 0 for m in verdict["metrics"])
    assert code == verdict["exit_code"] == (0 if verdict["passed"] else 1)


def test_bad_input_exits_2(configs, capsys):
    code, _, err = run_cli([configs["baseline"], "0123456789abcdef0123456789abcdef"], capsys)
    assert code == 2 and "not a config file" in err
    code, _, err = run_cli([configs["baseline"], configs["equal"], "--metric", "no_such_metric"], capsys)
    assert code == 2 and "no_such_metric" in err
    code, _, err = run_cli([configs["baseline"], configs["demo"]], capsys)
    assert code == 2 and "datasets differ" in err
    code, _, err = run_cli([configs["baseline"], configs["equal"], "--margin", "-1"], capsys)
    assert code == 2 and "--margin" in err


def test_a_chunk_size_change_gated_on_a_top_k_metric_says_so():
    """Issue 53 item 2: the gate passed a chunk-size change on its top-k default (+0.0430) that a 500-token budget
    failed (-0.1517); the gate's note says what it compared and offers the budget metric."""
    import pandas as pd

    from kbench.compare.gate import GateSide

    def side(label, chunk_size, ndcg, budget):
        frame = pd.DataFrame({"query_id": [f"q{i}" for i in range(6)], "chunk_ndcg_at_10": ndcg,
                              "span_recall_at_budget_500": budget}).set_index("query_id")
        return GateSide(f"{label}.yaml", label, frame, {"dataset_hash": "d"}, chunking={"strategy": "recursive",
                                                                                          "chunk_size": chunk_size})

    small = side("small", "1000", [0.5, 0.6, 0.4, 0.7, 0.5, 0.6], [0.4, 0.5, 0.3, 0.6, 0.4, 0.5])
    large = side("large", "2000", [0.6, 0.6, 0.5, 0.7, 0.6, 0.6], [0.2, 0.3, 0.2, 0.4, 0.2, 0.3])
    note = ("the two chunk differently (chunk_size 1000 against 2000) and chunk_ndcg_at_10 counts chunks, not tokens: "
            "longer chunks hold more of an answer in the same top k, so a top-k gate favours them; gate a budget metric "
            "too: --metric span_recall_at_budget_500 (both configs with evaluation.budgets: [500])")
    assert note in gate(small, large, margin=0.01).notes
    assert not any("chunk differently" in n for n in gate(small, large, metrics=["span_recall_at_budget_500"]).notes)
    assert not any("chunk differently" in n for n in gate(small, side("same", "1000", [0.5] * 6, [0.4] * 6)).notes)
    assert f"- note: {note}" in gate(small, large).markdown()
