"""The errors a user can fix, and how pydantic's validation errors become one line each.

Every error a user can fix (a config, a dataset, a model not installed, an endpoint down, ...) is a ``UserError``:
the CLI catches that one class, prints the message without a traceback and exits 2. Each subclass keeps a
built-in base too (``ConfigError`` is a ``ValueError``) where callers catch it by that. Every config problem is a
``ConfigError`` whose message names the field path, the bad value and what is allowed.
"""
from __future__ import annotations

import re
import reprlib
import socket
import warnings
from typing import Any
from urllib.parse import urlsplit


class UserError(Exception):
    """An error the user can fix: the message says what is wrong and what to do; the CLI prints it, exit 2."""


class ConfigError(UserError, ValueError):
    """A config (or other user input) that cannot run. The message lists every problem, one per line."""


class MissingPackageError(UserError, ImportError):
    """A package a command needs is not installed, does not import or lacks what kbench calls; the message names
    the package and the ``pip install`` line that fixes it (``kbench.lazy.optional_import``)."""


class KbenchDeprecationWarning(FutureWarning):
    """A config key or name kbench renamed: the old one still works, and the warning says the new one."""


def deprecated(old: str, new: str) -> None:
    """Say once per process that ``old`` is now written ``new`` (shown by default, without a source line)."""
    warnings.warn_explicit(f"{old} is now {new}; the old name still works, but write {new}",
                           KbenchDeprecationWarning, filename="kbench", lineno=0, module="kbench",
                           registry=_DEPRECATIONS_SAID)


_DEPRECATIONS_SAID: dict = {}  # warnings' own once-registry for deprecated(), so each is said once


class KbenchNote(UserWarning):
    """Something kbench did on the user's behalf that they should know (a knob dropped on a strategy switch)."""


def note(text: str) -> None:
    """Say ``text`` once per process on stderr (the CLI shows it as ``kbench: note: ...``)."""
    warnings.warn_explicit(text, KbenchNote, filename="kbench", lineno=0, module="kbench", registry=_NOTES_SAID)


_NOTES_SAID: dict = {}


class RunError(UserError, RuntimeError):
    """A run that cannot go on with this data (e.g. a chunker that produced nothing); the CLI prints it plainly."""


def owner_model(model: type | None, loc: tuple) -> type | None:
    """Follow a pydantic error location down nested models to the model that owns the last key."""
    for part in loc:
        if model is None or not hasattr(model, "model_fields"):
            return None
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        ann = field.annotation
        model = ann if hasattr(ann, "model_fields") else None
    return model


MAX_ECHO = 120  # characters of a bad value an error repeats (an alias bomb expands to gigabytes)
_ECHO = reprlib.Repr()
_ECHO.maxlevel, _ECHO.maxdict, _ECHO.maxlist, _ECHO.maxtuple, _ECHO.maxset = 3, 6, 6, 6, 6
_ECHO.maxstring, _ECHO.maxother, _ECHO.maxlong = MAX_ECHO, MAX_ECHO, 40


QUOTED_TOKEN_MAX = 24  # characters of a word from a user's file an error may repeat
SECRET_LIKE = re.compile(r"(?i)key|token|secret|passw|bearer|auth|cred|^sk-|^xox|^gh[pousr]_|=")


def quoted_token(text: Any, limit: int = QUOTED_TOKEN_MAX) -> str:
    """What an error about a user's file may repeat of a line or field: its first word, quoted, when that word is
    short and not key-like; never the rest of the line. A file named by mistake may be a ``.env`` or a shell
    profile (``export OPENAI_API_KEY=sk-live-...``), and the message reaches terminals, CI logs and notebooks.

        quoted_token("export OPENAI_API_KEY=sk-live-123")  ->  "'export' and 1 more word (not shown)"
    """
    words = str(text).split()
    if not words:
        return "an empty value"
    first = words[0]
    shown = (repr(first) if len(first) <= limit and first.isprintable() and not SECRET_LIKE.search(first)
             else f"a {len(first)}-character word (not shown)")
    more = len(words) - 1
    return shown + (f" and {more} more word{'s' if more > 1 else ''} (not shown)" if more else "")


