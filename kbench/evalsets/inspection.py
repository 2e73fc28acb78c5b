"""What an evaluation set can and cannot tell apart.

Without runs: questions, references per question, span lengths, question lengths, coverage across
documents (the share of documents with a question, and the Gini coefficient of questions per document:
0 = every document asked about equally, near 1 = all questions on a few files), near-duplicate questions,
and lexical leakage per question (the gold passage's BM25 rank for the question alone and its word overlap,
``datasets.synthetic.leakage``), counted in strata. For document judgements (BEIR) the gold passages are the
relevant documents' passages and the reference text their whole text.

``Inspection.reading()`` says what those numbers mean for a comparison of configs in plain sentences (how
lexical the set is and so whether it favours BM25, how concentrated, how repetitive, how many questions cannot
separate configs and the smallest gap it can see), and ``samples`` holds five questions spread over the set
with the start of their references, to read before trusting a number.

With runs (several configs on this set): saturation, the questions that cannot separate configs because
every config gets them perfectly right (the metric at its maximum, 1) or all get them wrong (0), and the
minimum detectable difference in the headline metric (nDCG@10) at 80% power for a paired two-sided t-test at
alpha 0.05 (``evaluation.significance.minimum_detectable_difference``, the same exact noncentral-t figure
`kbench compare` reports), from sd(d), the standard deviation of the per-question differences between two
configs (the median over every pair of runs given). A gap smaller than the MDE is likely to be missed by
this many questions.
"""
from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from kbench.compare.compare import RunScores, metrics_to_compare
from kbench.datasets.synthetic.leakage import (STRATA_OVERLAP, STRATA_RANK, PassageIndex, near_duplicate_groups,
                                               overlap_stratum, rank_stratum, word_overlap)
from kbench.evaluation.significance import minimum_detectable_difference
from kbench.records import Dataset
from kbench.tracking.mlflow_run import ensure_experiment, flatten, log_finished_run, mlflow_client
from kbench.errors import UserError


# Where a reading changes (a reading aid, not a test). A set is lexical when BM25 alone finds the gold passage
# first for many questions: the demo set's hand-written questions sit at 49%; questions copied from the text
# (ict) sit far above half.
LEXICAL_STRONG = 0.5  # share of questions whose gold passage is BM25's first
LEXICAL_SOME = 0.25
OVERLAP_HIGH = 0.6  # mean share of a question's words found in its reference
CONCENTRATED_GINI = 0.5  # questions per document this unequal: a few documents decide the ranking
SHORT_QUESTION_WORDS = 3  # median words at or below: keyword queries rather than questions
N_SAMPLES = 5


def gini(counts: list[int] | np.ndarray) -> float:
    """Gini coefficient of non-negative counts (0: all equal; (n-1)/n: everything on one)."""
    x = np.sort(np.asarray(counts, dtype=np.float64))
    n, total = len(x), x.sum()
    if n == 0 or total == 0:
        return 0.0
    return float((2 * np.arange(1, n + 1) - n - 1) @ x / (n * total))


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    p = np.percentile(values, [10, 50, 90])
    return {"p10": float(p[0]), "p50": float(p[1]), "p90": float(p[2])}


