"""The CPU's flags read from /proc/cpuinfo, its kind, and the prior: what `embedding.backend: fast` is expected to
run on a kind of CPU before this machine is measured (a pure function: no model loads, nothing timed)."""
from __future__ import annotations

import pytest

from kbench.embedding import choice
from kbench.embedding.choice import prior_fast
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.cpu import CPU_FLAGS, CpuFeatures, read_cpu_features
from kbench.embedding.models import CATALOGUE

# /proc/cpuinfo lines, cut to what matters, of the CPUs the table names
XEON_AMX = ("fpu sse4_2 avx f16c avx2 fma avx512f avx512dq avx512bw avx512vl avx_vnni avx512_bf16 avx512_vnni "
            "amx_bf16 amx_tile amx_int8")
EPYC_ZEN2 = "fpu sse4_2 avx f16c avx2 fma sha_ni clzero"  # AVX2 only: no AVX-512, VNNI, bf16 or AMX
ZEN4 = "fpu avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16"  # bf16 without AMX
CASCADE_LAKE = "fpu avx avx2 fma avx512f avx512bw avx512_vnni"  # VNNI without bf16
ALDER_LAKE = "fpu avx avx2 fma avx_vnni"  # VNNI in AVX2 form, no AVX-512


def cpuinfo(tmp_path, flags_line: str, key: str = "flags"):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: a CPU\n{key}\t\t: {flags_line}\n\nprocessor\t: 1\n"
                    f"{key}\t\t: {flags_line}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("line, kind, vnni", [(XEON_AMX, "bf16", True), (ZEN4, "bf16", True),
                                              (EPYC_ZEN2, "avx2", False), (CASCADE_LAKE, "avx2", True),
                                              (ALDER_LAKE, "avx2", True), ("fpu sse4_2 avx", "other", False)])
def test_the_flags_in_cpuinfo_give_the_kind_of_cpu(tmp_path, line, kind, vnni):
    cpu = read_cpu_features(cpuinfo(tmp_path, line))
    assert (cpu.kind, cpu.vnni, cpu.known) == (kind, vnni, True)
    deciding = [f for f in CPU_FLAGS if f in line.split()]  # widest first, as a run and a benchmark print them
    assert cpu.flags == set(deciding) and cpu.describe() == (" ".join(deciding) or f"none of {', '.join(CPU_FLAGS)}")


def test_a_cpu_whose_flags_cannot_be_read_is_other_and_says_why(tmp_path):
    missing = read_cpu_features(tmp_path / "no-cpuinfo")  # macOS, Windows
    assert (missing.kind, missing.known) == ("other", False) and "unreadable" in missing.describe()
    arm = read_cpu_features(cpuinfo(tmp_path, "fp asimd evtstrm aes sve", key="Features"))
    assert (arm.kind, arm.known, arm.flags) == ("other", True, frozenset())
    assert arm.describe().startswith("none of amx_bf16")


# The prior (kbench/embedding/cpu.py PRIOR_FAST): what `fast` is expected to run on a kind of CPU before this machine
# is measured; only ever shown, as a guess with where it was measured (a run tunes first and runs what it measured)
PRIOR = {
    "all-MiniLM-L6-v2": {"bf16": "openvino", "avx2": "openvino", "other": "torch"},
    "all-mpnet-base-v2": {"bf16": "openvino", "avx2": "openvino", "other": "torch"},
    "paraphrase-MiniLM-L3-v2": {"bf16": "openvino", "avx2": "openvino", "other": "onnx"},  # no torch weights
}
CPUS = {"bf16": [CpuFeatures.of("amx_bf16", "avx512_bf16", "avx512_vnni", "avx512f", "avx2"),
                 CpuFeatures.of("avx512_bf16", "avx512_vnni", "avx512f", "avx2")],
        "avx2": [CpuFeatures.of("avx2"), CpuFeatures.of("avx512_vnni", "avx512f", "avx2"),
                 CpuFeatures.of("avx_vnni", "avx2")],
        "other": [CpuFeatures.of(), CpuFeatures(frozenset(), known=False)]}


@pytest.mark.parametrize("model", sorted(PRIOR))
def test_the_prior_for_a_machine_not_tuned_follows_the_kind_of_cpu(model):
    for kind, cpus in CPUS.items():
        for cpu in cpus:
            assert cpu.kind == kind
            assert prior_fast(EmbeddingConfig(model=model), cpu) == PRIOR[model][kind], (model, cpu)
            assert PRIOR[model][kind] in CATALOGUE[model].backends


def test_the_prior_is_never_run_an_untuned_choice_says_so(tmp_path, monkeypatch):
    """With no tuning kept and tuning not allowed (a hint printed after a run), exact is the reference and fast the
    prior, each said as not measured here; a run itself tunes first (tests/embedding/test_tuning.py)."""
    import kbench.embedding.tuning as tuning

    monkeypatch.setenv("KBENCH_TUNING_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_kept", {})
    monkeypatch.setattr(choice, "_choices", {})
    exact = choice.choice_for(EmbeddingConfig(), tune_here=False)
    assert (exact.backend, exact.row) == ("torch", None) and "not measured on this machine" in exact.why
    fast = choice.choice_for(EmbeddingConfig(backend="fast"), tune_here=False)
    assert fast.row is None and "not measured on this machine" in fast.why and "guess" in fast.why
    assert not list(tmp_path.iterdir())  # nothing measured, nothing written
