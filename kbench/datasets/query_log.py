"""A query log as an evaluation set: the questions users asked, with no labels yet.

    report = import_queries("queries.csv", "sets/real", docs="path/to/docs", column="query", max_questions=200)

The log is a CSV or TSV file with a header (the question's column by ``column``, else the first of
``TEXT_COLUMNS`` it has), JSON lines (``column`` a key, or a dotted path into the object: ``request.query``; a
chat request's last user message is taken from ``messages``; a ``.json`` file holding one array of records is read
record by record, a record's position standing for its line), a plain text file (one question a line), or the
requests of an MLflow experiment's traces (``mlflow_experiment``). Every record is read once, in the log's order,
and each is kept or counted under one reason (``DROP_REASONS``), never quoted: a log holds what users typed, and
an error or a report that repeated a line could put a user's key or personal data in a terminal, a CI log or
MLflow. Only counts, line numbers and column names (through ``errors.quoted_token``) are ever shown.

- **Cleaning**: empty records, binary ones (not UTF-8, or holding control characters), secret-looking ones
  (``secret_like``: a provider's key, a token, a password assignment, a URL with a password, a private key, a long
  random-looking string), longer than ``MAX_QUESTION_CHARS`` (a pasted document, not a question), and values that
  are not text (JSON numbers, objects).
- **Duplicates**: the same question once lowercased and stripped of punctuation (``leakage.normalized``, as the
  set builders compare questions) is one question; its count in the log is kept (``log_count``).
- **Near-duplicates**: two questions whose character 3-grams (of the normalised text, padded with a space) have a
  Jaccard similarity of at least ``NEAR_DUPLICATE_TRIGRAMS`` (0.8): a typo or a trailing word apart. Character
  grams, not stems: a log's near-duplicates are mostly typos, which stems miss. The distinct questions are
  walked most asked first (then in the log's order), each kept unless it nearly duplicates one kept before: the
  form users typed most stays, and the others' counts join its count.
- **Sample**: ``max_questions`` of the survivors, a seeded random sample (uniform over distinct questions, not
  weighted by how often each was asked: ``log_count`` says that), written in the log's order.

The set is kbench's span layout (``docs/`` copied from ``docs``, ``questions.jsonl``, ``manifest.json``) with
``"references": null`` on every question: not labelled yet. Every run ranks such a question and leaves it out
of its metrics (never a 0); ``kbench judge`` grades the pooled pairs and ``kbench label`` takes a person's grades
(docs/how-to/query-logs.md). ``manifest.json`` says where the questions came from, how many records were read and
what was dropped, by reason. The set is written to a hidden folder, read back through the span loader and renamed
into place: nothing half-written.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from kbench.datasets.mlflow_questions import default_tracking_uri
from kbench.datasets.reading import DatasetError
from kbench.datasets.synthetic import load_source
from kbench.datasets.synthetic.build import SET_KIND, file_name, write_set
from kbench.datasets.synthetic.leakage import normalized
from kbench.errors import quoted_token

LOG_KIND = "kbench query-log set"  # manifest.json's "kind"
TEXT_COLUMNS = ("query", "question", "text", "q", "search", "search_query", "prompt", "input", "request")
MAX_QUESTION_CHARS = 2000
NEAR_DUPLICATE_TRIGRAMS = 0.8
QUERY_ID = "log-{:05d}"

# why a record of the log was not kept (manifest.json "dropped"); one reason each, in this order of checks
MALFORMED = "malformed"  # a JSON lines record that is not a JSON object
NOT_TEXT = "not_text"  # the column holds a number, a list or an object
EMPTY = "empty"  # no text (a blank line, an empty cell, the column missing)
BINARY = "binary"  # not UTF-8, or control characters
SECRET_LIKE = "secret_like"
TOO_LONG = "too_long"
DUPLICATE = "duplicate"
NEAR_DUPLICATE = "near_duplicate"
DROP_REASONS = (MALFORMED, NOT_TEXT, EMPTY, BINARY, SECRET_LIKE, TOO_LONG, DUPLICATE, NEAR_DUPLICATE)

# what a secret looks like in a question: a value, never a word about one ("how do bearer tokens work" is a question)
SECRET_PATTERNS = re.compile("|".join([
    r"\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}",  # OpenAI-style and Stripe keys
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"\bxox[abpr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_-]{30,}",  # Google API keys
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.",  # a JSON web token
    r"-----BEGIN [A-Z ]*PRIVATE KEY",
    r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@",  # a URL with a password
    r"(?i:\bbearer\s+[A-Za-z0-9._~+/=-]{20,})",
    r"(?i:(api[_-]?key|secret|token|passw(or)?d|pwd)\w*\s*[=:]\s*['\"]?(?=[^\s'\"]*\d)[^\s'\"]{8,})",
]))
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/_]{32,}")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|[\ud800-\udfff]")  # surrogates: bytes that were not UTF-8


def secret_like(text: str) -> bool:
    """A key, a token or a password in the text: a provider's key prefix, an assignment to a key-like name, a URL
    with a password, a private key, or a random-looking run of 32+ letters and digits (a hex or base64 key)."""
    if SECRET_PATTERNS.search(text):
        return True
    return any(re.search(r"\d", t) and re.search(r"[A-Za-z]", t) for t in LONG_TOKEN.findall(text))


@dataclass
class LogRecord:
    where: int  # line (file) or position (traces), 1-based
    text: str | None  # None: dropped, ``reason`` says why
    reason: str | None = None


@dataclass
class ImportReport:
    out: str
    source: dict[str, Any]
    records: int = 0  # lines or traces read (a CSV's header not counted)
    dropped: Counter = field(default_factory=Counter)
    distinct: int = 0  # after duplicates and near-duplicates
    kept: int = 0
    documents: int = 0
    skipped_files: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"records_read": self.records, "dropped": {r: self.dropped.get(r, 0) for r in DROP_REASONS},
                "distinct_questions": self.distinct, "kept": self.kept, "documents": self.documents,
                "skipped_files": self.skipped_files, "near_duplicate_trigram_jaccard": NEAR_DUPLICATE_TRIGRAMS,
                "max_question_chars": MAX_QUESTION_CHARS, "labels": "none"}

    def lines(self) -> list[str]:
        shown = ", ".join(f"{self.dropped[r]} {r.replace('_', '-')}" for r in DROP_REASONS if self.dropped.get(r))
        return [f"read {self.records} records of {describe(self.source)}; dropped {shown or 'none'} (never shown)",
                f"{self.distinct} distinct questions; kept {self.kept} (no labels yet) with {self.documents} documents"]


def describe(source: dict[str, Any]) -> str:
    if source.get("kind") == "mlflow":
        return f"MLflow experiment {source['experiment']!r}'s traces"
    return f"{source.get('path')} ({source.get('format')}, column {source.get('column')!r})"


# --------------------------------------------------------------------------- reading a log
def log_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".txt", ".log", ""):
        return "text"
    raise DatasetError(f"{path}: a query log is .csv, .tsv, .jsonl (.ndjson) or .txt (one question a line); rename "
                       "it, or export the log in one of these")


def clean(text: Any, where: int) -> LogRecord:
    """The record's text, or the reason it is dropped (never its content)."""
    if text is None:
        return LogRecord(where, None, EMPTY)
    if isinstance(text, bool) or not isinstance(text, str):
        return LogRecord(where, None, NOT_TEXT)
    if CONTROL.search(text.replace("\t", " ")):
        return LogRecord(where, None, BINARY)
    text = " ".join(text.split())
    if not text:
        return LogRecord(where, None, EMPTY)
    if secret_like(text):
        return LogRecord(where, None, SECRET_LIKE)
    if len(text) > MAX_QUESTION_CHARS:
        return LogRecord(where, None, TOO_LONG)
    return LogRecord(where, text)


