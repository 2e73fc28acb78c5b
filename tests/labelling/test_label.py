"""kbench label on two real demo runs: the pool and its order, the labels file (fsynced, resumable, one grade per
pair, another pool refused), the page over HTTP (readable without JavaScript, leases per tab, plain form posts),
the command (serving in a subprocess, --report, bad input in one line with exit 2), the Label Studio round trip and
the human grades in MLflow."""
from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from kbench.cli import main as kbench_main
from kbench.labelling.label_studio import import_annotations, labelling_config, tasks, write_tasks
from kbench.labelling.labels import SKIP_AGAIN_AFTER, LabelsFile, pool_path, provenance_path, read_provenance
from kbench.labelling.order import ACTIVE, RANDOM
from kbench.labelling.page import start_page
from kbench.labelling.pool import LabelError, LabelPool
from kbench.tracking.mlflow_labels import FEEDBACK
from kbench.tracking.mlflow_traces import trace_id_for
from kbench.tracking.read import tracking_client
from tests.labelling.client import Tab, get, hidden, open_tab, shown_pair


def test_the_pool_holds_the_contenders_top_k_and_an_order_fixed_by_the_seed(demo_pool, demo_runs):
    _, uri, ids = demo_runs
    pool = demo_pool
    assert sorted(pool.runs.values()) == sorted(ids) and pool.configs[0] in pool.recommendation[0]
    assert pool.ranks.shape == (2, len(pool.pairs)) and ((pool.ranks > 0).sum(axis=1) <= 5 * len(pool.questions)).all()
    assert ((pool.ranks > 0).sum(axis=0) >= 1).all()  # every pair is in some contender's top 5
    assert set(np.unique(pool.model_grades[~np.isnan(pool.model_grades)])) <= {0.0, 1.0}  # the span set's labels
    for p in pool.pairs[:20]:
        assert p.text and (p.before or p.start == 0)
    order = [p for p, _ in pool.plan.order]
    assert sorted(order) == list(range(len(pool.pairs)))  # every pair once
    assert {s for _, s in pool.plan.order} == {RANDOM, ACTIVE}
    first = pool.plan.permutation[0]
    head = [p for p, s in pool.plan.order if s == RANDOM][: int((pool.question_of == first).sum())]
    assert all(pool.question_of[p] == first for p in head)  # the random share serves a whole question
    again = LabelPool.read(_written(pool))
    assert again.fingerprint == pool.fingerprint and again.plan == pool.plan


def _written(pool, folder=None):
    import tempfile
    from pathlib import Path

    path = Path(folder or tempfile.mkdtemp()) / "pool.json"
    pool.write(path)
    return path


def test_the_labels_file_appends_resumes_and_refuses_another_pool(demo_pool, tmp_path):
    path = tmp_path / "labels.qrels"
    labels = LabelsFile.open(path, demo_pool, "alice")
    first, second = labels.remaining()[:2]
    assert labels.add(first, 3) and not labels.add(first, 1)  # one grade per pair
    labels.skip(second)
    p = demo_pool.pairs[first]
    assert path.read_text() == f"{p.query_id} 0 {p.doc_id}@{p.start}-{p.end} 3\n"
    header, events = read_provenance(path)
    assert header["pool"] == demo_pool.fingerprint and header["seed"] == 3 and "random permutation" in header["ordering"]
    assert [e["grade"] for e in events] == [3, "skip"] and events[0]["annotator"] == "alice"
    assert pool_path(path).exists()
    resumed = LabelsFile.open(path, demo_pool, "bob")
    assert resumed.count == 1 and first not in resumed.remaining()
    assert resumed.remaining().index(second) == SKIP_AGAIN_AFTER  # a skipped pair comes back after a few grades
    assert math.isnan(resumed.grades()[second]) and resumed.grades()[first] == 3
    other = LabelPool.read(_written(demo_pool, tmp_path))
    other.k = 3
    with pytest.raises(LabelError, match="holds labels of another pool"):
        LabelsFile.open(path, other, "carol")


