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
  provenance (``completed_by``, ``created_at``). The export is checked by shape first (a list of task objects,
  each ``data`` an object naming a pair of this pool, ``annotations`` and ``result`` lists of objects, a choice a
  whole number): anything else, tasks of another pool and grades off the scale are refused with one line naming
  the task and the field, and nothing is written; a pair already graded is kept as it was.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

from kbench.datasets.reading import json_type
from kbench.errors import quoted_token
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
    return f"label-studio:{who}" if isinstance(who, (str, int)) and not isinstance(who, bool) else "label-studio"


EXPORT_FIX = "export the project as JSON from Label Studio (Export > JSON, not JSON-MIN or CSV)"


class Export:
    """Where a Label Studio export is wrong, in one line: the task, the field, what it is and what it should be
    (never the file's text: quoted_token at most)."""

    def __init__(self, path: Path):
        self.path = path

    def error(self, where: str, problem: str, fix: str = EXPORT_FIX) -> LabelError:
        return LabelError(f"--import-label-studio {self.path}: {where}: {problem}; {fix}")

    def of(self, value, kind: type, where: str, field_name: str, missing_ok: bool = True):
        """``value`` when it is a ``kind`` (a missing one: an empty ``kind`` when ``missing_ok``), else the error."""
        if value is None and missing_ok:
            return kind()
        if not isinstance(value, kind):
            got = "missing" if value is None else f"a JSON {json_type(value)}"
            raise self.error(where, f"\"{field_name}\" is {got}, not a JSON {json_type(kind())}")
        return value


def _grade(annotation: dict, where: str, export: Export) -> int | None:
    """The grade an annotation gives (the first choice of the ``grade`` control), None when it gives none."""
    for r, result in enumerate(export.of(annotation.get("result"), list, where, "result")):
        at = f"{where}, result {r}"
        if not isinstance(result, dict):
            raise export.error(at, f"a JSON {json_type(result)}, not a result object")
        if result.get("from_name") != GRADE_CONTROL or result.get("type") != "choices":
            continue
        choices = export.of(export.of(result.get("value"), dict, at, "value").get("choices"), list, at, "choices")
        if not choices:
            continue
        choice = choices[0]
        text = str(choice).strip() if isinstance(choice, (str, int)) and not isinstance(choice, bool) else None
        if text is None or not (text.isascii() and text.isdigit()):
            shown = quoted_token(choice) if isinstance(choice, str) else f"a JSON {json_type(choice)}"
            raise export.error(at, f"the grade {shown} is not a whole number", "use the labelling config kbench "
                               "wrote (config.xml), whose choices are the grades")
        return int(text)
    return None


def _when(annotation: dict) -> str | None:
    found = annotation.get("created_at")
    return found if isinstance(found, str) else None


def import_annotations(labels: LabelsFile, export: Path) -> ImportReport:
    """Every annotated task of a Label Studio JSON export into ``labels`` (see the module's docstring). The export
    is checked by shape, task by task and field by field, before anything is written: a wrong one is a LabelError
    naming the task and the field."""
    export = Path(export)
    data = read_json(export, "--import-label-studio", missing="export the project as JSON from Label Studio "
                     "(Export > JSON)", not_json="not JSON ({error}); export the project as JSON")
    check = Export(export)
    if not isinstance(data, list):
        raise check.error("the file", f"a JSON {json_type(data)}, where a Label Studio JSON export is a list of tasks")
    index = {(p.query_id, p.pair_id): i for i, p in enumerate(labels.pool.pairs)}
    found: list[tuple[int, int, str, str | None]] = []
    report = ImportReport()
    for n, task in enumerate(data):
        if not isinstance(task, dict):
            raise check.error(f"task {n}", f"a JSON {json_type(task)}, not a task object")
        task_id = task.get("id")
        where = f"task {n}" + (f" (id {task_id})" if isinstance(task_id, int) and not isinstance(task_id, bool) else "")
        fields = check.of(task.get("data"), dict, where, "data", missing_ok=False)
        ids = [fields.get(k) for k in ("query_id", "kbench_pair")]
        key = tuple(str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else None for v in ids)
        if key not in index:
            shown = quoted_token(key[1]) if key[1] is not None else "no kbench_pair"
            raise check.error(where, f"{shown} is not a pair of this pool", "import into the labels file whose pool "
                              "the tasks were exported from")
        graded = []
        for a, annotation in enumerate(check.of(task.get("annotations"), list, where, "annotations")):
            at = f"{where}, annotation {a}"
            if not isinstance(annotation, dict):
                raise check.error(at, f"a JSON {json_type(annotation)}, not an annotation object")
            if annotation.get("was_cancelled"):
                continue
            if (grade := _grade(annotation, at, check)) is not None:
                graded.append((annotation, grade))
        if not graded:
            report.unannotated += 1
            continue
        annotation, grade = max(graded, key=lambda x: str(x[0].get("updated_at") or _when(x[0]) or ""))
        if grade not in labels.pool.grades:
            raise check.error(where, f"grade {grade} is outside the {labels.pool.scale} scale "
                              f"({', '.join(map(str, labels.pool.grades))}); nothing imported",
                              "use the labelling config kbench wrote for this pool")
        found.append((index[key], grade, _author(annotation), _when(annotation)))
    for pair, grade, author, at in found:  # checked whole before anything is written
        if labels.add(pair, grade, source="label-studio", annotator=author, at=at):
            report.written += 1
            report.annotators.add(author)
        else:
            report.already += 1
    return report


__all__ = ["ImportReport", "import_annotations", "labelling_config", "tasks", "write_tasks"]