def decoded(path: Path) -> str:
    """The file's text; bytes that are not UTF-8 kept as surrogates, so the records holding them count as binary
    and the others are read."""
    return path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")


def log_lines(path: Path) -> list[str]:
    """The file's lines (a final newline ends the last line, it does not start an empty one)."""
    lines = decoded(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_text_log(path: Path) -> Iterator[LogRecord]:
    for n, line in enumerate(log_lines(path), start=1):
        yield clean(line, n)


def pick_column(columns: list[str], column: str | None, path: Path) -> str:
    if column is not None:
        if column not in columns:
            raise DatasetError(f"{path}: no column {quoted_token(column)} in its header ({header_names(columns)}); give "
                               "--column the name of the column holding the questions")
        return column
    lowered = {c.strip().lower(): c for c in columns}
    found = next((lowered[name] for name in TEXT_COLUMNS if name in lowered), None)
    if found is None:
        raise DatasetError(f"{path}: no column named {', '.join(TEXT_COLUMNS)} in its header ({header_names(columns)}); "
                           "give --column the name of the column holding the questions")
    return found


def header_names(columns: list[str]) -> str:
    """A header's names as an error may show them: each through ``quoted_token`` (a header is a line of the log)."""
    shown = [quoted_token(c) for c in columns[:8]]
    return f"{len(columns)} columns: " + ", ".join(shown) + (", ..." if len(columns) > 8 else "")


def read_csv_log(path: Path, delimiter: str, column: str | None) -> tuple[Iterator[LogRecord], str]:
    reader = csv.reader(io.StringIO(decoded(path), newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise DatasetError(f"{path}: empty; a CSV query log has a header line and one question a row") from None
    except csv.Error as e:
        raise DatasetError(f"{path}:1: not valid CSV ({e}); quote fields that hold the delimiter or newlines") from None
    name = pick_column(header, column, path)
    index = header.index(name)

    def records() -> Iterator[LogRecord]:
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DatasetError(f"{path}:{reader.line_num}: not valid CSV ({e}); quote fields that hold the "
                                   "delimiter or newlines") from None
            if not row:
                yield LogRecord(reader.line_num, None, EMPTY)
                continue
            yield clean(row[index] if index < len(row) else None, reader.line_num)

    return records(), name


def lookup(row: Any, column: str) -> Any:
    """``column`` in a JSON object: a key, or a dotted path (``request.query``); None when absent."""
    value = row
    for part in column.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def chat_question(value: Any) -> Any:
    """A chat request (``[{"role": "user", "content": ...}, ...]``): its last user message."""
    if isinstance(value, list):
        users = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
        return users[-1] if users else None
    return value


def question_of(row: dict, column: str | None) -> Any:
    """The question in a JSON object: ``column``, else the first of ``TEXT_COLUMNS`` (or ``messages``) it holds."""
    if column is not None:
        return chat_question(lookup(row, column))
    for name in (*TEXT_COLUMNS, "messages"):
        if name in row:
            return chat_question(row[name])
    return None


def read_json_array(path: Path, column: str | None) -> Iterator[LogRecord] | None:
    """A ``.json`` log holding one array of records (an export), its records in order; None when it is not one
    (then it is read as JSON lines)."""
    text = decoded(path).strip()
    if not text.startswith("["):
        return None
    try:
        rows = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(rows, list):
        return None
    return (clean(question_of(row, column), n) if isinstance(row, dict) else clean(chat_question(row), n)
            if isinstance(row, list) else clean(row, n) for n, row in enumerate(rows, start=1))


def read_jsonl_log(path: Path, column: str | None) -> Iterator[LogRecord]:
    if path.suffix.lower() == ".json" and (array := read_json_array(path, column)) is not None:
        yield from array
        return
    for n, line in enumerate(log_lines(path), start=1):
        if not line.strip():
            yield LogRecord(n, None, EMPTY)
        elif CONTROL.search(line.replace("\t", " ")):
            yield LogRecord(n, None, BINARY)
        else:
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                row = None
            if isinstance(row, dict):
                yield clean(question_of(row, column), n)
            elif isinstance(row, list):
                yield clean(chat_question(row), n)
            else:
                yield LogRecord(n, None, MALFORMED)


def read_mlflow_log(experiment: str, column: str | None, tracking_uri: str | None) -> Iterator[LogRecord]:
    """The requests of the experiment's traces, oldest first: the root span's inputs, ``column`` of them (or the
    first of ``TEXT_COLUMNS``, or a chat request's last user message)."""
    from mlflow import MlflowClient

    client = MlflowClient(default_tracking_uri(tracking_uri))
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise DatasetError(f"--mlflow-experiment: no experiment {quoted_token(experiment)} in "
                           f"{default_tracking_uri(tracking_uri)}; give the name of the experiment holding your "
                           "application's traces (and --tracking-uri for its store)")
    traces, token = [], None
    while True:
        page = client.search_traces(locations=[found.experiment_id], max_results=500, page_token=token,
                                    include_spans=True)
        traces += list(page)
        token = page.token
        if not token:
            break
    if not traces:
        raise DatasetError(f"--mlflow-experiment: experiment {quoted_token(experiment)} holds no trace; log your "
                           "application's requests as traces (mlflow.trace), or give a CSV or JSONL log")
    traces.sort(key=lambda t: (t.info.request_time, t.info.trace_id))
    for n, trace in enumerate(traces, start=1):
        request = trace.data.request
        try:
            row = json.loads(request) if isinstance(request, str) else request
        except (json.JSONDecodeError, RecursionError):
            row = request  # a plain string request
        if isinstance(row, dict):
            yield clean(question_of(row, column), n)
        elif isinstance(row, list):
            yield clean(chat_question(row), n)
        else:
            yield clean(row, n)


def read_log(log: str | None, *, column: str | None = None, mlflow_experiment: str | None = None,
             tracking_uri: str | None = None) -> tuple[list[LogRecord], dict[str, Any]]:
    """Every record of the log (kept or with its reason) and how the source is named (for the manifest)."""
    if (log is None) == (mlflow_experiment is None):
        raise DatasetError("give a query log file (LOG) or --mlflow-experiment NAME, one of them")
    if mlflow_experiment is not None:
        records = list(read_mlflow_log(mlflow_experiment, column, tracking_uri))
        return records, {"kind": "mlflow", "experiment": mlflow_experiment, "column": column}
    path = Path(log).expanduser()
    if not path.is_file():
        raise DatasetError(f"{path}: no such file; give the query log (CSV, TSV, JSONL or text)")
    kind = log_format(path)
    if kind in ("csv", "tsv"):
        found, name = read_csv_log(path, "," if kind == "csv" else "\t", column)
        records = list(found)
    elif kind == "jsonl":
        records, name = list(read_jsonl_log(path, column)), column or "/".join(TEXT_COLUMNS[:3]) + "/..."
    else:
        if column is not None:
            raise DatasetError(f"--column: {path} is a text log (one question a line) and has no columns; leave "
                               "--column out, or give a CSV or JSONL log")
        records, name = list(read_text_log(path)), None
    return records, {"kind": "file", "path": str(path.resolve()), "format": kind, "column": name,
                     "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


# --------------------------------------------------------------------------- duplicates, near-duplicates, sample
def trigrams(text: str) -> frozenset[str]:
    padded = f" {text} "
    return frozenset(padded[i:i + 3] for i in range(len(padded) - 2))


class NearDuplicates:
    """Questions kept so far, and whether a new one nearly duplicates one of them (character 3-gram Jaccard >=
    ``threshold``). Candidates come from prefix filtering on the rarest grams (an exact filter for Jaccard, as in
    set-similarity joins): two sets with Jaccard >= t share one of the first ``|x| - ceil(t |x|) + 1`` grams of each,
    in one global order, so a log of many thousands stays fast."""

    def __init__(self, texts: list[str], threshold: float = NEAR_DUPLICATE_TRIGRAMS):
        self.threshold = threshold
        self.grams = [trigrams(t) for t in texts]
        counts = Counter(g for grams in self.grams for g in grams)
        self.rank = {g: (c, g) for g, c in counts.items()}  # rarest first, ties by the gram itself
        self.index: dict[str, list[int]] = {}

    def _prefix(self, i: int) -> list[str]:
        ordered = sorted(self.grams[i], key=self.rank.__getitem__)
        return ordered[:len(ordered) - math.ceil(self.threshold * len(ordered)) + 1]

    def match(self, i: int) -> int | None:
        """A kept question ``i`` nearly duplicates (the first found), else None."""
        mine = self.grams[i]
        seen = set()
        for gram in self._prefix(i):
            for j in self.index.get(gram, ()):
                if j in seen:
                    continue
                seen.add(j)
                other = self.grams[j]
                if len(mine & other) / len(mine | other) >= self.threshold:
                    return j
        return None

    def keep(self, i: int) -> None:
        for gram in self._prefix(i):
            self.index.setdefault(gram, []).append(i)


@dataclass
class Question:
    text: str
    first: int  # where it first appears in the log
    count: int = 1  # records it stands for (duplicates and near-duplicates folded in)


def distinct_questions(records: list[LogRecord], dropped: Counter, seed: int) -> list[Question]:
    """The kept records without duplicates and near-duplicates, in a seeded random order (the sample's)."""
    by_norm: dict[str, Question] = {}
    for r in records:
        if r.text is None:
            dropped[r.reason] += 1
            continue
        key = normalized(r.text)
        if not key:  # punctuation only
            dropped[EMPTY] += 1
        elif key in by_norm:
            by_norm[key].count += 1
            dropped[DUPLICATE] += 1
        else:
            by_norm[key] = Question(r.text, r.where)
    questions = sorted(by_norm.values(), key=lambda q: (-q.count, q.first))  # the most asked form stays
    near = NearDuplicates([normalized(q.text) for q in questions])
    kept: list[int] = []
    for i, q in enumerate(questions):
        j = near.match(i)
        if j is None:
            near.keep(i)
            kept.append(i)
        else:
            questions[j].count += q.count
            dropped[NEAR_DUPLICATE] += 1
    survivors = sorted((questions[i] for i in kept), key=lambda q: q.first)
    random.Random(seed).shuffle(survivors)
    return survivors


# --------------------------------------------------------------------------- the set
def is_query_log_set(folder: Path) -> bool:
    try:
        return json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("kind") in (LOG_KIND, SET_KIND)
    except (OSError, ValueError, AttributeError):
        return False


def check_out(out: str | Path, docs_folder: Path | None, force: bool) -> Path:
    """``out`` resolved, or an error before any work: never the documents' folder, one holding it or inside it;
    ``--force`` replaces only a set kbench wrote (its manifest.json)."""
    out = Path(out).expanduser().resolve()
    if docs_folder is not None:
        source = docs_folder.expanduser().resolve()
        if out == source or out in source.parents or source in out.parents:
            raise DatasetError(f"--out {out} is, holds or sits inside the documents' folder {source}; choose a new "
                               "folder outside it")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise DatasetError(f"--out {out} exists and is not empty; choose a new folder or pass --force to replace it")
        if not is_query_log_set(out):
            raise DatasetError(f"--out {out} holds files kbench did not write (no manifest.json of a set); --force "
                               "replaces only a set kbench wrote: choose a new folder")
    return out


def import_queries(log: str | None, out: str | Path, *, docs: str, column: str | None = None,
                   max_questions: int | None = None, seed: int = 0, mlflow_experiment: str | None = None,
                   tracking_uri: str | None = None, force: bool = False, include: list[str] | None = None,
                   exclude: list[str] | None = None) -> ImportReport:
    """``kbench datasets import-queries``: the set at ``out`` (see the module's docstring)."""
    docs_path = Path(docs).expanduser()
    out = check_out(out, docs_path if docs_path.is_dir() else None, force)
    if max_questions is not None and max_questions < 1:
        raise DatasetError(f"--max {max_questions}: at least 1")
    records, source = read_log(log, column=column, mlflow_experiment=mlflow_experiment, tracking_uri=tracking_uri)
    report = ImportReport(str(out), source, records=len(records))
    questions = distinct_questions(records, report.dropped, seed)
    report.distinct = len(questions)
    if not questions:
        reasons = ", ".join(f"{report.dropped[r]} {r}" for r in DROP_REASONS if report.dropped.get(r)) or "none"
        raise DatasetError(f"{describe(source)}: no question left of {len(records)} records (dropped: {reasons}); "
                           "check --column and the log's format")
    chosen = sorted(questions[:max_questions] if max_questions else questions, key=lambda q: q.first)
    report.kept = len(chosen)
    documents, skipped, provenance = load_source(docs, "documents", include=include, exclude=exclude)
    documents = [d for d in documents if d.text.strip()]
    if not documents:
        raise DatasetError(f"--docs {docs}: no readable document (skipped: "
                           f"{', '.join(f'{len(v)} {k}' for k, v in sorted(skipped.items())) or 'none'}); give the "
                           "folder (or registered dataset) whose documents the questions are asked about")
    report.documents = len(documents)
    report.skipped_files = {k: len(v) for k, v in skipped.items()}
    names = {d.doc_id: file_name(d) for d in documents}
    if len(set(names.values())) < len(names):
        raise DatasetError("--docs: two documents would be written to the same file under docs/; rename one")
    rows = [{"query_id": QUERY_ID.format(n), "question": q.text, "references": None, "log_count": q.count,
             "log_first": q.first} for n, q in enumerate(chosen, start=1)]
    manifest = {"kind": LOG_KIND, "source": source, "docs": provenance["source"], "seed": seed,
                "max_questions": max_questions,
                "source_hashes": {names[d.doc_id]: d.content_hash for d in documents},
                "report": report.as_dict()}
    write_set(out, {d.doc_id: d.text for d in documents}, names, rows, manifest, force)
    return report


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """A set's manifest.json (empty when it has none)."""
    try:
        return json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


__all__ = ["DROP_REASONS", "ImportReport", "LOG_KIND", "NEAR_DUPLICATE_TRIGRAMS", "NearDuplicates", "import_queries",
           "read_log", "read_manifest", "secret_like"]
