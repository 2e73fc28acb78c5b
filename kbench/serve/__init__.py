"""``kbench serve``: a local OpenAI-compatible endpoint (kbench.serve.server) with fault injection
(kbench.serve.faults) and a real local chat model (kbench.serve.chat_model)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".faults": ["KINDS", "Fault", "parse_fault"],
    ".server": ["FAULT_HEADER", "RunningServer", "ServeState", "start_server"],
})
