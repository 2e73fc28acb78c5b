"""The labels file: every human grade appended the moment it is given, as TREC qrels, with its provenance beside it.

    labels = LabelsFile.open(path, pool, annotator="alice")   # checks the file belongs to this pool
    labels.add(pair_index, 2)          # written and fsynced before it returns; False if the pair was graded already
    labels.skip(pair_index)            # recorded; the pair comes again after SKIP_AGAIN_AFTER more grades
    labels.grades()                    # [P] floats, NaN where no one graded
    with LabelsLock(path, "serving"):  # one writer per labels file across processes (the page, an import)

- ``LABELS`` (e.g. ``experiments/labels/<sweep>.qrels``): one TREC qrels line per grade, ``<query id> 0 <doc
  id>@<start>-<end> <grade>``: passage-level qrels whose docno is the passage's document and character range.
  Ids are written with ``encode_id``: ``%``, whitespace and unprintable characters percent-encoded (UTF-8), every
  other character as it is, so any document path reads back (a space, a tab, a newline, markup, quotes, non-ASCII)
  and a plain id is written unchanged (other tools read the file as TREC qrels).
- ``LABELS.provenance.jsonl``: a header line (the pool's fingerprint and file, dataset, runs, k, scale, the seed,
  the random share and how the order is made, how ids are written, when it began) and one line per grade or skip:
  who (``--annotator`` or the OS user), when (UTC), which pair, the stream that served it (random share or
  active), its position.
- ``LABELS.pool.json``: the pool itself (``labelling.pool.LabelPool``), so a session resumes, or moves to another
  machine, without MLflow.
- ``LABELS.lock``: held (``flock``) by the process that writes the file (the page, a Label Studio import), and
  naming it (process id, address): a second one is refused with one line naming the first; a lock left by a
  process that died is taken over, and said.

Resumable: a restart reads the file back and serves only pairs with no grade. Nothing lost on close: each line is
one ``os.write`` of the whole line, fsynced, before the page moves on; a write that fails (disk full, read-only,
the file deleted: it is never created again behind the labeller's back) leaves no partial line and raises
``OSError`` with the file named, and the pair stays ungraded. One grade per pair: ``add`` takes a lock, and a pair
graded already (by another tab) is not written again. A labels file of another pool is refused: its header names
another fingerprint; a file with no provenance, or a provenance whose labels file is gone, is described as such.

Skips: a skipped pair is served again once ``SKIP_AGAIN_AFTER`` more pairs are graded; skipped a second time it is
set aside (served after every other pair) and its question leaves the random share (``set_aside``; the estimate
passes over it and says so), so one pair no one can grade never holds back the interval.
"""
from __future__ import annotations

import errno
import fcntl
import getpass
import json
import math
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from kbench.cache import pid_alive
from kbench.errors import quoted_token
from kbench.labelling.order import RANDOM
from kbench.labelling.pool import LabelError, LabelPool

ORDERING = ("kbench.labelling.order: a seeded random permutation of the questions, each served whole (the random "
            "share), alternating with the active order (pairs by how much their grade could move the difference of "
            "the recommended config and each contender, times the model's uncertainty)")
IDS = "percent-encoded"  # the header's "ids": how ids are written (a file without it, from before, holds them raw)
SKIP_AGAIN_AFTER = 5  # grades after which a pair skipped once is served again


def provenance_path(labels: Path) -> Path:
    return labels.with_name(labels.name + ".provenance.jsonl")


def pool_path(labels: Path) -> Path:
    return labels.with_name(labels.name + ".pool.json")


def lock_path(labels: Path) -> Path:
    return labels.with_name(labels.name + ".lock")


def default_annotator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a container
        return "unknown"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def encode_id(text: str) -> str:
    """An id as one qrels word: ``%``, whitespace and unprintable characters percent-encoded (UTF-8), the rest as
    it is (``decode_id`` reverses it exactly)."""
    return "".join(ch if ch != "%" and ch.isprintable() and not ch.isspace()
                   else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) for ch in text)


def decode_id(word: str) -> str:
    return unquote(word, encoding="utf-8", errors="surrogatepass")


def qrels_line(query_id: str, pair_id: str, grade: int) -> str:
    return f"{encode_id(query_id)} 0 {encode_id(pair_id)} {grade}\n"


