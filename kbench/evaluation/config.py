"""The evaluation section: cutoffs, the relevance level, the span overlap rule, token budgets, miss attribution
and slices; and the section `recommend` (what the recommendation picks by)."""
from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kbench.errors import shorten
from kbench.evaluation.directions import lower_is_better
from kbench.evaluation.measures import Measure, parse_measure
from kbench.evaluation.metrics import METRICS
from kbench.registry import StrictModel, in_unit

MAX_K = 1_000_000  # a cutoff beyond any corpus kbench ranks; a bigger one is a typo (and overflows int64 plots)


class OverlapRule(StrictModel):
    """When does a chunk count as relevant to a reference span (span datasets)?"""

    rule: Literal["any", "min_chars", "min_fraction"] = Field(
        "any", description="any: one shared character; min_chars: at least value characters; min_fraction: at least "
        "value of the reference")
    value: float = Field(0, ge=0, description="characters (min_chars) or fraction of the reference (min_fraction)")

    @model_validator(mode="after")
    def _fraction_at_most_one(self):
        if self.rule == "min_fraction" and self.value > 1:
            raise ValueError(f"value must be <= 1 with rule min_fraction (a fraction of the reference), got {self.value}")
        return self


RagasMetric = Literal["id_context_precision", "id_context_recall", "nonllm_context_precision",
                      "nonllm_context_recall", "llm_context_precision", "llm_context_recall"]


