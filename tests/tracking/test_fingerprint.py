"""Run fingerprints and dataset content hashes: one changed document changes the run key and the fingerprint,
and a resumed sweep re-runs the configs whose dataset changed instead of reusing stale finished runs."""
from __future__ import annotations

import json
import shutil

import pytest

from kbench.config import load_experiment
from kbench.runner import run_experiment
from kbench.sweep import expand_sweep, make_executor, run_sweep
from kbench.tracking.fingerprint import run_fingerprint
from tests.conftest import CHECKOUT_MODELS, DEMO, make_config

BM25 = {"legs": ["bm25"], "top_k": 10}  # no embedding: these tests are about data, not models


def demo_copy(tmp_path):
    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    return folder


def config(workspace, folder, **extra):
    return make_config(workspace, dataset={"path": str(folder), "max_queries": 6}, retrieval=BM25, **extra)


def test_one_changed_document_changes_run_key_and_fingerprint(tmp_path):
    folder = demo_copy(tmp_path)
    before = load_experiment(config(tmp_path / "ws", folder))
    key, fingerprint = before.run_key(), run_fingerprint(before)
    assert set(fingerprint) == {"dataset_hash", "chunker", "model", "index", "kbench_version", "hash"}
    assert fingerprint["model"]["revision"] and fingerprint["chunker"]["source_hash"] != "unavailable"
    assert load_experiment(config(tmp_path / "ws", folder)).run_key() == key  # equal data, equal key

    doc = folder / "docs" / "api" / "jobs.md"
    doc.write_text(doc.read_text(encoding="utf-8").replace("job", "task", 1), encoding="utf-8")
    after = load_experiment(config(tmp_path / "ws", folder))
    assert after.run_key() != key
    assert run_fingerprint(after)["dataset_hash"] != fingerprint["dataset_hash"]
    assert run_fingerprint(after)["hash"] != fingerprint["hash"]
    assert {k: v for k, v in run_fingerprint(after).items() if k not in ("dataset_hash", "hash")} == \
        {k: v for k, v in fingerprint.items() if k not in ("dataset_hash", "hash")}


def test_run_folder_and_mlflow_tags_carry_the_fingerprint(tmp_path):
    folder = demo_copy(tmp_path)
    experiment = load_experiment(config(tmp_path / "ws", folder))
    result = run_experiment(experiment, progress=False)
    written = json.loads((result.run_dir / "fingerprint.json").read_text())
    assert written == run_fingerprint(experiment)
    from mlflow.tracking import MlflowClient

    tags = MlflowClient(result.tracking_uri).get_run(result.run_id).data.tags
    assert tags["kbench.fingerprint"] == written["hash"] and tags["kbench.dataset_hash"] == written["dataset_hash"]


def test_resumed_sweep_reruns_configs_whose_dataset_changed(tmp_path):
    folder = demo_copy(tmp_path)
    data = config(tmp_path / "ws", folder, sweep={"retrieval.top_k": [5, 10]})
    data["name"] = "t"
    first = run_sweep(expand_sweep(data), make_executor("local"), say=lambda s: None, report=False)
    assert set(first.status.values()) == {"ran"}
    same = run_sweep(expand_sweep(data), make_executor("local"), say=lambda s: None, report=False)
    assert set(same.status.values()) == {"done"}  # unchanged data: nothing recomputed

    question_file = folder / "questions.jsonl"
    lines = question_file.read_text(encoding="utf-8").splitlines()
    question_file.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")  # one question less
    again = run_sweep(expand_sweep(data), make_executor("local"), say=lambda s: None, report=False)
    assert again.status == {"top_k=5": "ran", "top_k=10": "ran"}  # never "done" or "reused" from stale runs
    assert again.parent_run_id != first.parent_run_id


