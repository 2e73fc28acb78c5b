"""The labels file: every human grade appended the moment it is given, as TREC qrels, with its provenance beside it.

    labels = LabelsFile.open(path, pool, annotator="alice")   # checks the file belongs to this pool
    labels.add(pair_index, 2)          # written and fsynced before it returns; False if the pair was graded already
    labels.skip(pair_index)            # recorded; the pair comes again after the others
    labels.grades()                    # [P] floats, NaN where no one graded

- ``LABELS`` (e.g. ``experiments/labels/<sweep>.qrels``): one TREC qrels line per grade, ``<query id> 0 <doc
  id>@<start>-<end> <grade>``: passage-level qrels whose docno is the passage's document and character range.
- ``LABELS.provenance.jsonl``: a header line (the pool's fingerprint and file, dataset, runs, k, scale, the seed,
  the random share and how the order is made, when it began) and one line per grade or skip: who (``--annotator``
  or the OS user), when (UTC), which pair, the stream that served it (random share or active), its position.
- ``LABELS.pool.json``: the pool itself (``labelling.pool.LabelPool``), so a session resumes, or moves to another
  machine, without MLflow.

Resumable: a restart reads the file back and serves only pairs with no grade. Nothing lost on close: each line is
flushed and fsynced before the page moves on. One grade per pair: ``add`` takes a lock, and a pair graded already
(by another tab) is not written again. A labels file of another pool is refused: its header names another
fingerprint.
"""
from __future__ import annotations

import getpass
import json
import math
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from kbench.errors import quoted_token
from kbench.labelling.pool import LabelError, LabelPool

ORDERING = ("kbench.labelling.order: a seeded random permutation of the questions, each served whole (the random "
            "share), alternating with the active order (pairs by how much their grade could move the difference of "
            "the recommended config and each contender, times the model's uncertainty)")


def provenance_path(labels: Path) -> Path:
    return labels.with_name(labels.name + ".provenance.jsonl")


def pool_path(labels: Path) -> Path:
    return labels.with_name(labels.name + ".pool.json")


def default_annotator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a container
        return "unknown"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_qrels(path: Path, pool: LabelPool) -> dict[int, int]:
    """pair index -> grade from a labels file (the last line of a pair wins); a line naming a pair this pool lacks,
    or a grade outside the scale, is a LabelError naming the line."""
    index = {(p.query_id, p.pair_id): i for i, p in enumerate(pool.pairs)}
    found: dict[int, int] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
            raise LabelError(f"{path} line {number}: {quoted_token(line)} is not a qrels line (query 0 passage "
                             "grade); give a labels file `kbench label` wrote")
        key = (parts[0], parts[2])
        if key not in index:
            raise LabelError(f"{path} holds labels of another pool: line {number} grades {parts[2]} for question "
                             f"{parts[0]}, which this pool does not hold; give another --labels, or --pool "
                             f"{pool_path(Path(path))} to go on with the pool it was made for")
        grade = int(parts[3])
        if grade not in pool.grades:
            raise LabelError(f"{path} line {number}: grade {grade} is outside the {pool.scale} scale "
                             f"({', '.join(map(str, pool.grades))})")
        found[index[key]] = grade
    return found