def _lines(path: Path) -> list[tuple[int, str, bool]]:
    """(number, text, ends with a newline) per line; a line whose bytes are not UTF-8 reads with U+FFFD."""
    data = path.read_bytes()
    parts = data.split(b"\n")
    out = []
    for number, part in enumerate(parts, start=1):
        if not part.strip() and number == len(parts):
            continue
        try:
            text = part.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            text = part.decode("utf-8", "replace")
        out.append((number, text.rstrip("\r"), number < len(parts)))
    return out


def read_qrels(path: Path, pool: LabelPool, encoded: bool = True) -> dict[int, int]:
    """pair index -> grade from a labels file (the last line of a pair wins); a line naming a pair this pool lacks,
    or a grade outside the scale, is a LabelError naming the line (never quoting it). ``encoded``: ids written
    with ``encode_id`` (False: a file from before, ids as they are, spaces and all). A last line cut short by a
    crash (no newline, not a whole qrels line) is left out: its pair stays ungraded."""
    return dict(_rows(Path(path), pool, encoded))


def _is_grade(word: str) -> bool:
    return word.isascii() and word.lstrip("-").isdigit()


def _rows(path: Path, pool: LabelPool, encoded: bool) -> list[tuple[int, int]]:
    """(pair index, grade) of each line, in the file's order (see ``read_qrels``)."""
    index = {(p.query_id, p.pair_id): i for i, p in enumerate(pool.pairs)}
    # a file from before ids were encoded holds them as they were: a line is matched whole, so an id with a space
    # (which the old writer let through) still reads back
    raw = {} if encoded else {f"{p.query_id} 0 {p.pair_id}": i for i, p in enumerate(pool.pairs)}
    rows: list[tuple[int, int]] = []
    for number, line, whole in _lines(path):
        if not line.strip():
            continue
        head, _, last = line.rpartition(" ")
        if head in raw and _is_grade(last):
            pair, grade = raw[head], int(last)
        else:
            parts = line.split()
            if len(parts) != 4 or not _is_grade(parts[3]):
                if not whole:
                    continue
                raise LabelError(f"{path} line {number}: {quoted_token(line)} is not a qrels line (query 0 passage "
                                 "grade); give a labels file `kbench label` wrote")
            key = (decode_id(parts[0]), decode_id(parts[2])) if encoded else (parts[0], parts[2])
            if key not in index:
                raise LabelError(f"{path} holds labels of another pool: line {number} grades {quoted_token(parts[2])} "
                                 f"for question {quoted_token(parts[0])}, which this pool does not hold; give another "
                                 f"--labels, or --pool {pool_path(path)} to go on with the pool it was made for")
            pair, grade = index[key], int(parts[3])
        if grade not in pool.grades:
            raise LabelError(f"{path} line {number}: grade {grade} is outside the {pool.scale} scale "
                             f"({', '.join(map(str, pool.grades))})")
        rows.append((pair, grade))
    return rows


