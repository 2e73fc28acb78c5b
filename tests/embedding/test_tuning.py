"""The backend tuning (kbench/embedding/tuning.py) and the choices made from it (choice.py): a tuning is measured
once per model and machine and kept; another CPU or other runtime versions are measured again; ``fast`` never takes
a backend beyond the drift gate, in a batch or alone; the default, ``exact``, computes in f32 and scores as torch
does; ``kbench models tune --check`` exits 2 on a drifting backend.

Real tunings here measure paraphrase-MiniLM-L3-v2 (3 layers, ONNX and OpenVINO only) on a few passages: seconds.
The choice rules are fed hand-made drift tables (what a CPU this one is not would measure)."""
from __future__ import annotations

import json

import pytest

from kbench.embedding import choice, tuning
from kbench.embedding.config import DriftGate, EmbeddingConfig
from kbench.embedding.tuning import Measured, Tuning, TuningSample, rbo

SMALL = "paraphrase-MiniLM-L3-v2"


@pytest.fixture
def fresh_store(tmp_path, monkeypatch):
    """An empty tuning store of this test, nothing remembered from other tests, and a count of measurements."""
    monkeypatch.setenv("KBENCH_TUNING_DIR", str(tmp_path / "tuning"))
    monkeypatch.setattr(tuning, "_kept", {})
    monkeypatch.setattr(choice, "_choices", {})
    measured = []
    real = tuning.measure

    def counting(model, *args, **kwargs):
        measured.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(tuning, "measure", counting)
    return measured


def few_passages() -> TuningSample:
    sample = tuning.demo_sample()
    return TuningSample(sample.passages[:16], sample.questions[:6], "16 passages of the demo set")


def forget(monkeypatch) -> None:
    """As a new process would start: nothing read or chosen yet."""
    monkeypatch.setattr(tuning, "_kept", {})
    monkeypatch.setattr(choice, "_choices", {})


def test_a_tuning_is_kept_and_a_second_resolution_does_not_measure_again(fresh_store, tmp_path, monkeypatch):
    config = EmbeddingConfig(model=SMALL)
    assert config.backend == "exact"  # the default
    first = choice.choice_for(config, sample=few_passages, exports=tmp_path / "exports")
    assert fresh_store == [SMALL]
    kept = list((tmp_path / "tuning").glob(f"{SMALL}-*.json"))
    assert len(kept) == 1 and not list((tmp_path / "tuning").glob(".partial-*"))
    data = json.loads(kept[0].read_text())
    assert data["reference"] == "onnx" and data["sample"]["passages"] == 16  # no torch weights: the f32 file
    assert {r["backend"] for r in data["rows"]} >= {"onnx", "openvino"}
    assert set(data["key"]) >= {"machine", "runtimes", "revision", "kbench", "recipes"}
    assert first.row is not None and first.row.computes_in == "f32" and choice.is_exact(first.row)

    forget(monkeypatch)  # a new process on the same machine reads it
    again = choice.choice_for(config, sample=few_passages, exports=tmp_path / "exports")
    assert fresh_store == [SMALL] and (again.backend, again.precision) == (first.backend, first.precision)
    assert "measured in this process" in first.why and "measured in this process" not in again.why
    from kbench.embedding.stage import CachedEmbedder

    embedder = CachedEmbedder(config, tmp_path / "ws" / "cache")  # a run resolves it the same, and never re-times
    assert fresh_store == [SMALL] and embedder.config.backend == first.backend
    assert embedder.fingerprint.get("backend") == first.backend  # the cache is keyed by what runs, never "exact"


def test_another_cpu_or_other_runtime_versions_are_measured_again(fresh_store, tmp_path, monkeypatch):
    def tuned():  # the ONNX file alone: the reference of a model without torch weights, a second to measure
        return tuning.tune(SMALL, few_passages, tmp_path / "exports", backends=["onnx"])

    first = tuned()
    assert tuned() is first and fresh_store == [SMALL]  # kept: asked again, nothing measured
    machine = tuning.machine()
    monkeypatch.setattr(tuning, "machine", lambda: {**machine, "flags": "another-set-of-flags"})
    forget(monkeypatch)
    assert tuned().key["machine"]["flags"] == "another-set-of-flags" and fresh_store == [SMALL, SMALL]
    versions = tuning.runtime_versions()
    monkeypatch.setattr(tuning, "runtime_versions", lambda: {**versions, "openvino": "2099.1"})
    forget(monkeypatch)
    assert tuned().key["runtimes"]["openvino"] == "2099.1" and fresh_store == [SMALL, SMALL, SMALL]
    assert len(list((tmp_path / "tuning").glob(f"{SMALL}-*.json"))) == 3  # one per machine key, none replaced


