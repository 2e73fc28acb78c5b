"""What `embedding.backend: fast` runs on each kind of CPU: the flags read from /proc/cpuinfo, and the decision
table fed hand-made CPUs (a pure function: no model loads, nothing timed)."""
from __future__ import annotations

import pytest

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.cpu import CPU_FLAGS, CpuFeatures, read_cpu_features
from kbench.embedding.models import CATALOGUE, FOLDER_FAST, fast_backend

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


# The decision table: model -> kind of CPU -> backend (docs/how-to/fast-embedding.md says the same)
TABLE = {
    "all-MiniLM-L6-v2": {"bf16": "openvino", "avx2": "onnx-int8", "other": "openvino"},
    "all-mpnet-base-v2": {"bf16": "openvino", "avx2": "openvino", "other": "openvino"},  # no int8: cosine 0.86
    "paraphrase-MiniLM-L3-v2": {"bf16": "openvino", "avx2": "openvino", "other": "openvino"},
}
CPUS = {"bf16": [CpuFeatures.of("amx_bf16", "avx512_bf16", "avx512_vnni", "avx512f", "avx2"),
                 CpuFeatures.of("avx512_bf16", "avx512_vnni", "avx512f", "avx2")],
        "avx2": [CpuFeatures.of("avx2"), CpuFeatures.of("avx512_vnni", "avx512f", "avx2"),
                 CpuFeatures.of("avx_vnni", "avx2")],
        "other": [CpuFeatures.of(), CpuFeatures(frozenset(), known=False)]}


@pytest.mark.parametrize("model", sorted(TABLE))
def test_fast_runs_the_backend_the_table_gives_for_each_kind_of_cpu(model):
    for kind, cpus in CPUS.items():
        for cpu in cpus:
            assert cpu.kind == kind
            assert fast_backend(model, cpu=cpu) == TABLE[model][kind], (model, cpu)
            assert TABLE[model][kind] in CATALOGUE[model].backends


def test_fast_outside_the_catalogue_and_for_models_without_backends():
    for cpus in CPUS.values():
        for cpu in cpus:
            assert fast_backend("/some/model/folder", cpu=cpu) == FOLDER_FAST == "openvino"
            assert fast_backend("wordllama-l2-supercat", "static", cpu=cpu) == "torch"
            assert fast_backend("text-embedding-3-small", "openai", cpu=cpu) == "torch"


def test_fast_resolves_on_load_for_the_machine_the_config_loads_on(monkeypatch):
    """The alias is resolved when the config loads, from this process's CPU: the saved config, the run key and
    the fingerprint name the backend that runs."""
    import kbench.embedding.models as models

    for kind, cpus in CPUS.items():
        monkeypatch.setattr(models, "cpu_features", lambda cpu=cpus[0]: cpu)
        config = EmbeddingConfig(backend="fast")
        assert config.backend == TABLE["all-MiniLM-L6-v2"][kind]
        assert config.model_dump()["backend"] != "fast"


def test_fast_is_recorded_in_the_fingerprint_and_keys_the_run_by_what_ran(monkeypatch):
    """On an AVX2 CPU `fast` runs onnx-int8: the config, the run key and the fingerprint say so, as they do for a
    config naming onnx-int8; on a bf16 CPU they say openvino. The run key follows the resolved backend because
    the vectors do: a sweep resumed on another kind of CPU recomputes rather than reuse another backend's run."""
    import kbench.embedding.models as models
    from kbench.config import load_experiment
    from kbench.embedding.onnx_runtime import openvino_computes_in
    from kbench.paths import REPO_ROOT
    from kbench.tracking.fingerprint import run_fingerprint

    monkeypatch.chdir(REPO_ROOT)
    keys = {}
    for kind, backend, runs_in in (("avx2", "onnx-int8", "int8/f32"), ("bf16", "openvino", None)):
        monkeypatch.setattr(models, "cpu_features", lambda cpu=CPUS[kind][0]: cpu)
        fast = load_experiment("configs/quickstart.yaml", ["embedding.backend=fast"])
        named = load_experiment("configs/quickstart.yaml", [f"embedding.backend={backend}"])
        assert fast.embedding.backend == backend and fast.run_key() == named.run_key()
        fingerprint = run_fingerprint(fast)
        assert fingerprint["model"]["computes_in"] == (runs_in or openvino_computes_in("auto"))
        assert fingerprint["hash"] == run_fingerprint(named)["hash"]
        keys[kind] = fast.run_key()
    assert keys["avx2"] != keys["bf16"] != load_experiment("configs/quickstart.yaml").run_key()