def test_the_page_serves_html_a_lease_per_tab_and_plain_form_posts(demo_pool, tmp_path):
    labels = LabelsFile.open(tmp_path / "labels.qrels", demo_pool, "alice")
    running = start_page(labels, 0)
    try:
        status, _, where = get(running.url)
        assert status == 303 and where.startswith("/?tab=")
        status, page, _ = get(running.url.rstrip("/") + where)
        assert status == 200 and "<script>" in page
        pair = demo_pool.pairs[shown_pair(page)]
        assert html.escape(demo_pool.questions[pair.query_id]) in page and html.escape(pair.text) in page
        assert f'<div class="passage" id="passage">{html.escape(pair.text)}</div>' in page  # one highlighted block
        assert "name=\"grade\" value=\"3\"" in page and "skip" in page
        assert f"<b>{len(demo_pool.pairs)}</b> left" in page
        assert "First interval: 10 more questions to label whole (0 of 10 done)" in page
        assert get(running.url.rstrip("/") + where)[1].count(f'value="{shown_pair(page)}"') == 1  # reload: same pair
        tab = Tab(running.url, where.split("=", 1)[1], hidden(page, "secret"), page)
        other = open_tab(running.url)
        assert other.pair != tab.pair and other.secret == tab.secret  # two tabs, two pairs; one form secret
        status, location = tab.grade(2)
        assert status == 303 and location == f"/?tab={tab.tab}"
        assert tab.grade(1)[1].endswith("note=taken")
        assert labels.count == 1 and (tmp_path / "labels.qrels").read_text().count("\n") == 1
        assert tab.grade(1, pair=other.pair)[1].endswith("note=taken")
        assert labels.count == 1  # the other tab's pair is leased to it
        assert tab.grade(7, pair=0)[0] == 400
        status, body, _ = get(running.url + "status")
        assert status == 200 and json.loads(body)["graded"] == 1
    finally:
        running.close()


