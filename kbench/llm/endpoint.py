"""Where a stage sends its requests: base URL, model and the *name* of the env var holding the key."""
from __future__ import annotations

import os
from dataclasses import dataclass

from kbench.errors import ConfigError, looks_like_env_name, redact_url, url_has_password


@dataclass(frozen=True)
class Endpoint:
    """``section`` names the config section that configured it, so every message says what to set."""

    section: str
    base_url: str | None
    model: str | None
    api_key_env: str = "OPENAI_API_KEY"
    kind: str = "chat"  # "chat" or "embeddings": which model the messages ask for
    base_url_option: str | None = None  # a command's flag (--base-url) where the URL came from its arguments

    @property
    def base_url_setting(self) -> str:
        """What a user changes to point the stage elsewhere: the command's flag, or ``<section>.base_url``."""
        return self.base_url_option or f"{self.section}.base_url"

    @property
    def url(self) -> str | None:
        """The base URL (``…/v1``), from the config or OPENAI_BASE_URL, without a trailing slash."""
        url = self.base_url or os.environ.get("OPENAI_BASE_URL")
        return url.rstrip("/") if url else None

    @property
    def shown_url(self) -> str | None:
        """The base URL for messages: no user:password, no query string (``errors.redact_url``)."""
        return redact_url(self.url) if self.url else None

    def problems(self) -> list[str]:
        s = self.section
        out = []
        if not self.url:
            out.append(f"{s}.base_url: no OpenAI-compatible endpoint configured; set {s}.base_url "
                       "(e.g. http://127.0.0.1:8000/v1, what `kbench serve` prints) or OPENAI_BASE_URL")
        elif url_has_password(self.url):  # it would reach messages, the run folder's config and MLflow
            out.append(f"{s}.base_url: {redact_url(self.url)} carries a password (user:password@); secrets never "
                       f"go in a URL: put the key in the environment variable {s}.api_key_env names")
        if not self.model:
            out.append(f"{s}.model: no {self.kind} model configured; set {s}.model (e.g. gpt-4o-mini, or a "
                       "model your local server lists at /v1/models)")
        if not os.environ.get(self.api_key_env):
            if looks_like_env_name(self.api_key_env):
                out.append(f"{s}.api_key_env: environment variable {self.api_key_env} is not set; export it with "
                           "your API key (any non-empty value for a local server such as `kbench serve`)")
            else:  # perhaps the key itself: never repeat it
                out.append(f"{s}.api_key_env: names no variable that is set, and its value (not shown: it may be "
                           "the key itself) is not a variable's name; export the key in a variable "
                           "(export OPENAI_API_KEY=...) and give its NAME here")
        return out

    def check(self) -> None:
        """Raise one ConfigError listing every missing piece, before any work starts."""
        if problems := self.problems():
            raise ConfigError("\n".join(problems))

    def api_key(self) -> str:
        self.check()
        return os.environ[self.api_key_env]