# a value that holds a key: a provider's key prefix, or an assignment to a key-like name
SECRET_VALUE = re.compile(r"(?i)\b(sk|pk|rk)-[a-z0-9_-]{6,}|\bxox[abpr]-|\bgh[pousr]_|\bAKIA[0-9A-Z]{12}|bearer\s|"
                          r"(api[_-]?key|token|secret|passw(or)?d?)\w*\s*[=:]")


def shorten(value: Any, limit: int = MAX_ECHO) -> str:
    """A repr of ``value`` that stays short however big or deep the value is; a string that holds something
    key-like (``sk-...``, ``OPENAI_API_KEY=...``) is not shown at all."""
    if isinstance(value, str) and SECRET_VALUE.search(value):
        return "(a value not shown: it looks like it holds a key)"
    text = _ECHO.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_error(err: dict[str, Any], prefix: str, root: type | None) -> str:
    """One pydantic error -> ``path: what is wrong (got value); allowed: ...``."""
    loc = tuple(err.get("loc", ()))
    path = ".".join(str(p) for p in ((prefix,) if prefix else ()) + loc)
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        owner = owner_model(root, loc[:-1])
        if owner is None:
            return f"{path}: unknown key; see the docs for the allowed keys"
        if not owner.model_fields:
            return f"{path}: unknown key; this section takes no keys, remove it"
        return f"{path}: unknown key; allowed keys: {', '.join(owner.model_fields)}"
    if kind == "value_error":
        msg = str(ctx.get("error", err.get("msg")))
        # a nested section's validator already names the full path (retrieval.leg_params.bm25.k1: ...)
        return msg if not loc or msg.startswith((f"{path}.", f"{path}:")) else f"{path}: {msg}"
    if kind in ("non_finite_number", "bool_for_number"):  # kbench.registry.number_problem
        return f"{path}{ctx.get('at', '')}: {err.get('msg')}"
    if kind == "finite_number":
        return f"{path}: not a finite number (got {shorten(err.get('input'))}); NaN and infinities are refused, " \
               "write a finite number"
    if kind == "missing":
        return f"{path}: required field missing"
    expected = ctx.get("expected")
    tail = f"; allowed: {expected}" if expected else ""
    return f"{path}: {err.get('msg')} (got {shorten(err.get('input'))}){tail}"


ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")  # how environment variables are named (POSIX, upper case)


def looks_like_env_name(name: str) -> bool:
    """Whether a value given as an env var's *name* may be shown: a key pasted there instead must not be."""
    return bool(ENV_NAME.fullmatch(name))


def url_has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False


def redact_url(url: str, limit: int = MAX_ECHO) -> str:
    """A URL for a message: scheme, host, port and path; never a user:password or a query string, never long."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, tail = re.match(r"([^/?#]*)(.*)", rest, re.S).groups()
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    path, query, _ = tail.partition("#")[0].partition("?")
    shown = f"{scheme}{sep}{authority}{path}{'?***' if query else ''}"
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def endpoint_problem(url: str, timeout_s: float = 3.0) -> str | None:
    """Why nothing answers at ``url`` (an http(s) or tcp address), or None when a TCP connection opens.

    One connection attempt with a short timeout, so a closed port or a dead host fails a run in seconds
    instead of after a client's retries."""
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    url = redact_url(url)  # what messages show: never a password, never a thousand characters
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return f"{url} has no valid port"
    if not parts.hostname or port is None:
        return f"{url} names no host and port"
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return f"{url} refuses connections (nothing listens on {parts.hostname}:{port})"
    except socket.timeout:
        return f"{url} did not answer within {timeout_s:.0f} s"
    except (OSError, UnicodeError) as e:
        return f"{url} cannot be reached ({getattr(e, 'strerror', None) or type(e).__name__})"