@dataclass
class Inspection:
    dataset: str
    questions: int
    documents: int
    documents_with_question: int
    gini_questions_per_document: float
    references_per_question: dict[str, float]
    span_chars: dict[str, float]
    question_words: dict[str, float]
    near_duplicates: int
    near_duplicate_examples: list[tuple[str, str]]
    leakage_rank: dict[str, int]
    leakage_overlap: dict[str, int]
    leakage_median_rank: float
    leakage_mean_overlap: float
    runs: list[str] = field(default_factory=list)
    metric: str | None = None
    saturated_all_right: int = 0
    saturated_all_wrong: int = 0
    sd_difference: float | None = None
    mde: float | None = None
    samples: list[dict[str, str]] = field(default_factory=list)  # question_id, question, reference (its start)
    unlabelled: int = 0  # questions no label reaches yet (a query log's): none of the figures above counts them

    def reading(self) -> list[str]:
        """What the numbers mean for comparing configs on this set, one sentence each."""
        if self.unlabelled and not self.questions:
            return [f"none of the {self.unlabelled} questions carries a label yet (a query log's): coverage, "
                    "references and leakage need labels; label them (kbench judge, kbench label), and measure how "
                    "far generated sets are from them with kbench datasets match"]
        n = max(self.questions, 1)
        first = self.leakage_rank.get("1", 0) / n
        lexical = (f"BM25 alone ranks the gold passage first for {first:.0%} of the questions (word overlap with "
                   f"the reference {self.leakage_mean_overlap:.2f} on average)")
        if first >= LEXICAL_STRONG:
            out = [f"strongly lexical: {lexical}; the set favours BM25 and lexical legs, so a lexical config's "
                   "win here may not hold for real questions (check it with kbench compare --sets against "
                   "another set)"]
        elif first >= LEXICAL_SOME:
            out = [f"somewhat lexical: {lexical}; BM25 has an edge here, dense legs are still tested"]
        elif self.leakage_mean_overlap >= OVERLAP_HIGH:
            out = [f"lexical but ambiguous: {lexical}: the questions' words are in their references, and in many "
                   "other passages too (generic words), so BM25 has an edge only where a word is rare"]
        else:
            out = [f"little lexical leakage: {lexical}; the set does not by itself favour BM25 over dense legs"]
        coverage = self.documents_with_question / max(self.documents, 1)
        if self.gini_questions_per_document >= CONCENTRATED_GINI:
            out.append(f"concentrated: {coverage:.0%} of the documents have a question (Gini "
                       f"{self.gini_questions_per_document:.2f}); the configs that suit those documents win, and "
                       "the ranking says little about the rest")
        else:
            out.append(f"spread: {coverage:.0%} of the documents have a question (Gini "
                       f"{self.gini_questions_per_document:.2f}); no few documents decide the ranking")
        if self.near_duplicates:
            out.append(f"{self.near_duplicates} near-duplicate questions ({self.near_duplicates / n:.0%}): each "
                       "counts again without new evidence, so intervals are narrower than the set deserves")
        words = self.question_words.get("p50")
        if words is not None and words <= SHORT_QUESTION_WORDS:
            out.append(f"short questions (median {words:.0f} words): keyword queries rather than questions, which "
                       "favours exact-term matching")
        if self.runs:
            saturated = self.saturated_all_right + self.saturated_all_wrong
            out.append(f"{saturated} of {self.questions} questions ({saturated / n:.0%}) get the same "
                       f"{self.metric} from every run (all right or all wrong): they cannot separate configs; "
                       f"{self.questions - saturated} do the work")
            if self.mde is not None:
                out.append(f"a gap in {self.metric} below {self.mde:.4f} is likely missed (80% power): read a "
                           "winner ahead by less as a tie")
        return out

    def metrics(self) -> dict[str, float]:
        out = {"questions": self.questions, "documents": self.documents,
               "coverage_documents": self.documents_with_question / max(self.documents, 1),
               "gini_questions_per_document": self.gini_questions_per_document,
               "near_duplicate_questions": self.near_duplicates,
               "leakage_bm25_rank_p50": self.leakage_median_rank, "leakage_word_overlap_mean": self.leakage_mean_overlap,
               "questions_unlabelled": self.unlabelled}
        out.update({f"references_per_question_{k}": v for k, v in self.references_per_question.items()})
        out.update({f"span_chars_{k}": v for k, v in self.span_chars.items()})
        out.update({f"leakage_rank_{k}": v for k, v in self.leakage_rank.items()})
        out.update({f"leakage_overlap_{k}": v for k, v in self.leakage_overlap.items()})
        if self.runs:
            out.update(saturated_all_right=self.saturated_all_right, saturated_all_wrong=self.saturated_all_wrong,
                       saturated_share=(self.saturated_all_right + self.saturated_all_wrong) / max(self.questions, 1))
            if self.mde is not None:
                out.update(mde_at_80_power=self.mde, sd_paired_difference=self.sd_difference or 0.0)
        return {k.replace(">=", "ge").replace(">", "gt").replace("<", "lt"): float(v) for k, v in out.items()}

    def rows(self) -> list[list[str]]:
        pct = lambda d: " / ".join(f"{d[k]:.0f}" for k in ("p10", "p50", "p90")) if d else "-"  # noqa: E731
        rows = [["questions", str(self.questions) + (f" with a label; {self.unlabelled} without one (not counted "
                                                      "below)" if self.unlabelled else "")],
                ["documents with a question", f"{self.documents_with_question} of {self.documents} "
                                              f"({self.documents_with_question / max(self.documents, 1):.0%})"],
                ["Gini of questions per document", f"{self.gini_questions_per_document:.4f}"],
                ["references per question (mean, max)", f"{self.references_per_question['mean']:.4f}, "
                                                        f"{self.references_per_question['max']:.0f}"],
                ["reference length, chars (p10 / p50 / p90)", pct(self.span_chars)],
                ["question length, words (p10 / p50 / p90)", pct(self.question_words)],
                ["near-duplicate questions", str(self.near_duplicates)],
                ["leakage: gold passage BM25 rank " + ", ".join(lbl for _, _, lbl in STRATA_RANK),
                 ", ".join(str(self.leakage_rank.get(lbl, 0)) for _, _, lbl in STRATA_RANK)
                 + f" (median rank {self.leakage_median_rank:.0f})"],
                ["leakage: word overlap " + ", ".join(lbl for _, _, lbl in STRATA_OVERLAP),
                 ", ".join(str(self.leakage_overlap.get(lbl, 0)) for _, _, lbl in STRATA_OVERLAP)
                 + f" (mean {self.leakage_mean_overlap:.4f})"]]
        if self.runs:
            n = max(self.questions, 1)
            rows += [[f"saturated on {self.metric} over {len(self.runs)} runs: all right, all wrong",
                      f"{self.saturated_all_right} ({self.saturated_all_right / n:.0%}), "
                      f"{self.saturated_all_wrong} ({self.saturated_all_wrong / n:.0%})"]]
            if self.mde is not None:
                rows += [[f"minimum detectable {self.metric} difference (80% power, alpha 0.05)",
                          f"{self.mde:.4f} (sd of paired differences {self.sd_difference:.4f})"]]
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "reading": self.reading()}


