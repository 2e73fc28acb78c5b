"""What the client raises. Messages name the endpoint and the fix, never the key."""
from __future__ import annotations

from kbench.errors import UserError


class LLMError(UserError, RuntimeError):
    """A request that could not be answered (after retries)."""


class EndpointUnreachableError(LLMError):
    """No connection to the endpoint at all (refused, unknown host): every further request would fail too."""


class QuotaExhaustedError(LLMError):
    """The provider says the account's quota is used up: retrying cannot help, the run stops at once."""


class AuthenticationError(LLMError):
    """The endpoint refused the key (401/403): every further request would fail too."""


class LLMStoppedError(LLMError):
    """A stage stopped part-way (quota, unreachable endpoint); what finished before is cached and kept."""
