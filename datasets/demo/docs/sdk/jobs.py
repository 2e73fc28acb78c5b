"""Data classes describing jobs, retry policies and workflow runs.

These classes are plain containers built from API responses. They do not
talk to the server themselves; use :class:`lumen.client.LumenClient` for that.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional


class JobState(str, enum.Enum):
    """The lifecycle states of a job."""

    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEAD = "dead"

    @property
    def is_terminal(self) -> bool:
        """Whether the job can no longer change state on its own.

        Terminal states are ``succeeded``, ``failed``, ``cancelled`` and
        ``dead``. Only terminal jobs can be deleted, and only ``failed``,
        ``dead`` and ``cancelled`` jobs can be retried.
        """
        return self in _TERMINAL


_TERMINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.DEAD}


@dataclass(frozen=True)
class RetryPolicy:
    """Client-side mirror of a job's ``retry`` object.

    Attributes:
        backoff: ``"exponential"``, ``"linear"`` or ``"fixed"``.
        initial_delay: Seconds before the first retry.
        multiplier: Growth factor, used only by exponential backoff.
        max_delay: Upper bound for a single delay in seconds.
        jitter: Random spread as a fraction of the delay (0.2 means +/-20%).
    """

    backoff: str = "exponential"
    initial_delay: float = 2.0
    multiplier: float = 2.0
    max_delay: float = 600.0
    jitter: float = 0.2

    def delay_for(self, retry_number: int, rng: Optional[random.Random] = None) -> float:
        """Compute the wait before a given retry, as the server would.

        This is useful for estimating when a retrying job will run again, for
        example to show "next attempt in about 30 s" in a user interface. The
        server's own computation is authoritative.

        Args:
            retry_number: 1 for the first retry, 2 for the second, and so on.
            rng: Optional random generator, so tests can make jitter
                deterministic.

        Returns:
            The delay in seconds, after applying the cap and then the jitter.

        Raises:
            ValueError: If ``retry_number`` is less than 1 or ``backoff`` is
                not a known strategy.
        """
        if retry_number < 1:
            raise ValueError("retry_number starts at 1")
        if self.backoff == "exponential":
            base = self.initial_delay * (self.multiplier ** (retry_number - 1))
        elif self.backoff == "linear":
            base = self.initial_delay * retry_number
        elif self.backoff == "fixed":
            base = self.initial_delay
        else:
            raise ValueError(f"unknown backoff strategy: {self.backoff!r}")
        base = min(base, self.max_delay)
        rng = rng or random.Random()
        factor = rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)
        return base * factor

    def to_dict(self) -> Dict[str, Any]:
        """Serialize the policy into the ``retry`` object of an enqueue request."""
        return {
            "backoff": self.backoff,
            "initial_delay": self.initial_delay,
            "multiplier": self.multiplier,
            "max_delay": self.max_delay,
            "jitter": self.jitter,
        }


def _parse_time(value: Optional[str]) -> Optional[datetime]:
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass
class Job:
    """A job as returned by the API.

    Attributes:
        id: The job ID, ``job_`` followed by a ULID.
        queue: Name of the queue the job belongs to.
        state: Current :class:`JobState`.
        payload: The JSON payload given at enqueue time.
        priority: 0 (lowest) to 9 (highest).
        attempts: Number of attempts started so far.
        max_attempts: Total attempts allowed, including the first.
        result: What the handler returned, once succeeded.
        last_error: ``{"code": ..., "message": ...}`` of the latest failure.
        tags: Free-form labels.
        created_at: Enqueue time.
        finished_at: Time the job reached a terminal state, if it has.
    """

    id: str
    queue: str
    state: JobState
    payload: Dict[str, Any]
    priority: int = 5
    attempts: int = 0
    max_attempts: int = 3
    result: Optional[Dict[str, Any]] = None
    last_error: Optional[Dict[str, str]] = None
    tags: List[str] = field(default_factory=list)
    created_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    deduplicated: bool = False

    @classmethod
    def from_dict(cls, data: Dict[str, Any], *, deduplicated: bool = False) -> "Job":
        """Build a :class:`Job` from the API's JSON representation.

        Args:
            data: The ``job`` object from a response body.
            deduplicated: True when the server answered with the
                ``Lumen-Deduplicated: true`` header, meaning an existing job
                was returned instead of a new one being created.

        Returns:
            A new :class:`Job`. Unknown fields in ``data`` are ignored, so
            newer servers can add fields without breaking older SDKs.
        """
        return cls(
            id=data["id"],
            queue=data["queue"],
            state=JobState(data["state"]),
            payload=data.get("payload", {}),
            priority=data.get("priority", 5),
            attempts=data.get("attempts", 0),
            max_attempts=data.get("max_attempts", 3),
            result=data.get("result"),
            last_error=data.get("last_error"),
            tags=list(data.get("tags", [])),
            created_at=_parse_time(data.get("created_at")),
            finished_at=_parse_time(data.get("finished_at")),
            deduplicated=deduplicated,
        )

    @property
    def attempts_left(self) -> int:
        """How many more attempts the job may use before it is dead-lettered."""
        return max(0, self.max_attempts - self.attempts)


@dataclass
class WorkflowRun:
    """One execution of a workflow definition.

    Attributes:
        id: Run ID, prefixed ``wfr_``.
        workflow: Name of the workflow definition.
        version: Definition version the run is pinned to.
        status: ``pending``, ``running``, ``compensating``, ``succeeded``,
            ``failed`` or ``cancelled``.
        steps: Mapping of step ID to that step's status string.
    """

    id: str
    workflow: str
    version: int
    status: str
    steps: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "WorkflowRun":
        """Build a :class:`WorkflowRun` from the API's JSON representation."""
        return cls(
            id=data["id"],
            workflow=data["workflow"],
            version=int(data["version"]),
            status=data["status"],
            steps={s["id"]: s["status"] for s in data.get("steps", [])},
        )

    @property
    def is_finished(self) -> bool:
        """True once the run is ``succeeded``, ``failed`` or ``cancelled``."""
        return self.status in ("succeeded", "failed", "cancelled")