class RagasLLMConfig(StrictModel):
    """The chat endpoint that judges ragas' LLM metrics (``kbench serve`` or any OpenAI-compatible one)."""

    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default OPENAI_BASE_URL")
    model: str | None = Field(None, description="chat model name at that endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    max_tokens: int = Field(512, ge=1, description="tokens per judge answer")


class EvaluationConfig(StrictModel):
    k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10], min_length=1,
                         description="cut-offs: every metric at each (doc_ndcg_at_10, ...)",
                         json_schema_extra=in_unit("ranks"))
    level: Literal["auto", "document", "chunk"] = Field(
        "auto", description="document: qrels on doc ids; chunk: relevance from span overlap; auto picks"
    )
    overlap: OverlapRule = Field(default_factory=OverlapRule)
    budgets: list[int] = Field(
        default_factory=list, description="token budgets (e.g. [500, 1000, 2000, 4000]): *_at_budget_<n> metrics "
                                          "keep ranked chunks until n tokens are spent (kbench.evaluation.budgets)",
                                          json_schema_extra=in_unit("tokens"))
    budget_tokenizer: str | None = Field(
        None, description="whose tokenizer counts budget tokens (kbench models list); default: all-MiniLM-L6-v2's, "
                          "the same for every embedding model")
    miss_attribution: bool = Field(
        True, description="per query and relevant item, the stage where it was lost (miss_stage, miss_share_*) "
                          "and the oracle ceilings (ceiling_*)")
    miss_k: int | None = Field(None, ge=1, le=MAX_K, description="the cutoff a relevant item must reach to count as a hit; "
                                                        "default: the largest k", json_schema_extra=in_unit("rank"))
    slices: list[str] = Field(
        default_factory=list, description="per-query slice columns: doc_type, corpus, query_length, language, "
                                          "query.<metadata field>, doc.<metadata field> (kbench.evaluation.slices)")
    metrics: list[str] = Field(
        default_factory=list,
        description="ir_measures names (nDCG@10, R@100, RR@10, P(rel=2)@5, AP@100, Success@10) scored at document "
                    "and chunk level instead of every metric at every k; k still sets the span metrics' cutoffs")

    @field_validator("metrics")
    @classmethod
    def _measure_names(cls, v: list[str]) -> list[str]:
        problems = []
        for name in v:
            try:
                parse_measure(name)
            except ValueError as e:
                problems.append(str(e))
        if problems:
            raise ValueError("; ".join(problems))
        return v

    @property
    def measures(self) -> list[Measure]:
        return [parse_measure(name) for name in self.metrics]
    ragas: list[RagasMetric] = Field(default_factory=list, description="ragas context metrics (kbench.evaluation.ragas_eval)")
    ragas_k: int | None = Field(None, ge=1, le=MAX_K, description="top chunks handed to ragas; default: the largest k",
                                json_schema_extra=in_unit("chunks"))
    ragas_llm: RagasLLMConfig = Field(default_factory=RagasLLMConfig)

    @field_validator("k")
    @classmethod
    def _positive_sorted(cls, v: list[int]) -> list[int]:
        if any(k < 1 for k in v):
            raise ValueError(f"every k must be >= 1, got {v}")
        if any(k > MAX_K for k in v):
            raise ValueError(f"every k must be at most {MAX_K:,} (got {shorten(max(v), 40)}): no ranking kbench "
                             "builds is longer, and a k beyond retrieval.top_k scores results the run never returns")
        return sorted(set(v))

    @field_validator("budgets")
    @classmethod
    def _positive_budgets(cls, v: list[int]) -> list[int]:
        if any(n < 1 for n in v):
            raise ValueError(f"every budget must be >= 1 token, got {v}")
        return sorted(set(v))

    @field_validator("slices")
    @classmethod
    def _known_slices(cls, v: list[str]) -> list[str]:
        for key in v:
            if key not in SLICE_KEYS and not re.fullmatch(r"(query|doc)\.\w[\w.-]*", key):
                raise ValueError(f"unknown slice {key!r}; allowed: {', '.join(SLICE_KEYS)}, query.<metadata field>, "
                                 "doc.<metadata field>")
        return list(dict.fromkeys(v))

    @property
    def miss_cutoff(self) -> int:
        return self.miss_k or max(self.k)

    def metric_columns(self) -> list[str]:
        """Every per-query quality column a run of this section can log (a span dataset's, the most there are):
        the names ``recommend.guards`` and ``kbench gate --metric`` may give. ``evaluate_rankings`` makes them
        (tests/reliability/test_settings_named.py holds the two equal)."""
        levels = ["doc"] + ([] if self.level == "document" else ["chunk"])
        ranked = [m.column for m in self.measures] or [f"{name}_at_{k}" for name in METRICS for k in self.k]
        out = [f"{level}_{column}" for level in levels for column in ranked]
        out += [f"span_{name}_at_{k}" for k in self.k for name in SPAN_METRICS] + ["span_precision_omega"]
        out += [f"judged_at_{k}" for k in self.k]
        out += [f"{name}_at_budget_{n}" for n in self.budgets for name in BUDGET_METRICS]
        if self.miss_attribution:
            for level in levels:
                out.append(f"ceiling_{level}_pool_recall")
                out += [f"ceiling_{level}_{kind}_ndcg_at_{k}" for kind in ("pool", "rerank") for k in self.k]
        return out + [f"ragas_{name}" for name in self.ragas]

    def metric_forms(self) -> str:
        """``metric_columns`` in a few words, for a message: ``{doc,chunk}_{precision,...}_at_{1,3,5,10}, ...``."""
        levels = "{doc,chunk}" if self.level != "document" else "doc"
        ks = "{" + ",".join(str(k) for k in self.k) + "}"
        ranked = (", ".join(f"{levels}_{m.column}" for m in self.measures) if self.measures
                  else f"{levels}_{{{','.join(METRICS)}}}_at_{ks}")
        forms = [ranked, f"span_{{{','.join(SPAN_METRICS)}}}_at_{ks}", "span_precision_omega", f"judged_at_{ks}"]
        if self.budgets:
            forms.append(f"{{{','.join(BUDGET_METRICS)}}}_at_budget_{{{','.join(str(n) for n in self.budgets)}}}")
        if self.miss_attribution:
            forms.append(f"ceiling_{levels}_{{pool_recall,pool_ndcg_at_{ks},rerank_ndcg_at_{ks}}}")
        forms += [f"ragas_{name}" for name in self.ragas]
        return ", ".join(forms)


SLICE_KEYS = ("doc_type", "corpus", "query_length", "language")
SPAN_METRICS = ("recall", "precision", "iou")  # span_<metric>_at_<k> (evaluation/spans.py)
BUDGET_METRICS = ("doc_recall", "span_recall", "span_precision")  # <metric>_at_budget_<n> (evaluation/budgets.py)


