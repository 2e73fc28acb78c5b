"""Helpers for receiving Lumen webhook deliveries.

Lumen signs each delivery with HMAC-SHA256 and sends the result in the
``Lumen-Signature`` header, formatted as ``t=<unix time>,v1=<hex digest>``.
During a secret rotation the header carries one ``v1`` entry per active
secret. :func:`verify_signature` checks the header and returns the decoded
event.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Dict, List, Optional, Tuple, Union

DEFAULT_TOLERANCE = 300
"""Maximum accepted age of a delivery, in seconds (5 minutes)."""

SIGNATURE_HEADER = "Lumen-Signature"


class SignatureError(Exception):
    """The webhook signature is missing, malformed, stale or wrong."""


def parse_signature_header(header: str) -> Tuple[int, List[str]]:
    """Split a ``Lumen-Signature`` header into its parts.

    Args:
        header: The raw header value, e.g. ``"t=1717406122,v1=ab12..."``.

    Returns:
        A tuple of the integer timestamp and the list of ``v1`` signatures.
        Unknown keys (for future signature schemes) are ignored.

    Raises:
        SignatureError: If there is no timestamp or no ``v1`` signature.
    """
    timestamp: Optional[int] = None
    signatures: List[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError as exc:
                raise SignatureError("timestamp is not an integer") from exc
        elif key == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise SignatureError("header must contain t= and at least one v1=")
    return timestamp, signatures


def compute_signature(payload: bytes, timestamp: int, secret: str) -> str:
    """Compute the expected ``v1`` signature for a payload.

    The signed message is the decimal timestamp, a period, and the raw body
    bytes, i.e. ``b"1717406122." + body``. The key is the full ``whsec_...``
    secret encoded as UTF-8.

    Returns:
        The lowercase hexadecimal HMAC-SHA256 digest.
    """
    message = str(timestamp).encode("ascii") + b"." + payload
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def verify_signature(
    payload: Union[bytes, str],
    header: Optional[str],
    secret: str,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: Optional[float] = None,
) -> Dict[str, Any]:
    """Verify a webhook delivery and return the parsed event.

    Pass the request body exactly as received. Frameworks that hand you a
    parsed JSON object must be configured to expose the raw body instead;
    re-serializing the JSON changes the bytes and breaks the signature.

    Args:
        payload: Raw request body. ``str`` is encoded as UTF-8.
        header: Value of the ``Lumen-Signature`` header.
        secret: The endpoint's signing secret (``whsec_...``).
        tolerance: Maximum allowed difference in seconds between the
            signature timestamp and ``now``, in either direction. Set it to
            0 to disable the check, which is not recommended because it
            allows replaying old deliveries.
        now: Current Unix time; defaults to :func:`time.time`. Useful in tests.

    Returns:
        The decoded event, a dict with ``id``, ``type``, ``created_at`` and
        ``data`` keys.

    Raises:
        SignatureError: If the header is missing or malformed, the timestamp
            is outside the tolerance, or no ``v1`` signature matches.
    """
    if not header:
        raise SignatureError(f"missing {SIGNATURE_HEADER} header")
    body = payload.encode("utf-8") if isinstance(payload, str) else payload
    timestamp, candidates = parse_signature_header(header)
    current = time.time() if now is None else now
    if tolerance and abs(current - timestamp) > tolerance:
        raise SignatureError("timestamp outside the tolerance window")
    expected = compute_signature(body, timestamp, secret)
    if not any(hmac.compare_digest(expected, candidate) for candidate in candidates):
        raise SignatureError("no matching v1 signature")
    return json.loads(body)
