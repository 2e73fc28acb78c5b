"""What makes kbench's MLflow pages open well: the experiment's description and headline view, the LLM stages'
prompts in the Prompt Registry, and a sweep's recommended config as a LoggedModel.

- **The headline view.** MLflow keeps a runs-list layout (sort, columns) as an experiment tag
  ``mlflow.sharedViewState.<key>`` and opens it at ``#/experiments/<id>/runs?viewStateShareKey=<key>``. kbench
  writes one (``kbench-headline``): runs sorted on the headline metric, its columns first (nDCG and recall at the
  finest level), then the sweep label and the knobs that differ between a sweep's configs (tags ``kbench.knob.*``); the
  experiment's description links to it. MLflow cannot make a view the default for everyone, so the link is the
  one click (README: "MLflow pages").
- **The description** (``mlflow.note.content`` on the experiment): ``tracking.experiment_description`` or a default
  saying what kbench logs where. kbench replaces only a description it wrote itself (tag ``kbench.experiment_note``
  holds its hash), never one edited in MLflow's UI.
- **Prompts**: each LLM stage's template (a run folder's ``prompts.json``) as a Prompt Registry version (a new
  version only when the text changed), linked to the run.
- **The sweep's recommendation** (its "winner": ``evaluation.recommend``, the one pick every surface names): a
  LoggedModel (type ``kbench-config``, named ``<sweep>-recommended``) holding its resolved config (params, the
  artifact ``winner.yaml``) and metrics, its source the config's child run; the parent and that child run list
  it as a model input.
"""
from __future__ import annotations

import json
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kbench.datasets.mlflow_questions import fluent_tracking_uri
from kbench.hashing import sha256_text
from kbench.tracking import tags as tag
from kbench.filter_strings import literal
from kbench.tracking.mlflow_run import logged_value

VIEW_KEY = "kbench-headline"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
NOTE_HASH_TAG = "kbench.experiment_note"  # the hash of the description kbench wrote (so it replaces only its own)
MODEL_TYPE = "kbench-config"
LINKED_PROMPTS = "mlflow.linkedPrompts"  # MLflow's run tag: the prompt versions linked to the run (JSON)
PROMPT_LINK_THREAD = "link_prompt_to_experiment_thread"  # MLflow's thread adding an experiment to a prompt's tags
_VARIABLE = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def _column(kind: str, name: str) -> str:
    return f"{kind}.`{name}`"


