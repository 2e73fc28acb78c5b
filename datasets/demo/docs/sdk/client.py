"""HTTP client for the Lumen REST API.

The :class:`LumenClient` class wraps the ``/v1`` endpoints used by
applications: enqueueing jobs, inspecting and managing them, and starting
workflow runs. Workers should use :class:`lumen.worker.Worker`, which builds
on this client.

Example:
    >>> from lumen import LumenClient
    >>> client = LumenClient("http://localhost:7420", api_key="lk_test_...")
    >>> job = client.enqueue("emails", {"to": "ada@example.com"})
    >>> job.state
    <JobState.QUEUED: 'queued'>
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from .errors import LumenError, RateLimitError, ServiceUnavailableError, error_from_response
from .jobs import Job, RetryPolicy, WorkflowRun

SDK_VERSION = "3.4.2"
BATCH_LIMIT = 500
_RETRYABLE_STATUSES = (429, 503)


class LumenClient:
    """Synchronous client for the Lumen API.

    Args:
        base_url: Server URL without the ``/v1`` suffix. Defaults to the
            ``LUMEN_SERVER`` environment variable, then to
            ``http://localhost:7420``.
        api_key: API key sent as a bearer token. Defaults to the
            ``LUMEN_API_KEY`` environment variable.
        timeout: Socket timeout in seconds for each HTTP request. Defaults
            to 10 seconds. Lease calls add their ``wait_seconds`` to this.
        max_retries: How many times to retry a request that failed with
            HTTP 429, HTTP 503 or a connection error. Defaults to 2, so a
            request is sent at most three times.

    Raises:
        ValueError: If no API key was given and ``LUMEN_API_KEY`` is unset.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: float = 10.0,
        max_retries: int = 2,
    ) -> None:
        self.base_url = (base_url or os.environ.get("LUMEN_SERVER") or "http://localhost:7420").rstrip("/")
        self.api_key = api_key or os.environ.get("LUMEN_API_KEY")
        if not self.api_key:
            raise ValueError("an API key is required (pass api_key or set LUMEN_API_KEY)")
        self.timeout = timeout
        self.max_retries = max_retries

    # ------------------------------------------------------------------ #
    # Low-level transport
    # ------------------------------------------------------------------ #

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Optional[Mapping[str, Any]] = None,
        params: Optional[Sequence[Tuple[str, str]]] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Tuple[int, Dict[str, Any], Dict[str, str]]:
        """Send one API request, retrying transient failures.

        Retries happen on HTTP 429, HTTP 503 and connection errors. The wait
        before each retry is the server's ``Retry-After`` value when present;
        otherwise it is ``0.5 * 2**n`` seconds for retry ``n`` (0.5 s, 1 s,
        2 s, ...), capped at 8 seconds.

        Returns:
            A tuple ``(status, body, headers)``. ``body`` is an empty dict for
            ``204 No Content`` responses.

        Raises:
            LumenError: A subclass matching the error response, once retries
                are exhausted or for non-retryable statuses.
        """
        url = f"{self.base_url}/v1{path}"
        if params:
            url += "?" + urllib.parse.urlencode(list(params))
        data = json.dumps(body).encode("utf-8") if body is not None else None
        all_headers = {
            "Authorization": f"Bearer {self.api_key}",
            "Accept": "application/json",
            "User-Agent": f"lumen-python/{SDK_VERSION}",
        }
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})

        attempt = 0
        while True:
            req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    raw = resp.read()
                    payload = json.loads(raw) if raw else {}
                    return resp.status, payload, dict(resp.headers)
            except urllib.error.HTTPError as exc:
                resp_headers = dict(exc.headers or {})
                try:
                    payload = json.loads(exc.read() or b"{}")
                except ValueError:
                    payload = {}
                err = error_from_response(exc.code, payload, resp_headers)
                if exc.code not in _RETRYABLE_STATUSES or attempt >= self.max_retries:
                    raise err from None
                retry_after = resp_headers.get("Retry-After")
                wait = float(retry_after) if retry_after else min(8.0, 0.5 * 2 ** attempt)
            except urllib.error.URLError as exc:
                if attempt >= self.max_retries:
                    raise ServiceUnavailableError(f"connection failed: {exc.reason}", code="unavailable") from exc
                wait = min(8.0, 0.5 * 2 ** attempt)
            attempt += 1
            time.sleep(wait)

    # ------------------------------------------------------------------ #
    # Jobs
    # ------------------------------------------------------------------ #

    def enqueue(
        self,
        queue: str,
        payload: Mapping[str, Any],
        *,
        priority: Optional[int] = None,
        delay_seconds: Optional[int] = None,
        run_at: Optional[str] = None,
        max_attempts: Optional[int] = None,
        timeout_seconds: Optional[int] = None,
        retry: Optional[RetryPolicy] = None,
        tags: Optional[List[str]] = None,
        ordering_key: Optional[str] = None,
        unique_key: Optional[str] = None,
        unique_for: Optional[int] = None,
        idempotency_key: Optional[str] = None,
    ) -> Job:
        """Enqueue a single job.

        Args:
            queue: Name of an existing queue.
            payload: JSON-serialisable mapping, at most 256 KiB once encoded.
            priority: 0-9; higher runs first. Defaults to the queue's default.
            delay_seconds: Run the job this many seconds from now. Mutually
                exclusive with ``run_at``.
            run_at: RFC 3339 timestamp at most 90 days in the future.
            max_attempts: Total attempts including the first (1-50).
            timeout_seconds: Per-attempt time limit (default 900 on the server).
            retry: Backoff configuration; see :class:`RetryPolicy`.
            tags: Up to 16 labels.
            ordering_key: Serialise jobs that share this key.
            unique_key: Deduplicate against existing jobs with this key.
            unique_for: Deduplication window in seconds (server default 3600).
            idempotency_key: Value for the ``Idempotency-Key`` header. If
                omitted, a random UUID4 is generated and reused across the
                client's internal retries, so a retried enqueue never creates
                a second job.

        Returns:
            The created job, or the existing job if the server deduplicated
            the request; check :attr:`Job.deduplicated` to tell them apart.

        Raises:
            ValueError: If both ``delay_seconds`` and ``run_at`` are given.
            NotFoundError: If the queue does not exist.
            PayloadTooLargeError: If the payload exceeds 256 KiB.
        """
        if delay_seconds is not None and run_at is not None:
            raise ValueError("pass either delay_seconds or run_at, not both")
        body: Dict[str, Any] = {"payload": dict(payload)}
        optional = {
            "priority": priority,
            "delay_seconds": delay_seconds,
            "run_at": run_at,
            "max_attempts": max_attempts,
            "timeout_seconds": timeout_seconds,
            "retry": retry.to_dict() if retry else None,
            "tags": tags,
            "ordering_key": ordering_key,
            "unique_key": unique_key,
            "unique_for": unique_for,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        key = idempotency_key or str(uuid.uuid4())
        status, data, headers = self._request(
            "POST",
            f"/queues/{urllib.parse.quote(queue)}/jobs",
            body=body,
            headers={"Idempotency-Key": key},
        )
        dedup = headers.get("Lumen-Deduplicated", "").lower() == "true"
        return Job.from_dict(data, deduplicated=dedup)

    def enqueue_batch(
        self,
        queue: str,
        items: Iterable[Mapping[str, Any]],
        *,
        atomic: bool = False,
    ) -> List[Dict[str, Any]]:
        """Enqueue many jobs with as few requests as possible.

        Each item is a mapping with a ``payload`` key and any enqueue options.
        Items are sent in chunks of at most 500 (the server's batch limit).

        Args:
            queue: Name of an existing queue.
            items: Job specifications.
            atomic: If True, the server creates all jobs of a request or none.
                Because atomicity cannot span several requests, more than 500
                items with ``atomic=True`` is rejected.

        Returns:
            The per-item results from the server, in input order, each with
            an ``index`` relative to the full input, a ``status`` and either
            a ``job`` or an ``error``.

        Raises:
            ValueError: If ``atomic`` is True and there are more than 500 items.
        """
        items = list(items)
        if atomic and len(items) > BATCH_LIMIT:
            raise ValueError(f"atomic batches are limited to {BATCH_LIMIT} items")
        results: List[Dict[str, Any]] = []
        for offset in range(0, len(items), BATCH_LIMIT):
            chunk = items[offset:offset + BATCH_LIMIT]
            _, data, _ = self._request(
                "POST",
                f"/queues/{urllib.parse.quote(queue)}/jobs:batch",
                body={"jobs": chunk, "atomic": atomic},
            )
            for item in data.get("results", []):
                item = dict(item)
                item["index"] = item["index"] + offset
                results.append(item)
        return results

    def get_job(self, job_id: str, *, include_attempts: bool = False) -> Job:
        """Fetch one job by ID.

        Args:
            job_id: The ``job_...`` identifier.
            include_attempts: Also fetch the attempt history. It is available
                on the raw response only and not mapped onto :class:`Job`.

        Raises:
            NotFoundError: If the job does not exist or was removed by retention.
        """
        params = [("include", "attempts")] if include_attempts else None
        _, data, _ = self._request("GET", f"/jobs/{job_id}", params=params)
        return Job.from_dict(data)

    def iter_jobs(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        tag: Optional[str] = None,
        page_size: int = 100,
    ) -> Iterator[Job]:
        """Iterate over jobs matching the filters, newest first.

        Pages are fetched lazily as the iterator advances, following
        ``next_cursor`` until ``has_more`` is false. Because cursors expire
        after 15 minutes, do not pause for long between pages.

        Args:
            queue: Only jobs in this queue.
            state: Only jobs in this state, e.g. ``"dead"``.
            tag: Only jobs carrying this tag.
            page_size: Jobs per request, between 1 and 200.

        Yields:
            :class:`Job` objects.
        """
        if not 1 <= page_size <= 200:
            raise ValueError("page_size must be between 1 and 200")
        cursor: Optional[str] = None
        while True:
            params: List[Tuple[str, str]] = [("limit", str(page_size))]
            for name, value in (("queue", queue), ("state", state), ("tag", tag), ("cursor", cursor)):
                if value is not None:
                    params.append((name, value))
            _, data, _ = self._request("GET", "/jobs", params=params)
            for item in data.get("data", []):
                yield Job.from_dict(item)
            if not data.get("has_more"):
                return
            cursor = data.get("next_cursor")

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a job. Running jobs are cancelled cooperatively.

        Raises:
            ConflictError: With reason ``invalid_state_transition`` if the job
                is already in a terminal state.
        """
        _, data, _ = self._request("POST", f"/jobs/{job_id}/cancel", body={})
        return Job.from_dict(data)

    def retry_job(self, job_id: str, *, reset_attempts: bool = False) -> Job:
        """Retry a failed, dead or cancelled job.

        Args:
            job_id: The job to retry.
            reset_attempts: Give the job its full ``max_attempts`` again
                instead of a single extra attempt.
        """
        _, data, _ = self._request("POST", f"/jobs/{job_id}/retry", body={"reset_attempts": reset_attempts})
        return Job.from_dict(data)

    # ------------------------------------------------------------------ #
    # Workflows
    # ------------------------------------------------------------------ #

    def start_workflow(
        self,
        name: str,
        input: Mapping[str, Any],
        *,
        version: Optional[int] = None,
        test: bool = False,
    ) -> WorkflowRun:
        """Start a run of a registered workflow.

        Args:
            name: Workflow definition name.
            input: JSON input available to steps as ``${{ input.* }}``.
            version: Pin a specific definition version; latest by default.
            test: Start a test run that is excluded from metrics and webhooks
                and deleted after 24 hours.
        """
        body: Dict[str, Any] = {"input": dict(input), "test": test}
        if version is not None:
            body["version"] = version
        _, data, _ = self._request("POST", f"/workflows/{name}/runs", body=body)
        return WorkflowRun.from_dict(data)

    def signal_workflow(self, run_id: str, signal: str, data: Optional[Mapping[str, Any]] = None) -> None:
        """Deliver a named signal to a workflow run.

        Signals sent before the run reaches the matching ``wait`` step are
        buffered by the server for up to 7 days.
        """
        self._request("POST", f"/workflow-runs/{run_id}/signals/{signal}", body={"data": dict(data or {})})

    def get_workflow_run(self, run_id: str) -> WorkflowRun:
        """Fetch the current status of a workflow run and its steps."""
        _, data, _ = self._request("GET", f"/workflow-runs/{run_id}")
        return WorkflowRun.from_dict(data)


__all__ = ["LumenClient", "LumenError", "RateLimitError", "BATCH_LIMIT", "SDK_VERSION"]
