"""A ready-made worker process for Lumen queues.

:class:`Worker` leases jobs, runs the handler registered for each queue in a
thread pool, keeps leases alive with heartbeats, and reports the outcome.

Example:
    >>> worker = Worker(queues=["emails"], concurrency=8)
    >>> @worker.task("emails")
    ... def send(job):
    ...     return {"sent": True}
    >>> worker.run()  # blocks until SIGTERM or SIGINT
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .client import LumenClient
from .errors import JobCancelled, LeaseLost, PermanentFailure

log = logging.getLogger("lumen.worker")

Handler = Callable[["JobContext"], Optional[Dict[str, Any]]]


@dataclass
class JobContext:
    """What a handler receives for each leased job.

    Attributes:
        id: The job ID.
        queue: Queue the job was leased from.
        payload: The job's JSON payload.
        attempt: Attempt number, starting at 1.
        lease_token: Token proving this worker holds the lease.
    """

    id: str
    queue: str
    payload: Dict[str, Any]
    attempt: int
    lease_token: str
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if cancellation was requested.

        Call this periodically from long-running handlers, e.g. once per
        processed record, to stop promptly when someone cancels the job.
        """
        if self._cancel.is_set():
            raise JobCancelled(self.id)


class Worker:
    """Lease and execute jobs from one or more queues.

    Args:
        server: Server URL; see :class:`LumenClient` for defaults.
        api_key: Key with the ``worker`` scope.
        queues: Queue names to lease from, in rotation.
        concurrency: Maximum number of handlers running at once in this
            process. Defaults to 4.
        heartbeat_interval: Seconds between heartbeats for each running job.
            Defaults to 60, a fifth of the default 300-second lease. Keep it
            well below the shortest ``lease_seconds`` of your jobs.
        shutdown_timeout: Seconds to wait for running handlers after a stop
            signal before failing their jobs as retryable. Defaults to 60.
        wait_seconds: Long-poll duration for lease calls (at most 30).
        worker_id: Identity reported to the server. Defaults to
            ``"<hostname>:<pid>"``.
    """

    def __init__(
        self,
        server: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        queues: List[str],
        concurrency: int = 4,
        heartbeat_interval: float = 60.0,
        shutdown_timeout: float = 60.0,
        wait_seconds: int = 20,
        worker_id: Optional[str] = None,
    ) -> None:
        if not queues:
            raise ValueError("at least one queue is required")
        if not 1 <= wait_seconds <= 30:
            raise ValueError("wait_seconds must be between 1 and 30")
        self.client = LumenClient(server, api_key)
        self.queues = list(queues)
        self.concurrency = concurrency
        self.heartbeat_interval = heartbeat_interval
        self.shutdown_timeout = shutdown_timeout
        self.wait_seconds = wait_seconds
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self._handlers: Dict[str, Handler] = {}
        self._stopping = threading.Event()
        self._running: Dict[str, JobContext] = {}
        self._lock = threading.Lock()

    def task(self, queue: str) -> Callable[[Handler], Handler]:
        """Decorator registering a handler for ``queue``.

        The handler receives a :class:`JobContext` and may return a dict,
        which becomes the job's result (at most 64 KiB as JSON). Raising
        :class:`PermanentFailure` fails the job without retries; any other
        exception fails the attempt and lets the retry policy decide.

        Raises:
            ValueError: If a handler is already registered for the queue.
        """

        def register(func: Handler) -> Handler:
            if queue in self._handlers:
                raise ValueError(f"handler already registered for queue {queue!r}")
            self._handlers[queue] = func
            return func

        return register

    def run(self) -> None:
        """Process jobs until ``SIGTERM`` or ``SIGINT`` is received.

        On a stop signal the worker stops leasing, waits up to
        ``shutdown_timeout`` seconds for running handlers, then fails any jobs
        that are still running with ``retryable=True`` so other workers can
        pick them up immediately instead of waiting for the lease to expire.
        """
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        heartbeat = threading.Thread(target=self._heartbeat_loop, daemon=True)
        heartbeat.start()
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        while not self._stopping.is_set():
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._stopping.wait(0.05)
                continue
            for leased in self._lease(free):
                ctx = JobContext(
                    id=leased["job"]["id"],
                    queue=leased["job"]["queue"],
                    payload=leased["job"].get("payload", {}),
                    attempt=leased["attempt"],
                    lease_token=leased["lease_token"],
                )
                with self._lock:
                    self._running[ctx.id] = ctx
                future: Future = pool.submit(self._execute, ctx)
                future.add_done_callback(lambda _f, job_id=ctx.id: self._forget(job_id))
        self._drain()
        pool.shutdown(wait=False, cancel_futures=True)

    def _lease(self, max_jobs: int) -> List[Dict[str, Any]]:
        """Long-poll the server for up to ``max_jobs`` jobs."""
        first, rest = self.queues[0], self.queues[1:]
        _, data, _ = self.client._request(
            "POST",
            f"/queues/{first}/lease",
            body={
                "worker_id": self.worker_id,
                "max_jobs": min(max_jobs, 100),
                "wait_seconds": self.wait_seconds,
                "also_queues": rest,
            },
            timeout=self.client.timeout + self.wait_seconds,
        )
        return data.get("jobs", [])

    def _execute(self, ctx: JobContext) -> None:
        """Run the handler for one job and report the outcome."""
        handler = self._handlers.get(ctx.queue)
        try:
            if handler is None:
                raise LookupError(f"no handler registered for queue {ctx.queue!r}")
            result = handler(ctx)
            self._report(ctx, "complete", {"result": result or {}})
        except PermanentFailure as exc:
            self._report(ctx, "fail", {"error": _error("permanent_failure", exc), "retryable": False})
        except JobCancelled:
            self._report(ctx, "fail", {"cancelled": True})
        except Exception as exc:  # noqa: BLE001 - every handler error is reported
            log.exception("handler failed for %s", ctx.id)
            self._report(ctx, "fail", {"error": _error("handler_error", exc), "retryable": True})

    def _report(self, ctx: JobContext, action: str, extra: Dict[str, Any]) -> None:
        """Call the complete or fail endpoint, ignoring lost leases."""
        body = {"lease_token": ctx.lease_token, **extra}
        try:
            self.client._request("POST", f"/jobs/{ctx.id}/{action}", body=body)
        except LeaseLost:
            log.warning("lease lost for %s; outcome discarded", ctx.id)

    def _heartbeat_loop(self) -> None:
        """Send a heartbeat for every running job each ``heartbeat_interval``."""
        while not self._stopping.wait(self.heartbeat_interval):
            with self._lock:
                running = list(self._running.values())
            for ctx in running:
                try:
                    _, data, _ = self.client._request(
                        "POST", f"/jobs/{ctx.id}/heartbeat", body={"lease_token": ctx.lease_token}
                    )
                except LeaseLost:
                    log.warning("lease lost for %s during heartbeat", ctx.id)
                    ctx._cancel.set()
                    continue
                if data.get("cancel_requested"):
                    ctx._cancel.set()

    def _drain(self) -> None:
        """Fail jobs that are still running after ``shutdown_timeout``."""
        deadline = time.monotonic() + self.shutdown_timeout
        while self._running and time.monotonic() < deadline:
            time.sleep(0.1)
        with self._lock:
            leftovers = list(self._running.values())
        for ctx in leftovers:
            self._report(ctx, "fail", {"error": {"code": "worker_shutdown", "message": "worker stopped"}, "retryable": True})

    def _forget(self, job_id: str) -> None:
        with self._lock:
            self._running.pop(job_id, None)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        log.info("received signal %s, shutting down", signum)
        self._stopping.set()


def _error(code: str, exc: BaseException) -> Dict[str, str]:
    """Format an exception as the ``error`` object of the fail endpoint.

    The message is ``"<ExceptionType>: <text>"`` truncated to 4,096
    characters, the same limit the server applies.
    """
    return {"code": code, "message": f"{type(exc).__name__}: {exc}"[:4096]}
