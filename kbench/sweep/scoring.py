"""Score a sweep's configs on chosen questions in this process, sharing each group's corpus, and count the cost.

    scorer = ConfigScorer(plan)
    frames = scorer.score(["chunk_size=300", "chunk_size=600"], question_ids)   # label -> per-query DataFrame
    scorer.release(alive)            # close the corpora no alive config needs
    scorer.cost                      # embedding and search seconds, groups and configs embedded
    scorer.costs                     # label -> run costs (cost_index_bytes, ...), as a grid's runs log them

Configs with equal dataset, chunking, enrichment and embedding (the executors' ``warm_key``), indexes and
store search one corpus (``corpus_key``): it is prepared (chunked, embedded, indexed) the first time one of them is scored and kept until none of
them is still searched, so a group whose configs all leave a race before its turn never embeds. A config's
legs (its BM25 index, ...) are built once and reused for every batch of questions, and a reranker's model is
loaded once per corpus and rerank section. Racing and stage-wise search
(``race_run``, ``stagewise``) score through this class, and ``benchmarks/search_economy.py`` measures the full
grid through it too, so the three are counted the same way.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import pandas as pd

from kbench.datasets import read_dataset
from kbench.pipeline import Corpus, evaluate_run, prepare_corpus, run_costs, search_corpus
from kbench.retrieval.stage import build_legs, leg_contexts
from kbench.errors import UserError
from kbench.hashing import stable_hash
from kbench.sweep.executors import warm_key
from kbench.sweep.expand import SweepConfig, SweepPlan


class SearchStrategyError(UserError, ValueError):
    """A sweep that this search strategy cannot run (configs on different questions, a missing grid)."""


@dataclass
class SearchCost:
    """What a search spent: seconds preparing corpora (of which embedding), seconds searching and evaluating,
    how many corpora were embedded and how many configs searched them, and question-config scorings."""

    prepare_seconds: float = 0.0
    embed_seconds: float = 0.0
    search_seconds: float = 0.0
    groups_embedded: int = 0
    configs_embedded: int = 0  # configs whose corpus was prepared (each config of an embedded group counts)
    configs_scored: int = 0
    scorings: int = 0  # (config, question) pairs scored

    @property
    def compute_seconds(self) -> float:
        """Embedding plus search seconds: the figure the search economy compares."""
        return self.embed_seconds + self.search_seconds

    def as_dict(self) -> dict[str, float]:
        return {"prepare_seconds": self.prepare_seconds, "embed_seconds": self.embed_seconds,
                "search_seconds": self.search_seconds, "compute_seconds": self.compute_seconds,
                "groups_embedded": self.groups_embedded, "configs_embedded": self.configs_embedded,
                "configs_scored": self.configs_scored, "scorings": self.scorings}


def corpus_key(config: SweepConfig) -> str:
    """Configs that search one corpus: the same texts embedded (``warm_key``), the same indexes built (which
    the legs ask for, embedded or not) and the same store."""
    experiment = config.experiment
    specs = [(s.name, s.kind, s.chunking.model_dump(mode="json") if s.chunking else None, s.embed)
             for s in experiment.retrieval.index_specs()[0]]
    return stable_hash({"warm": warm_key(experiment.resolved()), "indexes": specs,
                        "store": experiment.store.model_dump(mode="json")})


@dataclass
class ConfigScorer:
    plan: SweepPlan
    progress: bool = False
    cost: SearchCost = field(default_factory=SearchCost)
    _corpora: dict[str, Corpus] = field(default_factory=dict)
    _legs: dict[str, dict] = field(default_factory=dict)
    _rerankers: dict[str, dict] = field(default_factory=dict)  # corpus key -> rerankers built on it (loaded once)
    _scored: set[str] = field(default_factory=set)
    _embedded_groups: set[str] = field(default_factory=set)
    _encoders: dict[str, object] = field(default_factory=dict)  # embedding section -> one loaded encoder
    costs: dict[str, dict[str, float]] = field(default_factory=dict)  # label -> run_costs of its corpus
    language_tags: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> its corpus's language tags

    def __post_init__(self):
        datasets = {stable_hash(c.experiment.dataset.model_dump(mode="json")) for c in self.plan.configs}
        if len(datasets) > 1:
            raise SearchStrategyError("search: race and stagewise compare configs on the same questions, but this "
                                      "grid varies the dataset section; keep dataset.* out of the grid, or use "
                                      "search: {strategy: grid}")
        self.by_label = self.plan.by_label()
        self.group = {c.label: corpus_key(c) for c in self.plan.configs}

    def question_ids(self) -> list[str]:
        """The questions every config is scored on (the baseline's dataset section: the same for every config)."""
        return [q.query_id for q in read_dataset(self.plan.configs[0].experiment.dataset).queries]

    def group_size(self, label: str) -> int:
        return sum(1 for g in self.group.values() if g == self.group[label])

    def _corpus(self, config: SweepConfig) -> Corpus:
        key = self.group[config.label]
        if key not in self._corpora:
            if key in self._embedded_groups:
                raise SearchStrategyError(f"{config.label}: its corpus was released while a config still needed it")
            started = time.perf_counter()
            corpus = prepare_corpus(config.experiment, progress=self.progress)
            self.cost.prepare_seconds += time.perf_counter() - started
            self.cost.embed_seconds += float(corpus.timer.seconds.get("embed", 0.0))
            self.cost.groups_embedded += 1
            self.cost.configs_embedded += self.group_size(config.label)
            self._embedded_groups.add(key)
            self._share_encoder(corpus, config)
            self._corpora[key] = corpus
        return self._corpora[key]

    def _share_encoder(self, corpus: Corpus, config: SweepConfig) -> None:
        """Corpora embedded by one model search with one loaded encoder (for their queries): a race holds every
        group's corpus in its first round, and 16 copies of a 400 MB model would not fit."""
        if corpus.embedder is None:
            return
        key = stable_hash(config.experiment.embedding.model_dump(mode="json"))
        shared = self._encoders.setdefault(key, corpus.embedder.encoder)
        corpus.embedder.encoder = shared

    def score(self, labels: list[str], question_ids: list[str]) -> dict[str, pd.DataFrame]:
        """Each config's per-query results on ``question_ids`` (rows in that order, indexed by query id)."""
        out = {}
        for label in labels:
            config = self.by_label[label]
            corpus = self._corpus(config)
            self.costs.setdefault(label, run_costs(corpus))
            self.language_tags.setdefault(label, corpus.languages.tags())
            wanted = set(question_ids)
            dataset = corpus.dataset
            batch = replace(dataset, queries=[q for q in dataset.queries if q.query_id in wanted])
            started = time.perf_counter()
            legs = None
            if not config.experiment.query.active:  # legs built once per config, reused for every batch
                if label not in self._legs:
                    self._legs[label] = build_legs(leg_contexts(corpus.context, config.experiment.retrieval,
                                                                corpus.indexes), config.experiment.retrieval)
                legs = self._legs[label]
            found = search_corpus(replace(corpus, dataset=batch), config.experiment, legs=legs,
                                  rerankers=self._rerankers.setdefault(self.group[label], {}))
            per_query, _ = evaluate_run(batch, found.units, found.run, config.experiment.evaluation, found.latency_ms,
                                        cache_root=corpus.workspace / "cache", llm_usage=corpus.llm_usage,
                                        llm_policy=config.experiment.llm.policy)
            self.cost.search_seconds += time.perf_counter() - started
            self.cost.scorings += len(batch.queries)
            if label not in self._scored:
                self._scored.add(label)
                self.cost.configs_scored += 1
            frame = per_query.set_index("query_id")
            missing = [q for q in question_ids if q not in frame.index]
            if missing:
                raise SearchStrategyError(f"{label}: no result for {len(missing)} questions (e.g. {missing[0]})")
            out[label] = frame.loc[question_ids]
        return out

    def release(self, alive: list[str]) -> None:
        """Close the corpora and legs no config in ``alive`` searches (a race drops the rest for good)."""
        needed = {self.group[label] for label in alive}
        for key in [k for k in self._corpora if k not in needed]:
            self._corpora.pop(key).close()
            self._rerankers.pop(key, None)
        for label in [k for k in self._legs if k not in alive]:
            del self._legs[label]

    def close(self) -> None:
        self.release([])
        self._encoders.clear()