@pytest.mark.xdist_group(CHECKOUT_MODELS)  # its OpenVINO export, made with no workspace, goes to the checkout
def test_openvino_precision_is_fingerprinted_and_tagged_as_what_runs(tmp_path, workspace):
    """``precision: auto`` computes in bf16 on a CPU with bf16 instructions and in f32 elsewhere: the same
    config gives different scores on two machines, so the fingerprint (and a tag) say which ran."""
    from mlflow.tracking import MlflowClient

    from kbench.embedding.config import EmbeddingConfig
    from kbench.embedding.onnx_runtime import openvino_computes_in
    from kbench.embedding.stage import load_encoder

    folder = demo_copy(tmp_path)
    plain = run_fingerprint(load_experiment(config(workspace, folder)))
    assert plain["model"]["computes_in"] == "f32" and "rerank" not in plain

    rerank = {"enabled": True, "strategy": "cross_encoder", "model": "any-cross-encoder", "backend": "openvino-int8",
              "precision": "f32"}
    data = make_config(workspace, dataset={"path": str(folder), "max_queries": 4},
                       embedding={"backend": "openvino", "threads": 1}, rerank=rerank)
    fingerprint = run_fingerprint(load_experiment(data))
    runs_in = load_encoder(EmbeddingConfig(backend="openvino", threads=1)).onnx.precision  # a compiled model says
    assert fingerprint["model"]["computes_in"] == openvino_computes_in("auto") == runs_in
    assert fingerprint["rerank"] == {"computes_in": "int8/f32"}
    as_f32 = run_fingerprint(load_experiment({**data, "embedding": {"backend": "openvino", "precision": "f32"}}))
    assert as_f32["model"]["computes_in"] == "f32"
    assert (as_f32["hash"] != fingerprint["hash"]) == (runs_in != "f32")

    del data["rerank"]
    result = run_experiment(load_experiment(data), progress=False)
    tags = MlflowClient(result.tracking_uri).get_run(result.run_id).data.tags
    assert tags["kbench.computes_in"] == f"embedding {runs_in}"
    # a sweep's children carry it too (each from the fingerprint written where it ran)
    swept = run_sweep(expand_sweep({**data, "name": "ov", "sweep": {"embedding.precision": ["f32", "bf16"]}}),
                      make_executor("local"), say=lambda s: None, report=False)
    children = MlflowClient(result.tracking_uri).search_runs(
        [MlflowClient(result.tracking_uri).get_run(swept.parent_run_id).info.experiment_id],
        f"tags.`mlflow.parentRunId` = '{swept.parent_run_id}'")
    assert set(swept.status.values()) == {"ran"}
    assert sorted(c.data.tags["kbench.computes_in"] for c in children) == sorted(
        ["embedding f32", f"embedding {openvino_computes_in('bf16')}"])


def test_every_backend_says_what_it_computes_in_and_torch_keeps_its_hash(tmp_path, workspace):
    """onnx-int8 computed int8 MatMuls with nothing in the fingerprint saying so; now every backend states it.
    f32 on torch and onnx was implicit before, so it stays out of their hash: their old runs still compare."""
    from kbench.embedding.choice import choice_for
    from kbench.embedding.config import EmbeddingConfig
    from kbench.embedding.onnx_runtime import computes_in, openvino_computes_in
    from kbench.hashing import stable_hash

    folder = demo_copy(tmp_path)

    def fingerprint(embedding, rerank=None):
        return run_fingerprint(load_experiment(config(workspace, folder, embedding=embedding,
                                                      **({"rerank": rerank} if rerank else {}))))

    torch_run = fingerprint({"backend": "torch"})
    without = {**torch_run, "model": {k: v for k, v in torch_run["model"].items()  # unhashed: what ran here, why
                                      if k not in ("computes_in", "backend_ran", "backend_why")}}
    assert torch_run["hash"] == stable_hash({k: v for k, v in without.items() if k != "hash"})  # as before
    assert fingerprint({"backend": "onnx"})["model"]["computes_in"] == "f32"
    onnx_int8 = fingerprint({"backend": "onnx-int8"})
    assert onnx_int8["model"]["computes_in"] == "int8/f32" and onnx_int8["hash"] != torch_run["hash"]
    ov_int8 = fingerprint({"backend": "openvino-int8"})
    assert ov_int8["model"]["computes_in"] == f"int8/{openvino_computes_in('auto')}"
    fast = choice_for(EmbeddingConfig(backend="fast"))  # measured here: the fingerprint says what fast ran
    assert fingerprint({"backend": "fast"})["model"]["computes_in"] == computes_in(
        fast.backend, openvino_computes_in(fast.precision) if fast.backend.startswith("openvino") else "f32")
    exact = fingerprint({})  # the default: whichever exact backend ran, torch's results and torch's hash
    assert exact["hash"] == torch_run["hash"] and exact["model"]["computes_in"] == "f32"
    assert exact["model"]["backend_ran"] == choice_for(EmbeddingConfig()).label
    assert exact["model"]["backend_why"].startswith("exact: the fastest backend here")

    rerank = {"enabled": True, "strategy": "cross_encoder", "model": "any-cross-encoder"}
    torch_rerank = fingerprint({"backend": "torch"}, rerank)
    assert torch_rerank["rerank"] == {"computes_in": "f32"} and torch_rerank["hash"] == torch_run["hash"]
    int8_rerank = fingerprint({"backend": "torch"}, {**rerank, "backend": "onnx-int8"})
    assert int8_rerank["rerank"] == {"computes_in": "int8/f32"} and int8_rerank["hash"] != torch_run["hash"]
