"""Query pre-stages (the GWI spec's query processing): expansion, decomposition, HyDE."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".config": ["DecompositionConfig", "ExpansionConfig", "HydeConfig", "QueryConfig"],
    ".stage": ["QueryPlan", "check_query", "plan_queries", "search_planned"],
})