def _gold(dataset: Dataset) -> dict[str, list[tuple[str, int, int]]]:
    """query -> gold (doc_id, start, end); a whole relevant document is (doc_id, 0, -1)."""
    if dataset.spans:
        return {q: [(s.doc_id, s.start, s.end) for s in spans] for q, spans in dataset.spans.items()}
    return {q: [(d, 0, -1) for d, grade in rel.items() if grade > 0] for q, rel in dataset.qrels.items()}


def inspect_dataset(dataset: Dataset, runs: list[RunScores] | None = None, metric: str | None = None) -> Inspection:
    texts = {d.doc_id: d.text for d in dataset.documents}
    gold = _gold(dataset)
    queries = [q for q in dataset.queries if gold.get(q.query_id)]
    per_doc = Counter(doc for q in queries for doc in {g[0] for g in gold[q.query_id]})
    refs = [len(gold[q.query_id]) for q in queries]
    span_chars = [(len(texts.get(d, "")) if e < 0 else e - s) for q in queries for d, s, e in gold[q.query_id]]
    duplicates = near_duplicate_groups([q.text for q in queries])
    examples = [(queries[j].text, queries[i].text) for i, j in enumerate(duplicates) if j is not None][:5]
    index = PassageIndex(texts)
    ranks, overlaps = [], []
    for q in queries:
        spans = gold[q.query_id]
        ranks.append(index.gold_rank(q.text, spans))
        reference = "\n".join(texts.get(d, "")[s:(None if e < 0 else e)] for d, s, e in spans)
        overlaps.append(word_overlap(q.text, reference))
    result = Inspection(
        dataset.name, len(queries), len(dataset.documents), len(per_doc),
        gini([per_doc.get(d.doc_id, 0) for d in dataset.documents]),
        {"mean": float(np.mean(refs)) if refs else 0.0, "max": float(max(refs, default=0))},
        _percentiles(span_chars), _percentiles([len(q.text.split()) for q in queries]),
        sum(d is not None for d in duplicates), examples,
        dict(Counter(rank_stratum(r) for r in ranks)), dict(Counter(overlap_stratum(o) for o in overlaps)),
        float(np.median(ranks)) if ranks else 0.0, float(np.mean(overlaps)) if overlaps else 0.0)
    result.samples = sample_questions(queries, gold, texts)
    result.unlabelled = len(dataset.queries) - len(queries)
    if runs:
        add_run_statistics(result, runs, metric, {q.query_id for q in queries})
    return result


