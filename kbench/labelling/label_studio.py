"""Label Studio, for teams that label there: the chosen pairs as Label Studio tasks, and its annotations back into the
same labels file ``kbench label``'s page writes.

    write_tasks(labels, folder, limit=None)    # folder/tasks.json (import into a project) + folder/config.xml
    import_annotations(labels, export_json)    # a project's JSON export -> labels.add(...) per annotated task

- **Tasks**: the pairs still without a grade, in the page's order (random share and active order alike; a team
  that labels them in order keeps the interval valid, as on the page), one task each: ``data`` holds the question,
  the passage and its document's text around it, and ``kbench_pair`` / ``query_id`` to find the pair again.
- **Config**: the labelling interface (``config.xml``, Settings > Labeling Interface > Code): the question as a
  header, the passage between its context, one ``Choices`` named ``grade`` with the scale (keys 0-3 or 0-1).
- **Import**: Label Studio's JSON export (a list of tasks with ``annotations``). The newest annotation of a task
  that was not cancelled gives its grade (the first choice of ``grade``); its author and time go to the
  provenance (``completed_by``, ``created_at``). Tasks of another pool or grades off the scale are refused with
  one line naming the task; a pair already graded is kept as it was.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

from kbench.labelling.labels import LabelsFile
from kbench.labelling.pool import LabelError, read_json

GRADE_CONTROL = "grade"


def labelling_config(grades: dict[int, str]) -> str:
    """Label Studio's labelling interface for the scale."""
    choices = "\n".join(f"    <Choice value={quoteattr(str(g))} alias={quoteattr(str(g))} hotkey={quoteattr(str(g))} "
                        f"hint={quoteattr(meaning)}/>" for g, meaning in grades.items())
    return f"""<View>
  <Header value="$question"/>
  <Text name="before" value="$before" granularity="word"/>
  <View style="background: #fff1a8; padding: 6px; border: 2px solid #e8c400">
    <Text name="passage" value="$passage"/>
  </View>
  <Text name="after" value="$after"/>
  <Header value="How well does the marked passage answer the question?" size="5"/>
  <Choices name="{GRADE_CONTROL}" toName="passage" choice="single-radio" required="true" showInline="true">
{choices}
  </Choices>
</View>
"""


def tasks(labels: LabelsFile, limit: int | None = None) -> list[dict]:
    pool = labels.pool
    out = []
    for pair in labels.remaining()[:limit]:
        p = pool.pairs[pair]
        out.append({"data": {"question": pool.questions[p.query_id], "passage": p.text, "before": p.before,
                             "after": p.after, "title": p.title, "doc_id": p.doc_id, "query_id": p.query_id,
                             "kbench_pair": p.pair_id, "kbench_position": labels.position(pair),
                             "kbench_stream": labels.stream(pair)}})
    return out


def write_tasks(labels: LabelsFile, folder: Path, limit: int | None = None) -> tuple[Path, Path, int]:
    """``folder/tasks.json`` and ``folder/config.xml``; returns their paths and the number of tasks."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    found = tasks(labels, limit)
    tasks_file, config_file = folder / "tasks.json", folder / "config.xml"
    for path, text in ((tasks_file, json.dumps(found, ensure_ascii=False, indent=1)),
                       (config_file, labelling_config(labels.pool.grades))):
        tmp = path.with_name(f".partial-{path.name}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return tasks_file, config_file, len(found)


@dataclass
class ImportReport:
    written: int = 0
    already: int = 0  # pairs that held a grade already (kept)
    unannotated: int = 0  # tasks with no annotation that counts (none, or every one cancelled)
    annotators: set[str] = field(default_factory=set)

    def summary(self) -> str:
        return (f"imported {self.written} grades from Label Studio ({len(self.annotators)} annotator(s): "
                f"{', '.join(sorted(self.annotators)) or 'none'}); {self.already} pairs already held a grade (kept), "
                f"{self.unannotated} tasks had no annotation")


def _author(annotation: dict) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("username") or who.get("id")
    return f"label-studio:{who}" if who is not None else "label-studio"


def _grade(annotation: dict, task_id) -> int | None:
    for result in annotation.get("result") or []:
        if result.get("from_name") == GRADE_CONTROL and result.get("type") == "choices":
            choices = (result.get("value") or {}).get("choices") or []
            if choices:
                text = str(choices[0]).strip()
                if not text.isdigit():
                    raise LabelError(f"Label Studio task {task_id}: the grade {text!r} is not a number; use the "
                                     "labelling config kbench wrote (config.xml)")
                return int(text)
    return None


def import_annotations(labels: LabelsFile, export: Path) -> ImportReport:
    """Every annotated task of a Label Studio JSON export into ``labels`` (see the module's docstring)."""
    export = Path(export)
    data = read_json(export, "--import-label-studio", missing="export the project as JSON from Label Studio "
                     "(Export > JSON)", not_json="not JSON ({error}); export the project as JSON")
    if not isinstance(data, list):
        raise LabelError(f"--import-label-studio {export}: a Label Studio JSON export is a list of tasks; export as "
                         "JSON (not JSON-MIN or CSV)")
    index = {(p.query_id, p.pair_id): i for i, p in enumerate(labels.pool.pairs)}
    found: list[tuple[int, int, str, str | None]] = []
    report = ImportReport()
    for task in data:
        fields = task.get("data") or {}
        key = (str(fields.get("query_id")), str(fields.get("kbench_pair")))
        if key not in index:
            raise LabelError(f"--import-label-studio {export}: task {task.get('id')} ({key[1]}) is not a pair of this "
                             "pool; import into the labels file whose pool the tasks were exported from")
        counted = [a for a in task.get("annotations") or [] if not a.get("was_cancelled")]
        graded = [(a, g) for a in counted if (g := _grade(a, task.get("id"))) is not None]
        if not graded:
            report.unannotated += 1
            continue
        annotation, grade = max(graded, key=lambda x: str(x[0].get("updated_at") or x[0].get("created_at") or ""))
        if grade not in labels.pool.grades:
            raise LabelError(f"--import-label-studio {export}: task {task.get('id')} has grade {grade}, outside the "
                             f"{labels.pool.scale} scale ({', '.join(map(str, labels.pool.grades))}); nothing imported")
        found.append((index[key], grade, _author(annotation), annotation.get("created_at")))
    for pair, grade, author, at in found:  # checked whole before anything is written
        if labels.add(pair, grade, source="label-studio", annotator=author, at=at):
            report.written += 1
            report.annotators.add(author)
        else:
            report.already += 1
    return report


__all__ = ["ImportReport", "import_annotations", "labelling_config", "tasks", "write_tasks"]