class LabelsFile:
    def __init__(self, path: Path, pool: LabelPool, annotator: str, graded: dict[int, int],
                 skips: dict[int, list[int]] | None = None):
        self.path, self.pool, self.annotator = Path(path), pool, annotator
        self._graded = graded
        self._skips = {p: s for p, s in (skips or {}).items() if p not in graded}  # pair -> grades counted at each skip
        self._lock = threading.Lock()
        self._positions = {p: (i, s) for i, (p, s) in enumerate(pool.plan.order)}
        self.version = 0  # moves with every grade or skip written (what the page's estimate is cached by)
        self.regraded = 0  # pairs the file grades more than once, differently (two servers before the lock): last kept

    @classmethod
    def open(cls, path: Path, pool: LabelPool, annotator: str | None = None) -> "LabelsFile":
        """The labels file at ``path`` for ``pool``: created with its header, or read back (after checking it is
        this pool's); the pool file is written beside it when missing."""
        path = Path(path)
        side = provenance_path(path)
        labels_there, side_there = path.exists(), side.exists()
        if labels_there and not side_there and path.stat().st_size:
            raise LabelError(f"{path} holds {_count(len(_lines(path)), 'grade line')} but no provenance beside it "
                             f"({side.name}: which pool they grade, who graded them): it was deleted or moved; put it "
                             "back, or give another --labels (this file is left as it is)")
        if side_there:
            header, events = _read_side(side)
            _check_header(path, side, header, pool, events)
            grade_events = sum(1 for e in events if isinstance(e.get("grade"), int))
            if not labels_there and grade_events:
                raise LabelError(f"{path} is gone, but its provenance ({side.name}) records "
                                 f"{_count(grade_events, 'grade')}: the labels file was deleted or moved while it was "
                                 f"in use; put it back, or move {side.name} away to start a new labels file here")
            if not labels_there:
                _create(path, b"")
            encoded = header.get("ids") == IDS
            rows = _rows(path, pool, encoded)
            graded = dict(rows)
            regraded = len({pair for pair, grade in rows if grade != graded[pair]})
            if not encoded:
                _encode_ids_of(path, side, header, rows, pool)
            else:
                _mend_tail(path)
            skips = _skips(events, pool)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            header = {"pool": pool.fingerprint, "pool_file": str(pool_path(path)), "dataset": pool.dataset,
                      "dataset_path": pool.dataset_path, "runs": pool.runs, "sweep": pool.sweep,
                      "configs": pool.configs, "k": pool.k, "scale": pool.scale, "model": pool.model,
                      "seed": pool.plan.seed, "random_share": pool.plan.random_share, "ordering": ORDERING,
                      "ids": IDS, "started": now()}
            try:
                _create(side, _json_line(header))
            except FileExistsError:  # another process made it this instant: read it as any existing file
                return cls.open(path, pool, annotator)
            if not labels_there:
                _create(path, b"")
            graded, skips, regraded = read_qrels(path, pool), {}, 0
        if not pool_path(path).exists():
            pool.write(pool_path(path))
        found = cls(path, pool, annotator or default_annotator(), graded, skips)
        found.regraded = regraded
        return found

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
        """Append one grade (fsynced); False when the pair already holds one (nothing written). OSError when it
        cannot be written (nothing half-written; the pair stays ungraded)."""
        if grade not in self.pool.grades:
            raise LabelError(f"grade {grade} is outside the {self.pool.scale} scale ({', '.join(map(str, self.pool.grades))})")
        p = self.pool.pairs[pair]
        event = {"at": at or now(), "annotator": annotator or self.annotator, "query_id": p.query_id,
                 "pair": p.pair_id, "grade": grade, "stream": self.stream(pair), "position": self.position(pair),
                 "source": source}
        with self._lock:
            if pair in self._graded:
                return False
            before = _append(self.path, qrels_line(p.query_id, p.pair_id, grade).encode("utf-8"))
            try:
                _append(provenance_path(self.path), _json_line(event))
            except OSError:
                _truncate(self.path, before)  # the qrels line is the record: no grade without its provenance
                raise
            self._graded[pair] = grade
            self._skips.pop(pair, None)
            self.version += 1
        return True

    def skip(self, pair: int) -> None:
        """Record a skip (OSError when it cannot be written: nothing changes)."""
        p = self.pool.pairs[pair]
        with self._lock:
            if pair in self._graded:
                return
            _append(provenance_path(self.path), _json_line(
                {"at": now(), "annotator": self.annotator, "query_id": p.query_id, "pair": p.pair_id, "grade": "skip",
                 "stream": self.stream(pair), "position": self.position(pair), "source": "page"}))
            self._skips.setdefault(pair, []).append(self.count)
            self.version += 1

    def skipped(self, pair: int) -> int:
        """How many times ``pair`` was skipped (0 once it is graded)."""
        return len(self._skips.get(pair, ()))

    @property
    def set_aside(self) -> set[int]:
        """Pairs skipped twice and still ungraded: served last; their questions leave the random share."""
        return {p for p, s in self._skips.items() if len(s) >= 2}

    def position(self, pair: int) -> int:
        return self._positions[pair][0]

    def stream(self, pair: int) -> str:
        return self._positions[pair][1]

    def remaining(self) -> list[int]:
        """Pairs with no grade, in the plan's order, but: a pair skipped once waits until ``SKIP_AGAIN_AFTER`` more
        pairs are graded; pairs set aside (skipped twice), and the random-share pairs of their questions, come
        last."""
        aside = self.set_aside
        aside_questions = {self.pool.pairs[p].query_id for p in aside}
        now_, waiting, last = [], [], []
        for p, stream in self.pool.plan.order:
            if p in self._graded:
                continue
            skips = self._skips.get(p, ())
            if p in aside or (stream == RANDOM and self.pool.pairs[p].query_id in aside_questions):
                last.append(p)
            elif skips and (due := SKIP_AGAIN_AFTER - (self.count - skips[-1])) > 0:
                waiting.append((due - 0.5, p))  # after ``due`` of the pairs served now
            else:
                now_.append(p)
        keyed = [(float(i), p) for i, p in enumerate(now_)] + waiting
        return [p for _, p in sorted(keyed, key=lambda x: x[0])] + last

    def graded_events(self) -> dict[tuple[str, str], dict]:
        """(query id, passage id) -> its grade's provenance event (annotator, time, source) with the grade the labels
        file holds, for every graded pair (MLflow's assessments, kbench.tracking.mlflow_labels)."""
        _, events = _read_side(provenance_path(self.path))
        latest = {(str(e.get("query_id")), str(e.get("pair"))): e for e in events if isinstance(e.get("grade"), int)}
        out = {}
        for pair, grade in list(self._graded.items()):
            p = self.pool.pairs[pair]
            out[(p.query_id, p.pair_id)] = {**latest.get((p.query_id, p.pair_id), {"annotator": "unknown"}),
                                            "grade": grade}
        return out