def sample_questions(queries: list, gold: dict[str, list[tuple[str, int, int]]], texts: dict[str, str],
                     n: int = N_SAMPLES, excerpt_chars: int = 160) -> list[dict[str, str]]:
    """``n`` questions spread evenly over the set (its first, its last and between), each with its first
    reference: where it is and the start of its text."""
    if not queries:
        return []
    picked = sorted({round(i) for i in np.linspace(0, len(queries) - 1, min(n, len(queries)))})
    out = []
    for i in picked:
        q = queries[i]
        doc, start, end = gold[q.query_id][0]
        text = " ".join(texts.get(doc, "")[start:(None if end < 0 else end)].split())
        where = doc if end < 0 else f"{doc} [{start}:{end}]"
        more = len(gold[q.query_id]) - 1
        out.append({"question_id": q.query_id, "question": q.text,
                    "reference": f"{where}{f' (+{more} more)' if more else ''}: "
                                 f"{text[:excerpt_chars]}{'...' if len(text) > excerpt_chars else ''}"})
    return out


class InspectError(UserError, ValueError):
    pass


def add_run_statistics(result: Inspection, runs: list[RunScores], metric: str | None = None,
                       query_ids: set[str] | None = None) -> None:
    metric = metric or (metrics_to_compare(runs[0].per_query.columns) or [None])[0]
    if metric is None or any(metric not in r.per_query.columns for r in runs):
        raise InspectError(f"--runs: the runs do not all have the per-query metric {metric!r}; give --metric")
    common = set.intersection(*(set(map(str, r.per_query.index)) for r in runs))
    common = sorted(common & query_ids if query_ids is not None else common)
    if not common:
        raise InspectError(f"--runs: no question of {result.dataset} is in every run; were the runs made on it?")
    scores = np.array([r.per_query.rename(index=str).loc[common, metric].to_numpy(dtype=float) for r in runs])  # runs x questions
    result.runs, result.metric = [r.label for r in runs], metric
    result.saturated_all_right = int(np.all(scores >= 1 - 1e-9, axis=0).sum())
    result.saturated_all_wrong = int(np.all(scores <= 1e-12, axis=0).sum())
    if len(runs) >= 2 and len(common) >= 2:
        sds = [float(np.std(scores[a] - scores[b], ddof=1)) for a, b in combinations(range(len(runs)), 2)]
        result.sd_difference = float(np.median(sds))
        result.mde = minimum_detectable_difference(result.sd_difference, len(common))


def log_inspection(result: Inspection, workspace: Path, tracking_uri: str | None = None,
                   source: dict[str, Any] | None = None) -> str:
    """One MLflow run (experiment ``datasets-inspect``) with the figures as metrics and inspect.json."""
    client = mlflow_client(tracking_uri, workspace)
    experiment_id = ensure_experiment(client, "datasets-inspect", workspace)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "inspect.json").write_text(json.dumps(result.as_dict(), indent=2, default=str))
        (Path(tmp) / "inspect.txt").write_text("\n".join([*(f"{k}: {v}" for k, v in result.rows()), "",
                                                          "reading:", *(f"- {r}" for r in result.reading())])
                                               + "\n")
        return log_finished_run(client=client, experiment_id=experiment_id, run_name=f"inspect {result.dataset}",
                                params=flatten({"dataset": source or {"name": result.dataset},
                                                "runs": result.runs, "metric": result.metric}),
                                metrics=result.metrics(), tags={"kbench.kind": "datasets-inspect"},
                                run_dir=Path(tmp))
