"""``kbench serve``: a local OpenAI-compatible endpoint (kbench.serve.server) with fault injection
(kbench.serve.faults) and a real local chat model (kbench.serve.chat_model)."""
from kbench.serve.faults import KINDS, Fault, parse_fault
from kbench.serve.server import FAULT_HEADER, RunningServer, ServeState, start_server

__all__ = ["FAULT_HEADER", "KINDS", "Fault", "RunningServer", "ServeState", "parse_fault", "start_server"]
