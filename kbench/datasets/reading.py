"""Reading a dataset's files: only inside its folder, as UTF-8, and one clear error per fault.

A fault that makes a dataset unreadable or ambiguous (malformed JSON, a missing id, a repeated id, an offset
that is not a number) is a ``DatasetError`` naming the file and line and saying what to fix. Data a loader
can leave out without guessing (a judgement naming an unknown document, an empty question) is dropped and
recorded by reason in ``Dataset.skipped`` instead: the run reports it (``count_skipped_<reason>``) and
``dataset.strict: true`` refuses it (``STRICT_REASONS``).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kbench.errors import UserError, shorten
from kbench.sources.folder import BROKEN_LINK, OUTSIDE_ROOT, is_inside


class DatasetError(UserError, ValueError):
    pass


# Why a loader dropped data, as keys of Dataset.skipped (reason -> where: "file:line" or a relative path);
# beside the folder source's OUTSIDE_ROOT (a link out of the folder, never read) and BROKEN_LINK.
QRELS_UNKNOWN_QUERY = "qrels_unknown_query"  # a judgement naming a query that is not in the queries file
QRELS_UNKNOWN_DOCUMENT = "qrels_unknown_document"  # a judgement naming a document that is not in the corpus
QRELS_NOT_RELEVANT = "qrels_not_relevant"  # a judgement with score <= 0: judged, not relevant
QRELS_DUPLICATE = "qrels_duplicate"  # the same (query, document, score) judged twice
EMPTY_QUERY = "empty_query"  # a query or question whose text is empty
NO_REFERENCES = "no_references"  # a span question with ``references: []``
NO_RELEVANT_JUDGEMENT = "no_relevant_judgement"  # a query left with no relevant document (scoring it 0 would lie)

# What ``dataset.strict`` refuses: every drop above. Files a folder source skips by type or size (binary,
# empty, oversized, ...) are not data faults but its include rules, and stay counted only.
STRICT_REASONS = (OUTSIDE_ROOT, BROKEN_LINK, QRELS_UNKNOWN_QUERY, QRELS_UNKNOWN_DOCUMENT, QRELS_NOT_RELEVANT,
                  QRELS_DUPLICATE, EMPTY_QUERY, NO_REFERENCES, NO_RELEVANT_JUDGEMENT)

REASON_TEXT = {
    OUTSIDE_ROOT: "links leading outside the folder (not read)",
    BROKEN_LINK: "broken links",
    QRELS_UNKNOWN_QUERY: "judgements naming a query not in the queries file",
    QRELS_UNKNOWN_DOCUMENT: "judgements naming a document not in the corpus",
    QRELS_NOT_RELEVANT: "judgements with score <= 0 (not relevant)",
    QRELS_DUPLICATE: "repeated judgements",
    EMPTY_QUERY: "queries with empty text",
    NO_REFERENCES: "questions with no references",
    NO_RELEVANT_JUDGEMENT: "queries with no relevant document left",
}

Problems = dict[str, list[str]]


def note(problems: Problems, reason: str, where: str) -> None:
    problems.setdefault(reason, []).append(where)


def dataset_file(root: Path, relative: str) -> Path:
    """``root / relative``, refused when a link takes it outside the dataset folder."""
    path = root / relative
    if not is_inside(path, root):
        raise DatasetError(f"{path}: a link to {path.resolve()}, outside the dataset folder {root.resolve()}; "
                           "kbench reads only files inside the dataset folder, copy the file in")
    return path


def read_text(path: Path) -> str:
    """The whole file as UTF-8 (a leading byte-order mark dropped)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 (byte {e.start} of the file); save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, decoded as UTF-8 one line at a time (corpora can be large)."""
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DatasetError(f"{path}:{n}: not UTF-8 (byte {e.start} of the line); save the file as UTF-8"
                                   ) from None
            yield n, (line.removeprefix("\ufeff") if n == 1 else line)


def iter_jsonl(path: Path, example: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; ``example`` shows a good line in error messages."""
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        line = line.rstrip("\r\n")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{n}: not valid JSON ({e.msg.removesuffix(' at')} at column {e.pos + 1}); "
                               f"each line must be one JSON object, e.g. {example}") from None
        except RecursionError:
            raise DatasetError(f"{path}:{n}: JSON nested too deeply; each line must be one JSON object, "
                               f"e.g. {example}") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{n}: a JSON {json_type(row)}, not an object; each line must be one JSON "
                               f"object, e.g. {example}")
        yield n, row


def json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def get_id(row: dict[str, Any], key: str, where: str) -> str:
    """An id field: present, a string or an integer, not blank."""
    if key not in row:
        raise DatasetError(f"{where}: no {key!r} field; every row needs its id")
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DatasetError(f"{where}: {key} must be a string or an integer (got {json_type(value)} "
                           f"{shorten(value)})")
    text = str(value)
    if not text.strip():
        raise DatasetError(f"{where}: {key} is empty; give every row its own id")
    return text


def get_text(row: dict[str, Any], key: str, where: str, required: bool = False) -> str:
    """A text field: a string; null or absent (unless ``required``) read as empty."""
    if key not in row and required:
        raise DatasetError(f"{where}: no {key!r} field; add it (a string)")
    value = row.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(f"{where}: {key} must be a string (got {json_type(value)} {shorten(value)})")
    return value


def get_offset(ref: dict[str, Any], key: str, where: str) -> int:
    """A character offset: a whole number (JSON 12 or 12.0), never a string or a boolean."""
    if key not in ref:
        raise DatasetError(f"{where}: no {key!r} field; a reference needs start_index and end_index")
    value = ref[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise DatasetError(f"{where}: {key} must be a whole number of characters (got {json_type(value)} "
                           f"{shorten(value)})")
    return value


def problems_summary(problems: Problems, reasons: tuple[str, ...] = STRICT_REASONS, examples: int = 3) -> str:
    """``3 judgements naming ... (qrels/test.tsv:4, ...)``, one clause per reason with drops."""
    parts = []
    for reason in reasons:
        where = problems.get(reason) or []
        if where:
            shown = ", ".join(where[:examples]) + (", ..." if len(where) > examples else "")
            parts.append(f"{len(where)} {REASON_TEXT.get(reason, reason)} [{reason}] ({shown})")
    return "; ".join(parts)