def view_state(headline: list[str], knobs: list[str], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The runs list sorted on ``headline[0]`` with the headline metrics, the Dataset, the sweep label and the
    differing ``knobs`` (the tags ``kbench.knob.<path>`` a sweep child carries) as columns; knob columns of an
    earlier sweep in the experiment are kept."""
    columns = [_column("attributes", "Dataset"), *(_column("metrics", m) for m in headline),
               _column("tags", tag.SWEEP_LABEL)]
    kept = [c for c in (previous or {}).get("selectedColumns", []) if c.startswith(f"tags.`{tag.KNOB_PREFIX}")]
    columns += list(dict.fromkeys([*(_column("tags", k) for k in knobs), *kept]))
    state: dict[str, Any] = {"selectedColumns": columns}
    if headline:
        state.update(orderByKey=_column("metrics", headline[0]), orderByAsc=False)
    return state


def default_description(name: str, experiment_id: str, headline: list[str]) -> str:
    """What the experiment holds; its first line (what MLflow shows collapsed) links the headline view."""
    link = f"#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}"
    best = f"`{headline[0]}`" if headline else "the headline metric"
    return "\n".join([
        f"**{name}**: kbench retrieval runs. **[Open the runs ranked on {best}, with the knobs that differ]({link})** "
        "(a saved view: sort and columns).",
        "",
        "One run per config; a sweep's configs are child runs of its parent run, whose description names the "
        "recommended config. Per run: its question set in the **Dataset** column; one trace per question under "
        "**Traces** (the run's "
        "ranking as a RETRIEVER span, each leg, the fusion and the reranker as child spans, the labels as "
        "expectations); per-question scores in the **Evaluation** view (table `per_query_results.json`); the LLM "
        "stages' prompts under **Prompts**; a sweep's recommended config under **Models**.",
    ])


def describe_experiment(client, experiment_id: str, name: str, headline: list[str], knobs: list[str] | None = None,
                        description: str | None = None) -> None:
    """Write the headline view and, unless someone else wrote the description, the experiment's description."""
    experiment = client.get_experiment(experiment_id)
    tags = experiment.tags
    previous = json.loads(tags[VIEW_TAG]) if VIEW_TAG in tags else None
    state = view_state(headline or [], knobs or [], previous)
    if state != previous:
        client.set_experiment_tag(experiment_id, VIEW_TAG, json.dumps(state))
    text = description if description is not None else default_description(name, experiment_id, headline)
    current = tags.get(tag.MLFLOW_NOTE)
    ours = current is None or sha256_text(current) == tags.get(NOTE_HASH_TAG)
    if ours and current != text:
        client.set_experiment_tag(experiment_id, tag.MLFLOW_NOTE, text)
        client.set_experiment_tag(experiment_id, NOTE_HASH_TAG, sha256_text(text))


def registry_template(template: str) -> str:
    """kbench's ``{name}`` placeholders as the Prompt Registry's ``{{name}}`` variables."""
    return _VARIABLE.sub(r"{{\1}}", template)


def register_prompts(client, run_id: str, prompts: dict[str, dict[str, str]]) -> dict[str, int]:
    """Each prompt as a Prompt Registry version (reusing the latest when its text is the same), linked to the run;
    name -> version."""
    versions = {}
    experiment_id = client.get_run(run_id).info.experiment_id
    # linking reads the run through MLflow's process-wide tracking store (``client``'s for the call), and MLflow
    # lists a prompt under the experiment its module-level API calls active (``MLFLOW_EXPERIMENT_ID``: the run's)
    with fluent_tracking_uri(str(client.tracking_uri)), _active_experiment(experiment_id):
        for name, prompt in prompts.items():
            template = registry_template(prompt["template"])
            latest = client.load_prompt(name, allow_missing=True)  # the latest version, or None
            if latest is None or latest.template != template:
                latest = client.register_prompt(
                    name, template, commit_message=f"kbench stage {prompt['stage']}",
                    tags={"kbench.stage": prompt["stage"], "kbench.sha256": prompt["sha256"]})
            if (latest.name, str(latest.version)) not in linked_prompts(client, run_id):
                client.link_prompt_version_to_run(run_id, latest)
            versions[name] = int(latest.version)
        for thread in threading.enumerate():  # MLflow tags the prompt with the experiment from a thread: done here
            if thread.name.startswith(PROMPT_LINK_THREAD):
                thread.join(timeout=30)
    return versions


@contextmanager
def _active_experiment(experiment_id: str):
    saved = os.environ.get("MLFLOW_EXPERIMENT_ID")
    os.environ["MLFLOW_EXPERIMENT_ID"] = experiment_id
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
        else:
            os.environ["MLFLOW_EXPERIMENT_ID"] = saved


def linked_prompts(client, run_id: str) -> set[tuple[str, str]]:
    """(name, version) of the prompts linked to a run (MLflow keeps them in the run's tag ``mlflow.linkedPrompts``)."""
    text = client.get_run(run_id).data.tags.get(LINKED_PROMPTS)
    return {(p["name"], str(p["version"])) for p in json.loads(text)} if text else set()


def log_winner_model(client, experiment_id: str, *, sweep_key: str, sweep_name: str, label: str,
                     parent_run_id: str, winner_run_id: str, params: dict[str, str], metrics: dict[str, float],
                     config_file: Path | None) -> str:
    """The sweep's recommended config (its winner) as a LoggedModel that the parent and the config's run link to;
    an equal one logged before (same sweep, same child run) is reused. Returns its model id."""
    from mlflow.entities import LoggedModelInput, LoggedModelStatus, Metric

    found = client.search_logged_models(
        [experiment_id], filter_string=f"tags.`{tag.SWEEP_KEY}` = {literal(sweep_key, 'sweep key')} AND "
                                       f"tags.`{tag.SWEEP_WINNER_RUN}` = {literal(winner_run_id, 'run id')}",
        max_results=1)
    if found:
        model_id = found[0].model_id
    else:
        model = client.create_logged_model(
            experiment_id, name=f"{sweep_name}-recommended", source_run_id=winner_run_id, params=params,
            tags={tag.SWEEP_KEY: sweep_key, tag.SWEEP_WINNER: label, tag.SWEEP_WINNER_RUN: winner_run_id},
            model_type=MODEL_TYPE)
        model_id = model.model_id
        if config_file is not None and config_file.is_file():
            client.log_model_artifact(model_id, str(config_file))
        metric_list = [Metric(k, logged_value(v), 0, 0, model_id=model_id) for k, v in metrics.items() if v == v]
        for start in range(0, len(metric_list), 100):
            client.log_batch(winner_run_id, metrics=metric_list[start:start + 100])
        client.finalize_logged_model(model_id, LoggedModelStatus.READY)
    for run_id in dict.fromkeys([parent_run_id, winner_run_id]):
        inputs = client.get_run(run_id).inputs
        if model_id not in {m.model_id for m in (inputs.model_inputs if inputs else [])}:
            client.log_inputs(run_id, models=[LoggedModelInput(model_id)])
    return model_id
