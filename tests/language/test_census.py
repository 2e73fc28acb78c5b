"""The language census (kbench/language) on real pages of fastapi_docs: detection, the census lines, the coverage
warning of a run (French pages with MiniLM warn once, English ones do not, a BM25-only run says nothing), its
MLflow tags and metrics, and the ``language`` slice of a set asked in two languages."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbench import tracking
from kbench.config import load_experiment
from kbench.datasets.synthetic import build_from_source
from kbench.language import census as census_module
from kbench.language.census import census_lines, coverage_of, take_census
from kbench.language.detect import UNDETERMINED, detect_language, prose
from kbench.paths import shared_datasets_dir
from kbench.records import Document, Query
from kbench.runner import run_experiment
from tests.conftest import make_config

FASTAPI = shared_datasets_dir() / "fastapi_docs"
PAGES = ["features.md", "python-types.md", "fastapi-cli.md", "history-design-future.md", "project-generation.md",
         "tutorial/static-files.md", "tutorial/request-files.md", "tutorial/first-steps.md"]


def pages(language: str, into: Path, names: list[str] = PAGES) -> Path:
    """Real pages of fastapi_docs/<language>, copied (read from the shared folder, never kept in the repo)."""
    for name in names:
        source = FASTAPI / language / "docs" / name
        if source.is_file():
            target = into / f"{language}-{name.replace('/', '-')}"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    return into


def heading_set(tmp_path: Path, *languages: str) -> Path:
    folder = tmp_path / "pages"
    for language in languages:
        pages(language, folder)
    out = tmp_path / "set"
    build_from_source(str(folder), out, method="heading", per_doc=4, seed=1)
    return out


def test_detection_reads_prose_not_code():
    french = (FASTAPI / "fr" / "docs" / "features.md").read_text(encoding="utf-8")
    assert detect_language(french) == "fr"
    assert detect_language((FASTAPI / "en" / "docs" / "features.md").read_text(encoding="utf-8")) == "en"
    assert detect_language((FASTAPI / "de" / "docs" / "features.md").read_text(encoding="utf-8")) == "de"
    assert "def read_item" not in prose("Texte\n```python\ndef read_item(): pass\n```\nfin `x = 1`")
    assert detect_language("`APIRouter`") == UNDETERMINED  # an identifier alone: no prose to judge
    # a short question is judged among its corpus's languages
    assert detect_language("Paramètres de chemin", among=["fr", "en"]) == "fr"


def test_census_counts_documents_and_questions():
    docs = [Document(f"fr{i}", (FASTAPI / "fr" / "docs" / n).read_text(encoding="utf-8")) for i, n in enumerate(PAGES[:4])]
    docs.append(Document("en0", (FASTAPI / "en" / "docs" / "features.md").read_text(encoding="utf-8")))
    queries = [Query("q1", "Comment déclarer un paramètre de requête facultatif ?"),
               Query("q2", "How do I declare an optional query parameter?"),
               Query("q3", "anything", {"language": "es"})]  # a question that says its language keeps it
    census = take_census(docs, queries)
    assert census.documents == {"fr": 4, "en": 1}
    assert census.question_languages == {"q1": "fr", "q2": "en", "q3": "es"}
    assert census_lines(census) == ["languages of the documents: fr 80% (4), en 20% (1)",
                                    "languages of the questions: en 33% (1), es 33% (1), fr 33% (1)"]
    coverage = coverage_of(census, "all-MiniLM-L6-v2", ("en",))
    assert coverage.covered_share == pytest.approx(0.2) and coverage.warns
    assert coverage.uncovered == {"fr": pytest.approx(0.8)}
    message = coverage.message()
    assert "\n" not in message and "all-MiniLM-L6-v2" in message and "20%" in message
    assert "retrieval.leg_params.bm25.language: french" in message and "OpenAI-compatible" in message
    assert not coverage_of(census, "a-multilingual-model", ("fr", "en")).warns


def test_a_french_run_with_minilm_warns_once_and_says_so_in_mlflow(workspace, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(census_module, "_warned", set())  # once per process: this test's own process state
    dataset = heading_set(tmp_path, "fr")
    config = make_config(workspace, dataset={"path": str(dataset)})
    result = run_experiment(load_experiment(config), progress=False)
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("kbench: warning: embedding model")]
    assert len(warnings) == 1, err
    assert "all-MiniLM-L6-v2 covers en: 0% of the documents (the rest: fr 100%)" in warnings[0]
    assert "retrieval.leg_params.bm25.language: french" in warnings[0]
    assert result.metrics["language_covered_share"] == 0.0
    logged = tracking.read.tracking_client(result.tracking_uri).get_run(result.run_id)
    assert logged.data.tags["kbench.language.warning"] == warnings[0].removeprefix("kbench: warning: ")
    assert logged.data.tags["kbench.language.documents"].startswith("fr 100%")
    assert logged.data.metrics["language_covered_share"] == 0.0
    # the same run again in this process (a sweep's next config): the line is not said twice
    run_experiment(load_experiment({**config, "name": "again"}), progress=False, log=False)
    assert "kbench: warning" not in capsys.readouterr().err


def test_an_english_run_and_a_bm25_run_say_nothing(workspace, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(census_module, "_warned", set())
    english = heading_set(tmp_path / "en", "en")
    result = run_experiment(load_experiment(make_config(workspace, dataset={"path": str(english)})), progress=False,
                            log=False)
    assert "kbench: warning" not in capsys.readouterr().err
    assert not any(k.startswith("language_") for k in result.metrics)  # nothing to say: no extra metric
    french = heading_set(tmp_path / "fr", "fr")
    bm25 = make_config(workspace, dataset={"path": str(french)}, retrieval={"legs": ["bm25"], "top_k": 20})
    result = run_experiment(load_experiment(bm25), progress=False, log=False)
    assert "kbench: warning" not in capsys.readouterr().err
    assert not any(k.startswith("language_") for k in result.metrics)


def test_a_declared_multilingual_model_is_not_warned_about(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(census_module, "_warned", set())
    from kbench.language.run import language_census

    french = heading_set(tmp_path, "fr")
    from kbench.datasets import read_dataset
    experiment = load_experiment(make_config(tmp_path, dataset={"path": str(french)},
                                             embedding={"languages": ["fr", "en"]}))
    coverage = language_census(read_dataset(experiment.dataset), experiment.embedding).coverage
    assert coverage.covered_share == 1.0 and not coverage.warns
    assert "kbench: warning" not in capsys.readouterr().err
    plain = load_experiment(make_config(tmp_path, dataset={"path": str(french)}))
    assert experiment.run_key() == plain.run_key()  # what a model is said to cover changes no vector


def test_a_set_asked_in_two_languages_has_a_language_slice(workspace, tmp_path):
    dataset = heading_set(tmp_path, "fr", "en")
    config = make_config(workspace, dataset={"path": str(dataset)}, retrieval={"legs": ["bm25"], "top_k": 20})
    result = run_experiment(load_experiment(config), progress=False, log=False)
    labels = result.per_query["slice_language"].value_counts()
    assert set(labels.index) >= {"fr", "en"} and labels["fr"] >= 5 and labels["en"] >= 5
    # each question's label is its detected language: the French questions come from the French pages
    questions = {q.query_id: q for q in result.dataset.queries}
    spans = result.dataset.spans
    for query_id, label in result.per_query.set_index("query_id")["slice_language"].items():
        page = spans[query_id][0].doc_id
        if label in ("fr", "en") and len(questions[query_id].text.split()) >= 3:
            assert page.startswith(f"{label}-"), (questions[query_id].text, page)


def test_chunk_and_inspect_print_the_census(capsys, tmp_path):
    from kbench.cli import main

    assert main(["chunk", str(FASTAPI / "fr"), "--include", "docs/f*.md", "--show", "0"]) == 0
    out = capsys.readouterr().out
    assert "languages of the documents: fr 100% (2)" in out.splitlines()  # features.md, fastapi-cli.md
    assert "languages of the questions" not in out  # a folder has none
    assert main(["datasets", "inspect", "demo", "--no-log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["languages of the documents: en 100% (32)", "languages of the questions: en 100% (98)"]


def test_a_wrong_language_code_names_the_knob_and_exits_2(tmp_path, capsys):
    from kbench.cli import main

    config = tmp_path / "x.yaml"
    config.write_text("dataset: {name: demo}\nembedding: {languages: [French]}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(config)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("kbench: error:") and err[0].endswith("invalid config")  # a config's one problem:
    assert err[1:] == ["  - embedding.languages: give ISO 639-1 codes in lower case, e.g. [fr, en, es]; "
                       "not a code: 'French'"]


# API stubs as a BEIR corpus or a store may hold them: a title and a mkdocstrings directive. py3langid alone calls
# several of them Latin, which then became a language the questions were judged among (issue 53)
STUBS = ["Functional Validators", "Pydantic Types", "Dataclasses", "Aliases", "Experimental", "Config", "Fields",
         "Plugin"]


def test_short_english_pages_and_questions_are_not_latin():
    from kbench.language.detect import judge

    stubs = [Document(f"api/{t.lower().replace(' ', '_')}.md", f"# {t}\n\n::: pydantic.{t.lower().replace(' ', '_')}\n")
             for t in STUBS]
    assert sum(judge(d.text).code == "la" for d in stubs) >= 3  # what the model alone says: Latin
    pages_ = [Document(f"en{i}", (FASTAPI / "en" / "docs" / n).read_text(encoding="utf-8")) for i, n in enumerate(PAGES[:3])]
    questions = [Query(f"q{i}", t) for i, t in enumerate(STUBS + ["Path Parameters", "Learn more", "With HTML"])]
    census = take_census(pages_ + stubs, questions)
    assert census.documents == {"en": 11}  # the short pages judged among the languages of the long ones
    assert census.questions == {"en": 11} and not census.foreign and not census.looks_foreign
    assert census_lines(census) == ["languages of the documents: en 100% (11)", "languages of the questions: en 100% (11)"]


def test_questions_in_a_language_no_document_has_are_counted_as_theirs(workspace, tmp_path):
    """Issue 52: five Japanese questions over English pages were 'en 100% (5)', and five questions in five languages
    too; the per-language slice folded them into English."""
    english = [Document(f"en{i}", (FASTAPI / "en" / "docs" / n).read_text(encoding="utf-8")) for i, n in enumerate(PAGES[:2])]
    japanese = [Query(f"j{i}", t) for i, t in enumerate(["パスパラメータを宣言するには？", "クエリパラメータとは？",
                                                         "リクエストボディ", "依存性注入の使い方", "レスポンスモデル"])]
    census = take_census(english, japanese)
    assert census.questions == {"ja": 5} and census.foreign == {"ja": 5}
    assert census_lines(census)[1:] == [
        "languages of the questions: ja 100% (5)",
        "  5 questions are in a language no document has (ja 5): counted as their own, never as the documents'"]
    mixed = [Query(f"m{i}", t) for i, t in enumerate(["パスパラメータを宣言するには？", "Как объявить параметр пути?",
                                                      "如何声明路径参数？", "كيف أعلن عن معامل المسار؟",
                                                      "How do I declare a path parameter?",
                                                      "Comment déclarer un paramètre de chemin ?",
                                                      "Cómo declarar parámetros de ruta"])]
    census = take_census(english, mixed)
    assert census.question_languages == {"m0": "ja", "m1": "ru", "m2": "zh", "m3": "ar", "m4": "en", "m5": "fr",
                                         "m6": "en"}  # Spanish at 0.59: too doubtful to count, and said so
    assert census.looks_foreign == {"es": 1}
    assert census_lines(census)[-1] == ("  1 question looks like another language (es 1), not surely enough to count "
                                        "it so: judged among the documents' languages and English")
    # a run's language slice keeps them apart
    from kbench.language.run import RunLanguages

    assert set(RunLanguages(census, None).question_languages(["language"]).values()) == {"ja", "ru", "zh", "ar", "en",
                                                                                       "fr"}