class LabelsFile:
    def __init__(self, path: Path, pool: LabelPool, annotator: str, graded: dict[int, int], skipped: set[int]):
        self.path, self.pool, self.annotator = Path(path), pool, annotator
        self._graded, self._skipped = graded, skipped
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, pool: LabelPool, annotator: str | None = None) -> "LabelsFile":
        """The labels file at ``path`` for ``pool``: created with its header, or read back (after checking it is
        this pool's); the pool file is written beside it when missing."""
        path = Path(path)
        side = provenance_path(path)
        skipped: set[int] = set()
        if path.exists() or side.exists():
            header = _header(side)
            if header.get("pool") != pool.fingerprint:
                raise LabelError(f"{path} holds labels of another pool (fingerprint {str(header.get('pool'))[:12]}, "
                                 f"these runs make {pool.fingerprint[:12]}); give another --labels, or --pool "
                                 f"{pool_path(path)} to go on with the pool it was made for")
            graded = read_qrels(path, pool) if path.exists() else {}
            index = {p.pair_id + "|" + p.query_id: i for i, p in enumerate(pool.pairs)}
            for event in _events(side):
                key = f"{event.get('pair')}|{event.get('query_id')}"
                if event.get("grade") == "skip" and key in index:
                    skipped.add(index[key])
        else:
            graded = {}
            path.parent.mkdir(parents=True, exist_ok=True)
            _append(side, {"pool": pool.fingerprint, "pool_file": str(pool_path(path)), "dataset": pool.dataset,
                           "runs": pool.runs, "sweep": pool.sweep, "configs": pool.configs, "k": pool.k,
                           "scale": pool.scale, "model": pool.model, "seed": pool.plan.seed,
                           "random_share": pool.plan.random_share, "ordering": ORDERING, "started": now()})
            path.touch()
        if not pool_path(path).exists():
            pool.write(pool_path(path))
        return cls(path, pool, annotator or default_annotator(), graded, skipped - set(graded))

    def grades(self) -> np.ndarray:
        out = np.full(len(self.pool.pairs), math.nan)
        for i, g in list(self._graded.items()):
            out[i] = g
        return out

    def graded(self, pair: int) -> bool:
        return pair in self._graded

    @property
    def count(self) -> int:
        return len(self._graded)

    def add(self, pair: int, grade: int, *, source: str = "page", annotator: str | None = None,
            at: str | None = None) -> bool:
        """Append one grade (fsynced); False when the pair already holds one (nothing written)."""
        if grade not in self.pool.grades:
            raise LabelError(f"grade {grade} is outside the {self.pool.scale} scale ({', '.join(map(str, self.pool.grades))})")
        p = self.pool.pairs[pair]
        with self._lock:
            if pair in self._graded:
                return False
            _append_line(self.path, f"{p.query_id} 0 {p.pair_id} {grade}\n")
            _append(provenance_path(self.path), {"at": at or now(), "annotator": annotator or self.annotator,
                                                  "query_id": p.query_id, "pair": p.pair_id, "grade": grade,
                                                  "stream": self.stream(pair), "position": self.position(pair),
                                                  "source": source})
            self._graded[pair] = grade
            self._skipped.discard(pair)
        return True

    def skip(self, pair: int) -> None:
        p = self.pool.pairs[pair]
        with self._lock:
            if pair in self._graded:
                return
            _append(provenance_path(self.path), {"at": now(), "annotator": self.annotator, "query_id": p.query_id,
                                                  "pair": p.pair_id, "grade": "skip", "stream": self.stream(pair),
                                                  "position": self.position(pair), "source": "page"})
            self._skipped.add(pair)

    def _order_index(self) -> dict[int, tuple[int, str]]:
        if not hasattr(self, "_positions"):
            self._positions = {p: (i, s) for i, (p, s) in enumerate(self.pool.plan.order)}
        return self._positions

    def position(self, pair: int) -> int:
        return self._order_index()[pair][0]

    def stream(self, pair: int) -> str:
        return self._order_index()[pair][1]

    def remaining(self) -> list[int]:
        """Pairs with no grade, in the plan's order; skipped ones after the others."""
        todo = [p for p, _ in self.pool.plan.order if p not in self._graded]
        return [p for p in todo if p not in self._skipped] + [p for p in todo if p in self._skipped]


def _append_line(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())


def _append(path: Path, record: dict) -> None:
    _append_line(path, json.dumps(record, ensure_ascii=False) + "\n")


def _header(side: Path) -> dict:
    try:
        first = side.read_text(encoding="utf-8").splitlines()[:1]
        header = json.loads(first[0]) if first else {}
    except FileNotFoundError:
        raise LabelError(f"{side} is missing beside its labels file: it says which pool the labels are of; restore it "
                         "or give another --labels") from None
    except json.JSONDecodeError as e:
        raise LabelError(f"{side} line 1 is not JSON ({e}); give a labels file `kbench label` wrote") from None
    return header if isinstance(header, dict) else {}


def _events(side: Path):
    for line in side.read_text(encoding="utf-8").splitlines()[1:]:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a crash mid-write: the qrels line is the record
            continue
        if isinstance(event, dict):
            yield event


def read_provenance(labels: Path) -> tuple[dict, list[dict]]:
    """(header, events) of a labels file's provenance."""
    side = provenance_path(Path(labels))
    return _header(side), list(_events(side))


__all__ = ["LabelsFile", "ORDERING", "default_annotator", "pool_path", "provenance_path", "read_provenance",
           "read_qrels"]
