"""What a recommendation rests on, read from logged runs: the embedder's language warning and a keyword leg analyzing
another language than the documents, repeated beside the pick by `kbench compare`; a generated set's available
questions and altered corpus from its manifest."""
from __future__ import annotations

import json

import numpy as np
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.compare.evidence import analyzer_languages, config_warnings, main_language, set_evidence
from kbench.datasets.synthetic import build_from_source
from kbench.tracking import tags as tag
from tests.compare.test_sets import _hand_built_sweep
from tests.conftest import DEMO

COVERAGE = ("embedding model all-MiniLM-L6-v2 covers en: 3% of the documents (the rest: es 96%), so its vectors rank "
            "text it was not trained on")
SPANISH = {tag.LANGUAGE_DOCUMENTS: "es 96% (119), en 3% (4)", tag.LANGUAGE_WARNING: COVERAGE}
ENGLISH_BM25 = {"retrieval.legs": '["vector", "bm25"]', "retrieval.leg_params.bm25.stemmer": "snowball_english",
                "retrieval.leg_params.bm25.language": "null"}


def test_a_run_on_spanish_pages_warns_of_its_embedder_and_its_english_analyzer():
    assert main_language("es 96% (119), en 3% (4)") == ("es", 0.96)
    assert analyzer_languages(ENGLISH_BM25) == {"bm25": "english"}
    assert analyzer_languages({**ENGLISH_BM25, "retrieval.leg_params.bm25.language": "spanish"}) == {"bm25": "spanish"}
    assert analyzer_languages({**ENGLISH_BM25, "retrieval.leg_params.bm25.language": "none"}) == {}
    assert analyzer_languages({"retrieval.legs": '["postgres_fts"]',
                               "retrieval.leg_params.postgres_fts.config": "simple"}) == {}
    warned = config_warnings(SPANISH, ENGLISH_BM25)
    assert warned == [COVERAGE, "the bm25 leg analyzes english (its stemmer and stop words) while 96% of the documents "
                                "are es; set retrieval.leg_params.bm25.language: spanish"]
    spanish_leg = {**ENGLISH_BM25, "retrieval.leg_params.bm25.language": "spanish"}
    assert config_warnings({tag.LANGUAGE_DOCUMENTS: "es 96% (119), en 3% (4)"}, spanish_leg) == []
    assert config_warnings({tag.LANGUAGE_DOCUMENTS: "en 100% (32)"}, ENGLISH_BM25) == []


def test_kbench_compare_repeats_the_picks_warnings_beside_the_recommendation(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("evidence", artifact_location=str(tmp_path / "mlruns"))
    rng = np.random.default_rng(4)
    base = rng.uniform(0.3, 0.6, 30)
    parent = _hand_built_sweep(client, experiment_id, "fastapi-es", {"hybrid": base + 0.2, "vector": base}, tmp_path)
    for child in client.search_runs([experiment_id], f"tags.`{tag.SWEEP_ROLE}` = 'child'"):
        for key, value in SPANISH.items():
            client.set_tag(child.info.run_id, key, value)
        for key, value in ENGLISH_BM25.items():
            client.log_param(child.info.run_id, key, value)
    assert main(["compare", "--sweep", parent, "--tracking-uri", uri, "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    after = printed[printed.index("recommendation: hybrid"):]
    assert f"  warning on hybrid: {COVERAGE}" in after
    assert "  warning on hybrid: the bm25 leg analyzes english (its stemmer and stop words) while 96% of the " \
           "documents are es" in after
    assert "- warning on hybrid: " in (tmp_path / "cmp" / "report.md").read_text()


def test_a_generated_sets_manifest_gives_its_available_questions_and_altered_corpus(tmp_path):
    build_from_source(str(DEMO / "docs"), tmp_path / "set", method="heading", max_questions=10, seed=0)
    available, corpus = set_evidence(str(tmp_path / "set"))
    manifest = json.loads((tmp_path / "set" / "manifest.json").read_text())
    assert available == manifest["report"]["available"] > 10
    assert corpus.startswith("the indexed copy lost ") and "markdown headings" in corpus
    assert set_evidence(str(DEMO)) == (None, "")  # real questions: no manifest, nothing altered
    assert set_evidence(None) == (None, "")