class LabelsLock:
    """An exclusive ``flock`` on ``LABELS.lock`` while one process writes the labels file (the page, an import);
    the kernel drops it when the process dies. The file names the holder (pid, what, address) for the one line a
    second process gets."""

    def __init__(self, labels: Path, doing: str):
        self.labels, self.path, self.doing = Path(labels), lock_path(Path(labels)), doing
        self.note = ""  # said when a lock left by a dead process was taken over
        self._fd: int | None = None

    def __enter__(self) -> "LabelsLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> "LabelsLock":
        # held read-only: an open file written to would keep its file system from being remounted read-only
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as e:
            raise LabelError(f"{self.path}: cannot make the lock beside the labels file ({e.strerror}); give --labels "
                             "in a folder you can write") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LabelError(f"{self.labels} is in use by another kbench label ({describe_holder(holder)}): go on "
                             "there, or stop it first (two writers on one labels file would serve the same pairs "
                             "twice)") from None
        left = _holder(fd)
        pid = left.get("pid")
        if isinstance(pid, int) and pid != os.getpid() and not pid_alive(pid):
            self.note = (f"kbench label: took over the lock of {self.labels} from process {pid} "
                         f"({left.get('doing', '?')}), which is no longer running")
        self._fd = fd
        self.update()
        return self

    def update(self, url: str | None = None) -> None:
        """Name this process (and the page's address, once bound) in the lock file."""
        if self._fd is not None:
            self._write(json.dumps({"pid": os.getpid(), "doing": self.doing, "since": now(),
                                    **({"url": url} if url else {})}).encode())

    def _write(self, data: bytes) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError:  # the holder's name is a courtesy: the flock is the lock
            pass

    def release(self) -> None:
        if self._fd is None:
            return
        self._write(b"")  # an empty lock file: left by a clean stop, nothing to take over
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def describe_holder(holder: dict) -> str:
    parts = [f"process {holder.get('pid', '?')}", str(holder.get("doing") or "")]
    if holder.get("url"):
        parts.append(str(holder["url"]))
    return ", ".join(p for p in parts if p)


def _holder(fd: int) -> dict:
    try:
        found = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _json_line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")


