"""What a run says about its languages: the census of its dataset and the embedder's coverage (census.py), and the
MLflow tags, metrics and question slice they give. kbench/pipeline.py takes it once per run:

    languages = language_census(dataset, experiment.embedding)  # warns once when under half of it is covered
    languages.tags()          # kbench.language.documents / .questions / .warning
    languages.metrics()       # language_covered_share, language_covered_questions (only when some is uncovered)
    languages.question_languages(["language"])  # query id -> language: the slice_language column
    languages.add_to(per_query, metrics, ["language"])  # that column and those metrics, into a run's

The tag names live here, with what they hold; kbench/tracking/tags.py lists them with every other tag.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kbench.language.census import (RUN_SAMPLE, Census, Coverage, census_lines, coverage_of, take_census,
                                    warn_uncovered)
from kbench.records import Dataset

DOCUMENTS_TAG = "kbench.language.documents"  # the documents' languages: "fr 96% (119), en 4% (5)"
QUESTIONS_TAG = "kbench.language.questions"  # the questions' languages, as above
WARNING_TAG = "kbench.language.warning"  # the embedder covers under half of the documents: the stderr line


@dataclass(frozen=True)
class RunLanguages:
    census: Census  # the languages of the documents (a sample of RUN_SAMPLE) and the questions
    coverage: Coverage | None  # how much of them the embedder's languages cover; None: no embedder, nobody said

    def tags(self) -> dict[str, str]:
        """``kbench.language.documents`` and ``.questions`` (shares per language), ``kbench.language.warning`` (the
        line said on stderr) when the embedder covers under half of the documents."""
        documents, questions = census_lines(self.census)[:2]
        tags = {DOCUMENTS_TAG: documents.split(": ", 1)[1], QUESTIONS_TAG: questions.split(": ", 1)[1]}
        if self.coverage is not None and self.coverage.warns:
            tags[WARNING_TAG] = self.coverage.message()
        return tags

    def metrics(self) -> dict[str, float]:
        """``language_covered_share`` (of the documents) and ``language_covered_questions``, only when the embedder
        leaves some of the corpus uncovered: an English run on English pages carries no extra metric."""
        if self.coverage is None or not self.coverage.uncovered:
            return {}
        return {"language_covered_share": self.coverage.covered_share,
                "language_covered_questions": self.coverage.covered_questions}

    def add_to(self, per_query, metrics: dict[str, float], slices: Sequence[str]) -> None:
        """A run's share of it: the ``slice_language`` column of ``per_query`` (``question_languages``) and the
        coverage ``metrics``."""
        if (languages := self.question_languages(slices)) is not None:
            per_query["slice_language"] = per_query["query_id"].map(languages)
        metrics.update(self.metrics())

    def question_languages(self, slices: Sequence[str]) -> dict[str, str] | None:
        """Each question's language, for the ``slice_language`` column: when ``slices`` (evaluation.slices) asks
        for it, or when two or more languages each hold a meaningful share of the questions; else None."""
        if "language" not in slices and len(self.census.question_slices()) < 2:
            return None
        return self.census.question_languages


def language_census(dataset: Dataset, embedding=None) -> RunLanguages:
    """The languages of the dataset (a seeded sample of its documents, every question) and, for a run that embeds
    (``embedding``: its section, read for ``model`` and ``covered_languages``: the catalogue's or
    embedding.languages; None when nobody said), how much of the documents they cover: under half, a one-line
    warning on stderr, once per process. A run without an embedder (``embedding`` None) says nothing of coverage."""
    census = take_census(dataset.documents, dataset.queries, sample=RUN_SAMPLE)
    languages = embedding.covered_languages if embedding is not None else None
    if languages is None:
        return RunLanguages(census, None)
    coverage = coverage_of(census, embedding.model, languages)
    warn_uncovered(coverage)
    return RunLanguages(census, coverage)
