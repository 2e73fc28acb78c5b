"""Query pre-stages (the GWI spec's query processing): expansion, decomposition, HyDE."""
from kbench.retrieval.query.config import DecompositionConfig, ExpansionConfig, HydeConfig, QueryConfig
from kbench.retrieval.query.stage import QueryPlan, check_query, plan_queries, search_planned

__all__ = ["DecompositionConfig", "ExpansionConfig", "HydeConfig", "QueryConfig", "QueryPlan", "check_query",
           "plan_queries", "search_planned"]