def _create(path: Path, data: bytes) -> None:
    """A new file holding ``data`` (fsynced); FileExistsError when it is there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        if data:
            os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _append(path: Path, data: bytes) -> int:
    """Append ``data`` (one line) with one ``os.write`` and fsync; returns the file's size before. The file is
    never created (one deleted while the page runs is an error, not a new file behind the labeller's back); on any
    failure the file is cut back to its size before, so no partial line is left, and the OSError names it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes written (the disk is full?)")
            os.fsync(fd)
        except OSError as e:
            try:
                os.ftruncate(fd, before)
            except OSError:
                pass
            raise OSError(e.errno, e.strerror, str(path)) from None
        return before
    finally:
        os.close(fd)


def _truncate(path: Path, size: int) -> None:
    try:
        os.truncate(path, size)
    except OSError:
        pass


def _read_side(side: Path) -> tuple[dict, list[dict]]:
    """(header, events) of a provenance file: the header is the first line when it names a pool, else {}; an
    event line cut by a crash mid-write is left out (the qrels line is the record)."""
    header, events = {}, []
    for number, line, _ in _lines(side):
        try:
            record = json.loads(line)
        except ValueError:
            if number == 1:
                raise LabelError(f"{side} line 1 is not JSON: its header (which pool the labels are of) is damaged; "
                                 "give a labels file `kbench label` wrote, or another --labels") from None
            continue
        if not isinstance(record, dict):
            continue
        if number == 1 and "pool" in record:
            header = record
        elif "grade" in record:
            events.append(record)
    return header, events


def _check_header(path: Path, side: Path, header: dict, pool: LabelPool, events: list[dict]) -> None:
    if not header:
        said = (f"begins with {len(events)} grade or skip lines" if events else "is empty")
        raise LabelError(f"{side} has no header (the line that says which pool {path.name} grades): it {said}, so it "
                         "was emptied or made again while the page ran; put the provenance back, or give another "
                         "--labels")
    if header.get("pool") != pool.fingerprint:
        raise LabelError(f"{path} holds labels of another pool (fingerprint {str(header.get('pool'))[:12]}, "
                         f"these runs make {pool.fingerprint[:12]}); give another --labels, or --pool "
                         f"{pool_path(path)} to go on with the pool it was made for")


def _skips(events: list[dict], pool: LabelPool) -> dict[int, list[int]]:
    """pair -> the number of grades given before each of its skips, from the provenance in order."""
    index = {(p.query_id, p.pair_id): i for i, p in enumerate(pool.pairs)}
    skips: dict[int, list[int]] = {}
    graded: set = set()
    for event in events:
        key = (str(event.get("query_id")), str(event.get("pair")))
        if key not in index:
            continue
        if event.get("grade") == "skip":
            skips.setdefault(index[key], []).append(len(graded))
        else:
            graded.add(key)
    return skips


def _encode_ids_of(path: Path, side: Path, header: dict, rows: list[tuple[int, int]], pool: LabelPool) -> None:
    """A labels file from before ids were encoded, rewritten once from what it read back (``rows``), ids encoded
    (the same bytes unless an id holds whitespace or ``%``), and the header saying so; each file written whole,
    then renamed. Left as it is when its folder cannot be written (it reads as before)."""
    qrels = "".join(qrels_line(pool.pairs[pair].query_id, pool.pairs[pair].pair_id, grade) for pair, grade in rows)
    side_lines = [_json_line({**header, "ids": IDS})] + [(text + "\n").encode("utf-8", "surrogatepass")
                                                         for n, text, _ in _lines(side) if n > 1]
    try:
        for target, data in ((path, qrels.encode("utf-8")), (side, b"".join(side_lines))):
            partial = target.with_name(f".partial-{target.name}")
            partial.write_bytes(data)
            os.replace(partial, target)
    except OSError:
        pass


def _mend_tail(path: Path) -> None:
    """A labels file that does not end in a newline (a write cut short by a crash): the cut line, which
    ``read_qrels`` left out, is dropped, or a whole one ended, so the next grade starts a line of its own."""
    try:
        with open(path, "r+b") as f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            last = data[cut:].decode("utf-8", "replace").split()
            if len(last) == 4 and _is_grade(last[3]):
                f.write(b"\n")
            else:
                f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
    except OSError:  # a read-only file reads as it is; its first write says what is wrong
        pass


def read_provenance(labels: Path) -> tuple[dict, list[dict]]:
    """(header, events) of a labels file's provenance."""
    side = provenance_path(Path(labels))
    if not side.exists():
        raise LabelError(f"{side} is missing beside its labels file: it says which pool the labels are of; restore it "
                         "or give another --labels")
    return _read_side(side)


__all__ = ["IDS", "LabelsFile", "LabelsLock", "ORDERING", "SKIP_AGAIN_AFTER", "decode_id", "default_annotator",
           "encode_id", "lock_path", "pool_path", "provenance_path", "qrels_line", "read_provenance", "read_qrels"]
