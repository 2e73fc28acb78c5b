"""The question set in MLflow: a run's dataset input, and a dataset published as a GenAI evaluation dataset.

- ``log_dataset_input``: the run's ``dataset.json`` (kbench.tracking.run_records) as an MLflow dataset input
  (``log_inputs``): its name (with the sample, when the run sampled), the content digest, the source (a registered
  name, a folder, or a generated set with its method, model and prompt hash) and a profile (questions,
  documents, label kind), in the context ``evaluation``. This fills the runs list's Dataset column and lineage.
- ``publish_record``: a run folder's ``dataset.json`` as the evaluation dataset ``<name>@<digest[:8]>``, once (a
  sweep does it, so its set is in MLflow's Datasets view without ``kbench datasets publish``).
- ``publish_questions``: a dataset's questions as an MLflow evaluation dataset (records ``inputs.question``,
  ``expectations.expected_retrieved_context``, tag ``kbench.query_id``), which ``dataset.questions_from`` reads
  back (kbench.datasets.mlflow_questions).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kbench.datasets.mlflow_questions import QUERY_ID_TAG, datasets_named, fluent_tracking_uri, question_records
from kbench.records import Dataset
from kbench.tracking.run_records import expected_context

DATA_CONTEXT = "mlflow.data.context"  # MLflow's input tag shown beside the dataset ("evaluation")


def dataset_entity(record: dict[str, Any]):
    """An ``mlflow.entities.Dataset`` for a run folder's ``dataset.json``."""
    from mlflow.entities import Dataset as MlflowDataset

    source = dict(record["source"])
    if source.get("path"):
        source["uri"] = source["path"]
    schema = {"mlflow_colspec": [{"type": "string", "name": "query_id", "required": True},
                                 {"type": "string", "name": "question", "required": True},
                                 {"type": "string", "name": "expected_retrieved_context", "required": False}]}
    profile = {"num_rows": len(record["questions"]), "documents": record["documents"], "labels": record["labels"],
               "content_hash": record["content_hash"]}
    return MlflowDataset(name=record["name"], digest=record["digest"][:36],
                         source_type="local" if source.get("path") else "code", source=json.dumps(source),
                         schema=json.dumps(schema), profile=json.dumps(profile))


def log_dataset_input(client, run_id: str, record: dict[str, Any]) -> bool:
    """Log the question set as the run's dataset input, unless the run already has it; True when logged."""
    from mlflow.entities import DatasetInput, InputTag

    entity = dataset_entity(record)
    inputs = client.get_run(run_id).inputs
    if any(d.dataset.name == entity.name and d.dataset.digest == entity.digest
           for d in (inputs.dataset_inputs if inputs else [])):
        return False
    client.log_inputs(run_id, datasets=[DatasetInput(entity, tags=[InputTag(DATA_CONTEXT, "evaluation")])])
    return True


@dataclass
class Published:
    dataset_id: str
    name: str
    records: int  # records the evaluation dataset holds now
    merged: int  # questions whose text repeats another's: MLflow keys records by their inputs and keeps one


def publish_questions(dataset: Dataset, name: str, tracking_uri: str, experiment_id: str) -> Published:
    """Create (or update) the evaluation dataset ``name`` with ``dataset``'s questions and labels."""
    from mlflow.genai.datasets import create_dataset

    records = [{"inputs": {"question": q.text},
                "expectations": {"expected_retrieved_context": expected_context(dataset, q.query_id)},
                "tags": {QUERY_ID_TAG: q.query_id}} for q in dataset.queries]
    with fluent_tracking_uri(tracking_uri):
        found = datasets_named(name, "--name")
        target = found[0] if found else create_dataset(name=name, experiment_id=[experiment_id],
                                                       tags={"kbench.dataset": dataset.name})
        target.merge_records(records)
        dataset_id = target.dataset_id
    count = len(question_records(dataset_id, tracking_uri))
    return Published(dataset_id, name, count, len(records) - len({q.text for q in dataset.queries}))


def set_label(record: dict[str, Any]) -> str:
    """A question set as people name it in MLflow: its name and its digest's first 8 characters (``docs@1a2b3c4d``)."""
    return f"{record['name']}@{record['digest'][:8]}"


def publish_record(record: dict[str, Any], tracking_uri: str, experiment_id: str) -> str:
    """``dataset.json``'s questions and labels as the evaluation dataset ``set_label(record)``, created once (the
    label names the content, so an existing one already holds them); its dataset id."""
    from mlflow.genai.datasets import create_dataset

    name = set_label(record)
    with fluent_tracking_uri(tracking_uri):
        found = datasets_named(name, "dataset name")
        if found:
            return found[0].dataset_id
        target = create_dataset(name=name, experiment_id=[experiment_id],
                                tags={"kbench.dataset": record.get("dataset", record["name"]),
                                      "kbench.digest": record["digest"]})
        target.merge_records([{"inputs": {"question": q["question"]},
                               "expectations": {"expected_retrieved_context": q["expected"]},
                               "tags": {QUERY_ID_TAG: q["query_id"]}} for q in record["questions"]])
        return target.dataset_id