def test_the_machine_key_follows_the_flags_and_instruction_caps(tmp_path, monkeypatch):
    from kbench.embedding.cpu import read_machine

    def machine_with(flags: str):
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nmodel name\t: a CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
        return read_machine(path)

    avx2, amx = machine_with("fpu avx2 fma"), machine_with("fpu avx2 fma avx512f amx_bf16")
    assert avx2["cpu"] == amx["cpu"] == "a CPU" and avx2["flags"] != amx["flags"]
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # benchmarks/encoding.py --cpu avx2: another machine to a tuning
    assert machine_with("fpu avx2 fma")["ONEDNN_MAX_CPU_ISA"] == "AVX2"


def measured(backend: str, speedup: float, overlap: float = 1.0, error: float = 0.0, *, alone: float | None = None,
             computes_in: str = "f32", precision: str = "auto") -> Measured:
    return Measured(backend, precision, computes_in, 30.0 * speedup, speedup, 1.0, 10.0, error, error * 2, overlap,
                    overlap - 0.05, overlap if alone is None else alone, overlap - 0.05, 0.0)


def hand_made(*rows: Measured) -> Tuning:
    return Tuning("all-MiniLM-L6-v2", {}, "torch", list(rows), {"source": "a hand-made table", "passages": 200},
                  1.0, "2026-01-01T00:00:00", "0.10 0.10 0.10")


# What an AVX2 CPU without bf16 might measure: int8 fastest but drifting, OpenVINO in f32 only
AVX2_CPU = hand_made(measured("torch", 1.0), measured("onnx", 1.16, error=1e-13),
                     measured("onnx-int8", 1.62, 0.89, 0.0076, computes_in="int8/f32"),
                     measured("openvino", 1.36, error=2e-13),
                     measured("openvino-int8", 1.22, 0.91, 0.0045, computes_in="int8/f32"))
# A CPU with bf16: OpenVINO's bf16 drifts a little, within the gate; an int8 that holds in a batch but not alone
BF16_CPU = hand_made(measured("torch", 1.0), measured("onnx", 1.40, error=1e-13),
                     measured("onnx-int8", 2.70, 0.97, 0.0006, alone=0.90, computes_in="int8/f32"),
                     measured("openvino", 4.08, 0.996, 1.4e-5, computes_in="bf16"),
                     measured("openvino", 1.61, error=3e-13, precision="f32"),
                     measured("openvino-int8", 4.29, 0.92, 0.0044, computes_in="int8/bf16"))


def test_fast_never_runs_a_backend_beyond_the_gate_and_exact_only_f32():
    gate = DriftGate()
    avx2_fast, avx2_exact = choice.choose(AVX2_CPU, "fast", gate), choice.choose(AVX2_CPU, "exact", gate)
    assert avx2_fast.backend == "openvino" and avx2_exact.backend == "openvino"  # onnx-int8 is faster, and drifts
    assert "1.36x torch" in avx2_fast.why and "within the drift gate" in avx2_fast.why
    fast, exact = choice.choose(BF16_CPU, "fast", gate), choice.choose(BF16_CPU, "exact", gate)
    assert (fast.backend, fast.precision) == ("openvino", "auto")  # bf16: within the gate, never exact
    assert (exact.backend, exact.precision) == ("openvino", "f32")
    # onnx-int8 holds in a batch (0.97) but not alone (0.90): not fast, even with the cosine bound loosened
    assert choice.choose(hand_made(*BF16_CPU.rows[:3]), "fast", DriftGate(max_cosine_error=0.01)).backend == "onnx"
    assert choice.gate_problem(BF16_CPU.rows[2], gate).startswith("mean top-10 overlap 0.970 in a batch, 0.900 alone")
    loose = DriftGate(min_overlap=0.85, max_cosine_error=0.01)  # a looser gate lets int8 through
    assert choice.choose(BF16_CPU, "fast", loose).backend == "openvino-int8"
    strict = DriftGate(min_overlap=0.999)
    assert choice.choose(BF16_CPU, "fast", strict).label == "openvino (f32)"  # only the exact ones are left
    slow = hand_made(measured("torch", 1.0), measured("onnx", 0.9, error=1e-13))
    assert choice.choose(slow, "exact", gate).backend == choice.choose(slow, "fast", gate).backend == "torch"


def test_the_rank_biased_overlap_of_two_top_tens():
    assert rbo(list(range(10)), list(range(10))) == pytest.approx(1.0)
    assert rbo(list(range(10)), list(range(10, 20))) == 0.0
    last_swapped = rbo(list(range(10)), [*range(9), 42])
    first_swapped = rbo(list(range(10)), [42, *range(1, 10)])
    assert 0.9 < last_swapped < 1.0 and first_swapped < last_swapped  # the top ranks weigh most
    assert rbo([1, 0, *range(2, 10)], list(range(10))) < 1.0  # the same ten, two of them swapped