@pytest.mark.port
def test_the_command_serves_then_reports_and_bad_input_is_one_line(demo_pool, demo_runs, tmp_path, capsys):
    ws, uri, ids = demo_runs
    labels = tmp_path / "labels.qrels"
    LabelsFile.open(labels, demo_pool)  # writes the pool file beside it
    env_python = [sys.executable, "-c", "import sys; from kbench.cli import console_main; sys.exit(console_main())"]
    server = subprocess.Popen([*env_python, "label", "--pool", f"{labels}.pool.json", "--annotator", "tester"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", first).group(1)
        assert open_tab(url).grade(1)[0] == 303
        port = int(url.rsplit(":", 1)[1].strip("/"))
        with pytest.raises(SystemExit) as stopped:  # a second server on the same labels file: refused, naming the first
            kbench_main(["label", "--pool", f"{labels}.pool.json"])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and err.count("\n") == 1 and f"process {server.pid}" in err and url in err
        other = tmp_path / "other.qrels"
        with pytest.raises(SystemExit) as stopped:
            kbench_main(["label", "--pool", f"{labels}.pool.json", "--labels", str(other), "--port", str(port)])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and err.count("\n") == 1 and "the port is in use" in err
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=60)
    assert server.returncode == 0 and "1 grades in" in out and "labels: 1 human grades" in out
    assert labels.read_text().split()[-1] == "1"
    assert read_provenance(labels)[1][-1]["annotator"] == "tester"

    for argv, expected in (
            (["label", "--sweep", "0123456789abcdef", "--tracking-uri", uri], "--sweep 0123456789abcdef"),
            (["label", ids[0], "--labels", str(labels), "--tracking-uri", uri], "1 finished run given"),
            (["label", *ids, "--labels", str(labels), "--tracking-uri", uri, "--k", "3"], "another pool"),
            (["label", *ids, "--random-share", "0"], "--random-share 0"),
            (["label", "--pool", str(tmp_path / "nothing.pool.json")], "no such file")):
        try:
            code = kbench_main(argv)
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and expected in err, (argv, err)


def test_label_studio_round_trip_gives_the_same_labels_file(demo_pool, tmp_path):
    written = write_tasks(LabelsFile.open(tmp_path / "ls" / "labels.qrels", demo_pool, "page"), tmp_path / "export")
    exported = json.loads(written[0].read_text())
    config = written[1].read_text()
    assert written[2] == len(demo_pool.pairs) and config == labelling_config(demo_pool.grades)
    assert '<Choices name="grade" toName="passage"' in config and 'hotkey="3"' in config
    grades = {i: (i * 7) % 4 for i in range(12)}
    # what Label Studio exports after an annotator graded the first 12 tasks (a cancelled one does not count)
    for i, task in enumerate(exported):
        task["id"] = 100 + i
        task["annotations"] = []
        if i in grades:
            task["annotations"].append({"id": i, "completed_by": {"email": "ann@example.org"}, "was_cancelled": False,
                                        "created_at": f"2026-11-30T10:{i:02d}:00Z",
                                        "result": [{"from_name": "grade", "to_name": "passage", "type": "choices",
                                                    "value": {"choices": [str(grades[i])]}}]})
        if i == 12:
            task["annotations"].append({"id": i, "was_cancelled": True, "result": []})
    export = tmp_path / "project.json"
    export.write_text(json.dumps(exported))
    from_studio = LabelsFile.open(tmp_path / "ls" / "labels.qrels", demo_pool, "page")
    report = import_annotations(from_studio, export)
    assert (report.written, report.unannotated, report.annotators) == (12, len(exported) - 12,
                                                                       {"label-studio:ann@example.org"})
    on_page = LabelsFile.open(tmp_path / "page" / "labels.qrels", demo_pool, "page")
    order = on_page.remaining()
    for i in range(12):
        on_page.add(order[i], grades[i])
    assert (tmp_path / "ls" / "labels.qrels").read_text() == (tmp_path / "page" / "labels.qrels").read_text()
    again = import_annotations(from_studio, export)
    assert again.written == 0 and again.already == 12
    events = read_provenance(tmp_path / "ls" / "labels.qrels")[1]
    assert events[0]["source"] == "label-studio" and events[0]["at"] == "2026-11-30T10:00:00Z"
    assert len(tasks(from_studio)) == len(demo_pool.pairs) - 12
    exported[0]["data"]["kbench_pair"] = "elsewhere.md@0-10"
    export.write_text(json.dumps(exported))
    with pytest.raises(LabelError, match="is not a pair of this pool"):
        import_annotations(from_studio, export)


def test_report_logs_human_grades_as_assessments_on_the_traces(demo_pool, demo_runs, tmp_path, capsys):
    ws, uri, ids = demo_runs
    path = tmp_path / "labels.qrels"
    labels = LabelsFile.open(path, demo_pool, "alice")
    for pair in labels.remaining()[:40]:  # label in the page's order, the dataset's own label as the human's
        grade = demo_pool.model_grades[pair]
        labels.add(pair, int(3 * (0 if np.isnan(grade) else grade)))
    assert kbench_main(["label", "--pool", f"{path}.pool.json", "--report", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "labels: 40 human grades" in out and "Cohen's kappa" in out and "MLflow:" in out
    client = tracking_client(uri)
    graded = np.flatnonzero(~np.isnan(labels.grades()))
    qid = demo_pool.pairs[graded[0]].query_id
    written = 0
    for run_id in ids:
        run = client.get_run(run_id)
        assert run.data.metrics["label_human_grades"] == 40 and "label_model_kappa" in run.data.metrics
        assert {a.path for a in client.list_artifacts(run_id, "labels")} == {
            f"labels/{path.name}", f"labels/{provenance_path(path).name}", f"labels/{pool_path(path).name}"}
        trace = client.get_trace(trace_id_for(_folder(client, run_id), qid))
        human = [a for a in trace.info.assessments if a.name == FEEDBACK]
        written += len(human)
        assert all(a.source.source_type == "HUMAN" and a.source.source_id == "alice" for a in human)
    assert written > 0
    kbench_main(["label", "--pool", f"{path}.pool.json", "--report", "--tracking-uri", uri])
    assert "0 human grades as" in capsys.readouterr().out  # nothing written twice


def _folder(client, run_id):
    from kbench.tracking import tags as tag

    return client.get_run(run_id).data.tags[tag.RUN_FOLDER]