# The section `recommend` (the rule itself is evaluation/recommend.py): kept here with the other sections, so
# loading a config imports no numpy.
DEFAULT_GUARDS = ["doc_ndcg_at_10", "chunk_ndcg_at_10", "recall_at_10"]
DEFAULT_COST = "cost_index_bytes"
DEFAULT_MARGIN = 0.01
LEVELS = ("chunk", "doc", "span")
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# The stages a search times per question (retrieval/stage.py: latency_ms_<stage>), a leg's under its name
LATENCY_STAGES = ("total", "embed_query", "fusion", "rerank", "grouping")
STAGE_NAME = re.compile(r"^(total|embed_query|fusion|rerank|grouping|leg_[a-z][a-z0-9_]*)$")
STAGE_FORMS = "total, embed_query, leg_<leg> (a leg of retrieval.legs), fusion, rerank, grouping"
# The costs every run logs (pipeline.run_costs) and the stages a run times as time_s_<stage> (its StageTimer):
# what recommend.cost may name beside latency_ms_<stage>_p50/_p95 and, with an LLM stage, llm_<stage>_cost_usd
RUN_COSTS = ("cost_index_bytes", "cost_embed_seconds")
TIMED_STAGES = ("load", "load_model", "units", "chunk", "enrich", "code_examples", "embed", "store",
                "store_code_examples", "index_recall", "query_rewrite", "search", "context", "evaluate")
LATENCY_COST = re.compile(r"^latency_ms_(?P<stage>\w+)_p(50|95)$")
COST_FORMS = ("cost_index_bytes, cost_embed_seconds, latency_ms_<stage>_p50 or _p95, time_s_<stage>, "
              "llm_total_cost_usd (with an LLM stage)")


def stage_problem(stage: str) -> str | None:
    """Why ``stage`` names no stage a search times (a typo turns a latency budget off), or None."""
    if STAGE_NAME.match(stage):
        return None
    return f"{stage!r} is no stage a search times; allowed: {STAGE_FORMS}"


def cost_problem(cost: str, llm_stages: bool | None = None) -> str | None:
    """Why ``cost`` names no cost a run logs, or None. ``llm_stages``: whether the config asks an LLM (None:
    unknown, an ``llm_*_cost_usd`` is then let through)."""
    if not lower_is_better(cost):
        return (f"{cost!r} is a quality (higher is better), not a cost: the cheapest would be the worst; give "
                f"one of {COST_FORMS}")
    if cost.startswith("cost_") and cost not in RUN_COSTS:
        return f"{cost!r} is no cost a run logs; give one of {COST_FORMS}"
    if (found := LATENCY_COST.match(cost)) and (problem := stage_problem(found["stage"])):
        return f"{cost}: {problem}"
    if cost.startswith("latency_ms_") and not found:
        return (f"{cost!r} is no run metric; a latency cost is a percentile of a stage: latency_ms_<stage>_p50 or "
                "_p95, e.g. latency_ms_total_p95")
    if cost.startswith("time_s_") and cost.removeprefix("time_s_") not in TIMED_STAGES:
        return f"{cost!r} is no stage a run times; time_s_<stage> with a stage of {', '.join(TIMED_STAGES)}"
    if cost.startswith("llm_"):
        if not cost.endswith("_cost_usd"):
            return f"{cost!r} is no LLM cost; give llm_total_cost_usd or llm_<stage>_cost_usd"
        if llm_stages is False:
            return f"{cost!r}: this config asks no LLM, so no run logs it; give one of {COST_FORMS}"
    if not cost.startswith(("cost_", "latency_ms_", "time_s_", "llm_")):
        return f"{cost!r} is no cost a run logs; give one of {COST_FORMS}"
    return None


def guard_problem(guards: list[str], columns: list[str], forms: str) -> str | None:
    """Why some of ``guards`` name no per-query metric among ``columns`` (a guard nothing measures holds nothing),
    or None. A guard without a level (``recall_at_10``) takes the headline's: any level's column will do."""
    known = set(columns)
    missing = [g for g in guards if g not in known and not any(f"{level}_{g}" in known for level in LEVELS)]
    if not missing:
        return None
    return (f"{', '.join(missing)}: no run of this config measures {'it' if len(missing) == 1 else 'them'}, so "
            f"the guard would hold nothing; give per-query metrics these runs log: {forms} (a name without its "
            "level takes the headline's: recall_at_10)")