def test_the_default_is_exact_on_this_machine_says_so_and_torch_still_runs_when_named():
    from kbench.embedding.stage import load_encoder

    picked = choice.choice_for(EmbeddingConfig())  # the test run's tuning (tests/conftest.py tuning_store)
    assert picked.row is not None and picked.row.computes_in == "f32" and choice.is_exact(picked.row)
    fastest_exact = max((r for r in picked.tuning.rows if choice.is_exact(r)), key=lambda r: r.chunks_per_s)
    assert picked.row == fastest_exact
    # what a run records and says: the MLflow params, a sweep's line for each config
    from kbench.config import load_experiment
    from kbench.paths import REPO_ROOT
    from kbench.tracking.mlflow_run import run_params

    params = run_params(load_experiment(REPO_ROOT / "configs" / "quickstart.yaml"))
    assert params["embedding.backend"] == "exact" and params["embedding.backend_ran"] == picked.label
    assert params["embedding.backend_why"] == picked.why
    assert choice.drift_note(EmbeddingConfig()) == f" (embedding {picked.label}: {choice.drift_text(picked.row)})"
    assert choice.drift_note(EmbeddingConfig(model="wordllama-l2-supercat")) == ""  # a static model: nothing chosen
    named = load_encoder(EmbeddingConfig(backend="torch"))
    assert named.model is not None and named.onnx is None  # sentence-transformers on torch, as the config says
    assert choice.resolved(EmbeddingConfig(backend="torch")).backend == "torch"


def test_check_exits_2_naming_the_backend_its_drift_and_the_gate(tmp_path, monkeypatch, capsys):
    from kbench.cli import main

    monkeypatch.setenv("KBENCH_TUNING_DIR", str(tmp_path / "tuning"))
    monkeypatch.setattr(tuning, "_kept", {})
    monkeypatch.setattr(choice, "_choices", {})
    name, key = tuning.tuning_key("all-MiniLM-L6-v2")
    path = tuning.tuning_path(name, key)
    path.parent.mkdir(parents=True)
    table = hand_made(*BF16_CPU.rows)
    table.key = key
    path.write_text(json.dumps(table.to_json()))  # this machine, as a bf16 CPU measured it (no re-timing)
    assert main(["models", "tune", "--check", "--backend", "openvino"]) == 0
    out = capsys.readouterr().out
    assert "drift gate: openvino of all-MiniLM-L6-v2 is within it on this machine" in out
    assert "onnx-int8" in out and "beyond" in out and "fast" in out  # the table: its marks
    config = tmp_path / "int8.yaml"
    config.write_text("dataset: {name: demo}\nembedding: {backend: onnx-int8}\n")
    with pytest.raises(SystemExit) as stopped:
        main(["models", "tune", "--check", "--config", str(config)])
    assert stopped.value.code == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("kbench: error:")]
    assert f"{config}: embedding.backend onnx-int8 of all-MiniLM-L6-v2 drifts beyond the drift gate" in line
    assert "0.970 in a batch, 0.900 alone (gate: at least 0.95)" in line
    config.write_text("dataset: {name: demo}\nembedding: {backend: onnx-int8, drift_gate: {min_overlap: 0.85}}\n")
    assert main(["models", "tune", "--check", "--config", str(config)]) == 0  # its own, looser gate
    with pytest.raises(SystemExit):
        main(["models", "tune", "--check"])  # nothing named to check
    assert "--config CONFIG" in capsys.readouterr().err


def test_a_catalogue_model_named_by_its_folder_shares_the_catalogue_tuning():
    """A config may name the MiniLM folder instead of its catalogue name: the same weights, one tuning (a second
    key measured them again, for minutes, and left a run waiting on the lock)."""
    from kbench.embedding.models import CATALOGUE

    folder = CATALOGUE["all-MiniLM-L6-v2"].locate()
    by_name, by_folder = tuning.tuning_key("all-MiniLM-L6-v2"), tuning.tuning_key(str(folder))
    assert by_folder == by_name and by_name[0] == "all-MiniLM-L6-v2"


def test_a_corpus_too_small_to_time_is_measured_on_the_demo_set_and_says_so(tmp_path):
    from kbench.datasets.config import DatasetConfig
    from tests.reliability.inputs import make_beir

    tiny = DatasetConfig(path=str(make_beir(tmp_path / "beir")))  # three one-line documents
    with pytest.raises(Exception, match="gives no passage to encode"):
        tuning.dataset_sample(tuning.load_dataset(tiny))
    sample = tuning.sample_of_dataset(tiny)
    assert sample.passages and sample.questions
    assert sample.source.startswith("the demo set") and "gives no passage to encode" in sample.source
