"""What this machine's CPU offers an encoder, read from /proc/cpuinfo once per process.

``embedding.backend: fast`` is chosen from it (``models.fast_backend``): a runtime is fast on a CPU only with
the instructions its kernels need. Three kinds of CPU decide, by the flags Linux reports:

- ``bf16``: bf16 instructions (``avx512_bf16``; every CPU with AMX, ``amx_bf16``, has them). OpenVINO computes
  in bf16 there by default, 3.5x torch on MiniLM with AMX and within 0.002 nDCG@10 of it.
- ``avx2``: AVX2 without bf16 (an AMD EPYC before Zen 4, a Xeon from Skylake to Ice Lake). OpenVINO computes
  in f32 there (1.08x torch measured), and its static int8 falls back to a slow oneDNN gemm on AVX2 alone
  (``benchmarks/encoding.py --cpu avx2``), while ONNX Runtime's dynamic int8 has a fast AVX2 kernel.
  With or without VNNI: the int8 recipe ``fast`` runs there computes the same integers on both (onnx_export.py).
- ``other``: flags unknown (no /proc/cpuinfo: macOS, Windows) or neither (ARM, an x86 without AVX2): the choice
  that is exact-enough everywhere (OpenVINO at its float precision), its speed unmeasured there.

Reading /proc/cpuinfo costs a millisecond and imports nothing, so a config resolves ``fast`` as it loads.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# The flags that decide (and that benchmarks print beside every figure), widest first
CPU_FLAGS = ("amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni", "avx_vnni", "avx512f", "avx2")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
VNNI_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")
CPU_KINDS = ("bf16", "avx2", "other")


@dataclass(frozen=True)
class CpuFeatures:
    """The CPU flags that decide ``fast`` (of ``CPU_FLAGS``); ``known`` False when they could not be read."""

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
        """The deciding flags it has, widest first ("avx512_vnni avx512f avx2"), for a run's or a benchmark's
        output; "unknown" when they could not be read."""
        if not self.known:
            return f"flags unknown ({CPUINFO} unreadable)"
        return " ".join(f for f in CPU_FLAGS if f in self.flags) or f"none of {', '.join(CPU_FLAGS)}"


def read_cpu_features(cpuinfo: Path = CPUINFO) -> CpuFeatures:
    """The deciding flags of the first processor in ``cpuinfo`` (Linux lists the same flags for every core)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return CpuFeatures(frozenset(), known=False)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return CpuFeatures(frozenset(value.split()) & set(CPU_FLAGS))
    return CpuFeatures(frozenset())  # not an x86 CPU (ARM lists "Features"): none of the deciding flags


@functools.cache
def cpu_features() -> CpuFeatures:
    """This machine's CPU, read once per process."""
    return read_cpu_features()