RELATIVE = re.compile(r"^\s*(?P<pct>\d+(\.\d+)?)\s*%\s*$")


def parse_margin(margin: float | str) -> tuple[float, bool]:
    """``0.01`` -> (0.01, False): an absolute difference; ``"2%"`` -> (0.02, True): a share of the reference's
    mean. Raises ValueError naming both forms."""
    if isinstance(margin, str):
        found = RELATIVE.match(margin)
        if not found:
            raise ValueError(f"{margin!r} is no margin: give a finite absolute difference (0.01) or a share of the "
                             "best's mean ('2%')")
        share = float(found["pct"]) / 100
        if share >= 1:
            raise ValueError(f"{margin!r}: a relative margin is below 100%, e.g. '2%'")
        return share, True
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1 \
            or not math.isfinite(margin):
        raise ValueError(f"{margin!r} is no margin: a finite absolute difference from 0 to below 1 (0.01), or a share "
                         "of the best's mean ('2%')")
    return float(margin), False


class RecommendConfig(StrictModel):
    """Section ``recommend``: what the end of a sweep, a search and ``kbench compare`` recommend by. It changes
    no result, so it is not part of the run key."""

    margin: float | str = Field(DEFAULT_MARGIN, description="how much worse than the best a config may be and "
                                "still count as as good: an absolute difference of the metric (0.01) or a share "
                                "of the best's mean ('2%'); a cheaper config is recommended only when the data "
                                "show it within this margin on the headline and every guard")
    guards: list[str] = Field(default_factory=lambda: list(DEFAULT_GUARDS),
                              description="quality metrics a cheaper config must also be within the margin on, "
                                          "beside the headline: per-query metric names (chunk_recall_at_10; "
                                          "recall_at_10 takes the headline's level)")
    cost: str = Field(DEFAULT_COST, description="the run metric that picks the cheapest of the configs within the "
                                                "margin (lower is cheaper): cost_index_bytes, cost_embed_seconds, "
                                                "llm_total_cost_usd, ...")
    cost_budget: float | None = Field(None, ge=0, description="exclude configs whose recommend.cost is above this "
                                                              "(unset: no budget)")
    latency_budget_ms: float | None = Field(None, gt=0, description="exclude configs whose p95 latency of "
                                            "recommend.latency_stage is above this many ms (unset: no budget)")
    latency_stage: str = Field("total", description="the stage whose p95 latency the budget holds: total, "
                                                    "embed_query, leg_<name>, fusion, rerank, grouping")

    @model_validator(mode="before")
    @classmethod
    def _no_latency_tie(cls, data):
        if isinstance(data, dict) and "latency_tolerance_ms" in data:
            raise ValueError("latency_tolerance_ms is gone: latency no longer ties configs; set "
                             "recommend.latency_budget_ms to exclude configs slower than a p95 you accept")
        return data

    @field_validator("margin")
    @classmethod
    def _margin(cls, margin: float | str) -> float | str:
        parse_margin(margin)
        return margin

    @field_validator("guards")
    @classmethod
    def _metric_names(cls, guards: list[str]) -> list[str]:
        bad = [g for g in guards if not METRIC_NAME.match(g)]
        if bad:
            raise ValueError(f"not metric names: {bad}; use names as runs log them, e.g. chunk_ndcg_at_10, "
                             "recall_at_10")
        lower = [g for g in guards if lower_is_better(g)]
        if lower:
            raise ValueError(f"{', '.join(lower)}: a guard is a quality metric; latencies and costs are budgets now: "
                             "set recommend.latency_budget_ms (p95 of recommend.latency_stage) or "
                             "recommend.cost_budget")
        return guards

    @field_validator("cost")
    @classmethod
    def _cost_name(cls, name: str) -> str:
        if not METRIC_NAME.match(name):
            raise ValueError(f"not a metric name: {name!r}; e.g. cost_index_bytes, cost_embed_seconds")
        if problem := cost_problem(name):
            raise ValueError(problem)
        return name

    @field_validator("latency_stage")
    @classmethod
    def _stage_name(cls, name: str) -> str:
        if problem := stage_problem(name):
            raise ValueError(problem)
        return name

    def margin_text(self) -> str:
        value, relative = parse_margin(self.margin)
        return f"{value * 100:g}%" if relative else f"{value:g}"
