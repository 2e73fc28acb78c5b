"""What this machine's CPU is, read from /proc/cpuinfo once per process: the key a backend tuning is kept under,
and the prior for a machine that has not been tuned.

The backend a run gets is chosen from measurements made on the machine itself (kbench/embedding/tuning.py,
choice.py): on the first CPU a table of CPU kinds did not cover, a choice read from that table was wrong (issue
55: an AMD EPYC with AVX2 only, where the table's onnx-int8 lost 0.0095 doc nDCG@10, twice the bound it promised).
What stays here:

- ``machine()``: the CPU's model name, all its flags and its usable cores, hashed into the tuning key: another CPU,
  or the same machine with other flags (a VM, an emulator capping instructions), is measured again;
- ``CpuFeatures`` and its ``kind`` (``bf16``, ``avx2``, ``other``), which benchmarks print beside every figure;
- ``PRIOR_FAST``: what ``embedding.backend: fast`` is expected to run on a kind of CPU *before* it is measured
  there, only ever shown as an expectation (a run's hint on a machine not tuned), never run on its word.

Reading /proc/cpuinfo costs a millisecond and imports nothing.
"""
from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# The flags that sort a CPU into a kind (and that benchmarks print beside every figure), widest first
CPU_FLAGS = ("amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni", "avx_vnni", "avx512f", "avx2")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
VNNI_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")
CPU_KINDS = ("bf16", "avx2", "other")

# The prior: what `fast` was measured to run on each kind of CPU somewhere else, with where. Shown on a machine not
# tuned yet, as what to expect; the run itself tunes first and runs what it measured (choice.py).
# - bf16: OpenVINO computes in bf16 there: 3.50-4.08x torch on MiniLM on an Intel Xeon with AMX (2 cores), doc
#   nDCG@10 within 0.0021 of torch (docs/how-to/fast-embedding.md);
# - avx2: OpenVINO in f32, exact: 1.36x torch on an AMD EPYC with AVX2 only (issue 55), where onnx-int8 was faster
#   (1.62x) but lost 0.0095 doc nDCG@10 on the demo set;
# - other (ARM, an x86 without AVX2, flags unreadable): nothing measured, so torch.
PRIOR_FAST = {"bf16": "openvino", "avx2": "openvino", "other": "torch"}
PRIOR_SOURCE = {"bf16": "an Intel Xeon with AMX: 3.5-4.1x torch", "avx2": "an AMD EPYC with AVX2 only: 1.36x torch",
                "other": "no CPU of this kind measured"}


@dataclass(frozen=True)
class CpuFeatures:
    """The CPU flags of ``CPU_FLAGS`` it has; ``known`` False when they could not be read."""

    flags: frozenset[str]
    known: bool = True

    @classmethod
    def of(cls, *flags: str) -> CpuFeatures:
        """A hand-made CPU (tests, ``benchmarks/encoding.py --cpu avx2``): the given flags, of ``CPU_FLAGS``."""
        return cls(frozenset(f for f in flags if f in CPU_FLAGS))

    @property
    def kind(self) -> str:
        """bf16, avx2 or other (the module doc)."""
        if self.flags & set(BF16_FLAGS):
            return "bf16"
        if "avx2" in self.flags:
            return "avx2"
        return "other"

    @property
    def vnni(self) -> bool:
        return bool(self.flags & set(VNNI_FLAGS))

    def describe(self) -> str:
        """The flags of ``CPU_FLAGS`` it has, widest first ("avx512_vnni avx512f avx2"), for a run's or a
        benchmark's output; "unknown" when they could not be read."""
        if not self.known:
            return f"flags unknown ({CPUINFO} unreadable)"
        return " ".join(f for f in CPU_FLAGS if f in self.flags) or f"none of {', '.join(CPU_FLAGS)}"


def _cpuinfo_fields(cpuinfo: Path) -> dict[str, str] | None:
    """The first processor's fields (Linux lists the same for every core); None when the file cannot be read."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if not key.strip() and fields:
            break  # the blank line after the first processor
        fields.setdefault(key.strip(), value.strip())
    return fields


def read_cpu_features(cpuinfo: Path = CPUINFO) -> CpuFeatures:
    """The deciding flags of the first processor in ``cpuinfo``."""
    fields = _cpuinfo_fields(cpuinfo)
    if fields is None:
        return CpuFeatures(frozenset(), known=False)
    if "flags" in fields:
        return CpuFeatures(frozenset(fields["flags"].split()) & set(CPU_FLAGS))
    return CpuFeatures(frozenset())  # not an x86 CPU (ARM lists "Features"): none of the deciding flags


# Variables that cap the instructions the libraries use (benchmarks/encoding.py --cpu avx2 sets them): a capped
# machine is another machine to a tuning
INSTRUCTION_CAPS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")


def read_machine(cpuinfo: Path = CPUINFO) -> dict[str, str | int]:
    """What a tuning's speeds and drifts depend on in the machine: the CPU's model name, a digest of all its flags
    (x86 ``flags``, ARM ``Features``), the cores this process may use, and any instruction cap set in the
    environment (``INSTRUCTION_CAPS``)."""
    fields = _cpuinfo_fields(cpuinfo) or {}
    flags = " ".join(sorted((fields.get("flags") or fields.get("Features") or "").split()))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    found: dict[str, str | int] = {
        "cpu": fields.get("model name") or fields.get("Hardware") or fields.get("CPU part") or "unknown CPU",
        "flags": hashlib.sha256(flags.encode()).hexdigest()[:16] if flags else "unknown", "cores": cores}
    found.update({name: os.environ[name] for name in INSTRUCTION_CAPS if os.environ.get(name)})
    return found


@functools.cache
def cpu_features() -> CpuFeatures:
    """This machine's CPU, read once per process."""
    return read_cpu_features()


@functools.cache
def machine() -> dict[str, str | int]:
    """This machine, read once per process (``read_machine``)."""
    return read_machine()
