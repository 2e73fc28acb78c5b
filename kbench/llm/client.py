"""One OpenAI-compatible client for every LLM and API stage: chat completions and embeddings.

    client = LLMClient(Endpoint("enrichment", base_url, model, "OPENAI_API_KEY"), stage="enrichment",
                       policy=LLMPolicy(), cache_root=workspace / "cache", meter=meter)
    text = client.chat(prompt, max_tokens=200)                 # one answer, or an LLMError
    batch = client.chat_many(prompts, max_tokens=200)          # ChatBatchResult: answers and failures apart
    vectors = client.embed(texts, dimensions=256)              # EmbeddingBatchResult

What it does for every request:
- **Retries** a 429, a 5xx, a timeout or a malformed 200 (not JSON, or not the shape the API promises) up
  to ``policy.max_retries`` times. A ``Retry-After`` header is honoured (capped at ``retry_after_max_s``);
  otherwise the wait is exponential with full jitter: uniform(0, min(backoff_max_s, backoff_base_s * 2^n)).
- **Stops at once** on what retrying cannot fix: a quota-exhausted answer (HTTP 402, or a 429 whose error
  says ``insufficient_quota``/quota), a refused key (401/403) or no connection at all (refused, unknown
  host, no connection within ``connect_timeout_s``: a message naming ``<section>.base_url`` in seconds).
  In a batch, requests already answered are kept (and cached); the rest are failures "not attempted".
- **Caches** every answer by (base URL, model, hash of the prompt or text, parameters) in
  ``<cache_root>/llm/`` (kbench.llm.cache), so a re-run sends no question. Before the first cached answer is
  replayed the endpoint is checked once (``check_endpoint``: ``GET <base_url>/models``): one that does not
  connect, or refuses the key, stops the stage as a first request would, never answered from the cache.
- **Counts** requests, cache hits, retries, failures and tokens per stage and model in a ``UsageMeter``
  (cost comes from the price table, kbench.llm.usage).
- **Batches** embeddings (``policy.batch_size`` texts per request) and runs up to ``policy.concurrency``
  requests at once. A batch that fails for a reason other than a stop is split in halves and retried, so
  one bad text fails alone, with its own error.

The key is read from the environment when the client is built and lives only in the HTTP client's
headers: not in ``repr``, an error message, a cache key or a metric.
"""
from __future__ import annotations

import math
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import httpx
import numpy as np

from kbench.errors import redact_url
from kbench.llm.cache import ResponseCache
from kbench.llm.config import LLMPolicy
from kbench.llm.endpoint import Endpoint
from kbench.llm.errors import (AuthenticationError, EndpointUnreachableError, LLMError, LLMStoppedError,
                               QuotaExhaustedError)
from kbench.llm.progress import AnswerProgress
from kbench.llm.results import ChatBatchResult, EmbeddingBatchResult, Failure
from kbench.llm.usable import UsableCount, check_usable, most_bad_allowed
from kbench.llm.usage import UsageMeter

RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
FATAL = (QuotaExhaustedError, EndpointUnreachableError, AuthenticationError)


def check_reachable(endpoints: list[Endpoint], policy: LLMPolicy | None = None) -> None:
    """Before any work: each endpoint (checked for its URL, model and key first) connects and takes its key.

    One ``GET <base_url>/models`` per distinct base URL and key variable (``LLMClient.check_endpoint``), so a
    run whose enrichment, query stages, LLM reranker, ragas judge or set builder points at a dead server or
    a wrong key stops in seconds with one line, not after chunking and embedding."""
    seen = set()
    for endpoint in endpoints:
        endpoint.check()
        if (endpoint.url, endpoint.api_key_env) in seen:
            continue
        seen.add((endpoint.url, endpoint.api_key_env))
        with LLMClient(endpoint, stage=endpoint.section, policy=policy) as client:
            client.check_endpoint()


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds; an HTTP date is rare from APIs and ignored)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def error_message(response: httpx.Response) -> tuple[str, str]:
    """(message, code) from an OpenAI-shaped error body, or the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200], ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))[:300], str(error.get("code") or error.get("type") or "")
    return str(body)[:200], ""


def is_quota_exhausted(status: int, message: str, code: str) -> bool:
    """OpenAI answers 429 ``insufficient_quota``; other providers 402 or a message about the quota."""
    if status == 402:
        return True
    return status == 429 and ("insufficient_quota" in code or "quota" in message.lower())


class LLMClient:
    def __init__(self, endpoint: Endpoint, *, stage: str, policy: LLMPolicy | None = None,
                 cache_root=None, cache_params: dict[str, Any] | None = None, meter: UsageMeter | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.endpoint = endpoint
        self.stage = stage
        self.policy = policy or LLMPolicy()
        self.meter = meter if meter is not None else UsageMeter()
        self.cache_root = cache_root
        self.cache_params = dict(cache_params or {})
        self._caches: dict[str, ResponseCache] = {}
        self._sleep = sleep
        self._random = random.Random()
        self._stop_reason: str | None = None
        self._lock = threading.Lock()
        self._endpoint_checked = False
        key = endpoint.api_key()  # ConfigError naming what is missing
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(self.policy.timeout_s, connect=self.policy.connect_timeout_s),
            limits=httpx.Limits(max_connections=self.policy.concurrency * 2),
        )

    def __repr__(self) -> str:  # the HTTP client holds the key: never show it
        return f"LLMClient(stage={self.stage!r}, model={self.endpoint.model!r}, base_url={self.endpoint.shown_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.flush()
        self.close()

    @property
    def stopped(self) -> str | None:
        """Why this client stopped sending (quota, unreachable, refused key), or None."""
        return self._stop_reason

    def flush(self) -> None:
        for cache in list(self._caches.values()):
            cache.flush()

    # ------------------------------------------------------------------ caching
    def _cache(self, kind: str, params: dict[str, Any]) -> ResponseCache | None:
        if self.cache_root is None:
            return None
        namespace = {"kind": kind, "base_url": self.endpoint.url, "model": self.endpoint.model, **self.cache_params,
                     **params}
        name = repr(sorted(namespace.items(), key=lambda kv: kv[0]))
        with self._lock:
            if name not in self._caches:
                self._caches[name] = ResponseCache(self.cache_root, namespace)
            return self._caches[name]

    # ------------------------------------------------------------------ the endpoint, before cached answers
    def check_endpoint(self) -> None:
        """Raise (and stop the client) when the endpoint does not connect or refuses the key; once per client.

        ``GET <base_url>/models`` with the key: any other answer (200, or 404/501 from a server without that
        route) shows the endpoint is there. Called before cached answers are replayed, and by commands that
        check the endpoint before any work (``kbench runs mlflow-judge``)."""
        if self._endpoint_checked:
            return
        if self._stop_reason is not None:
            raise LLMStoppedError(self._stop_reason)
        section, shown = self.endpoint.section, self.endpoint.shown_url
        try:
            response = self._http.get(f"{self.endpoint.url}/models",
                                      timeout=httpx.Timeout(self.policy.connect_timeout_s * 2,
                                                            connect=self.policy.connect_timeout_s))
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            raise self._stop(EndpointUnreachableError(
                f"{section}: cannot connect to {shown} ({type(e).__name__}: {e}); start the endpoint (for a local "
                f"one: `kbench serve`) or fix {self.endpoint.base_url_setting}")) from None
        except httpx.TransportError:  # connected, then slow or cut: the endpoint is there (a busy local server)
            response = None
        if response is not None and response.status_code in (401, 403):
            message, _ = error_message(response)
            raise self._stop(AuthenticationError(
                f"{section}: {shown} refused the key from ${self.endpoint.api_key_env} "
                f"(HTTP {response.status_code}: {message})"))
        self._endpoint_checked = True

    # ------------------------------------------------------------------ one request, with retries
    def _count(self, **counts: float) -> None:
        self.meter.add(self.stage, self.endpoint.model or "", **counts)

    def count_unusable(self, n: int = 1) -> None:
        """Record answers that arrived (or came from the cache) but that the stage could not use."""
        if n:
            self._count(unusable_answers=n)

    def _post(self, path: str, payload: dict, validate: Callable[[Any], Any]) -> tuple[Any, int]:
        """(validated answer, attempts). Raises a FATAL error (and stops the client) or LLMError."""
        url = f"{self.endpoint.shown_url}{path}"
        section = self.endpoint.section
        attempt = 0
        while True:
            if self._stop_reason is not None:
                raise LLMStoppedError(self._stop_reason)
            attempt += 1
            self._count(requests=1)
            try:
                try:
                    response = self._http.post(url, json=payload)
                except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                    raise self._stop(EndpointUnreachableError(
                        f"{section}: cannot connect to {self.endpoint.shown_url} ({type(e).__name__}: {e}); start the "
                        f"endpoint (for a local one: `kbench serve`) or fix {self.endpoint.base_url_setting}")) from None
                except httpx.TimeoutException:
                    raise _Retryable(f"no response within {self.policy.timeout_s:g} s") from None
                except httpx.TransportError as e:
                    raise _Retryable(f"transport error: {type(e).__name__}: {e}") from None
                status = response.status_code
                if status == 200:
                    self._endpoint_checked = True  # it answered: no need to check it before replaying the cache
                    try:
                        data = response.json()
                    except ValueError:
                        raise _Retryable("malformed response: HTTP 200 whose body is not JSON") from None
                    try:
                        return validate(data), attempt
                    except (KeyError, IndexError, TypeError, ValueError) as e:
                        raise _Retryable(f"malformed response: {type(e).__name__}: {e}") from None
                message, code = error_message(response)
                if is_quota_exhausted(status, message, code):
                    raise self._stop(QuotaExhaustedError(
                        f"{section}: {self.endpoint.shown_url} says the quota is exhausted (HTTP {status}: {message}); "
                        "the run stops here, answers received so far are cached and kept"))
                if status in (401, 403):
                    raise self._stop(AuthenticationError(
                        f"{section}: {self.endpoint.shown_url} refused the key from ${self.endpoint.api_key_env} "
                        f"(HTTP {status}: {message})"))
                if status in RETRY_STATUSES or status >= 500:
                    raise _Retryable(f"HTTP {status}: {message}", parse_retry_after(response.headers.get("Retry-After")))
                raise LLMError(f"{section}: HTTP {status} from {redact_url(url)}: {message}")
            except _Retryable as e:
                if attempt > self.policy.max_retries:
                    self._count(failures=1)
                    raise LLMError(f"{section}: {e} (gave up after {attempt} attempts)") from None
                self._count(retries=1)
                self._sleep(self._delay(attempt - 1, e.retry_after))
            except LLMError:
                self._count(failures=1)
                raise

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.policy.retry_after_max_s)
        cap = min(self.policy.backoff_max_s, self.policy.backoff_base_s * 2 ** retry)
        return self._random.uniform(0, cap)  # full jitter: clients that failed together do not retry together

    def _stop(self, error: LLMError) -> LLMError:
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = str(error)
        return error

    # ------------------------------------------------------------------ chat
    def _chat_payload(self, prompt: str, max_tokens: int, temperature: float | None,
                      system: str | None) -> dict:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        payload = {"model": self.endpoint.model, "messages": messages, "max_tokens": max_tokens}
        if temperature is not None:
            payload["temperature"] = temperature
        return payload

    def _send_chat(self, prompt: str, max_tokens: int, temperature: float | None, system: str | None) -> str:
        def validate(data):
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("choices[0].message.content is not a string")
            return content.strip(), data.get("usage") or {}

        (answer, usage), _ = self._post("/chat/completions",
                                        self._chat_payload(prompt, max_tokens, temperature, system), validate)
        self._count(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0))
        return answer

    def chat(self, prompt: str, *, max_tokens: int = 256, temperature: float | None = None,
             system: str | None = None) -> str:
        """One answer (from the cache when asked before). Raises LLMError (or a FATAL subclass)."""
        cache = self._cache("chat", {"max_tokens": max_tokens, "temperature": temperature, "system": system})
        if cache is not None and (hit := cache.get(prompt)) is not None:
            self.check_endpoint()
            self._count(cache_hits=1)
            return hit
        answer = self._send_chat(prompt, max_tokens, temperature, system)
        if cache is not None:
            cache.put(prompt, answer)
        return answer

    def chat_many(self, prompts: list[str], *, max_tokens: int = 256, temperature: float | None = None,
                  system: str | None = None, usable: Callable[[str, str], bool] | None = None,
                  progress: bool = True) -> ChatBatchResult:
        """Every prompt, ``policy.concurrency`` at a time; answers and failures apart, stopping at a quota.

        Each answer reaches the cache as it arrives. ``usable(prompt, answer)`` says whether the stage can use
        an answer: unusable ones are counted (``result.unusable``, the meter's ``unusable_answers``, the progress
        line), and once unusable plus failed answers exceed what ``policy.min_usable`` allows the batch stops
        (``result.stopped_unusable``; the rest are failures "not attempted"), unless ``policy.allow_partial``.
        The stage then calls ``require_usable``. ``progress``: counts, rate and time left on stderr."""
        result = ChatBatchResult()
        cache = self._cache("chat", {"max_tokens": max_tokens, "temperature": temperature, "system": system})
        shown = AnswerProgress(f"{self.endpoint.section} ({self.endpoint.model})", len(prompts), enabled=progress,
                               estimate_after=self.policy.concurrency)  # timed on the first answers in flight
        judge = usable or (lambda prompt, answer: True)
        bad_allowed = len(prompts) if self.policy.allow_partial or usable is None else \
            most_bad_allowed(len(prompts), self.policy.min_usable)
        lock = threading.Lock()
        bad = 0
        halt = threading.Event()

        def record(prompt: str, rows: list[int], answer: str | None, cached: bool) -> None:
            """Keep one prompt's answer (None: failed) for its rows; halt when the floor cannot be met."""
            nonlocal bad
            ok = answer is not None and judge(prompt, answer)
            with lock:
                if answer is not None:
                    result.answers.update(dict.fromkeys(rows, answer))
                    if not ok:
                        result.unusable.extend(rows)
                if not ok:
                    bad += len(rows)
                    if bad > bad_allowed:
                        halt.set()
            shown.add(usable=ok, failed=answer is None, cached=cached, n=len(rows))

        todo: dict[str, list[int]] = {}
        cached: list[tuple[int, str, str]] = []
        for i, prompt in enumerate(prompts):
            if cache is not None and (hit := cache.get(prompt)) is not None:
                cached.append((i, prompt, hit))
            else:
                todo.setdefault(prompt, []).append(i)
        result.cache_hits = len(cached)
        if cached:
            self.check_endpoint()
            self._count(cache_hits=len(cached))
        if todo:  # nothing to ask: no progress to show
            shown.start(f" ({len(cached)} from the cache), {self.policy.concurrency} at a time, at {self.endpoint.url}")
        for i, prompt, hit in cached:
            record(prompt, [i], hit, cached=True)

        def ask(prompt: str) -> None:
            rows = todo[prompt]
            if halt.is_set():
                with lock:
                    result.failed_items.extend(Failure(i, prompt, "not attempted: too few usable answers so far",
                                                       0) for i in rows)
                return
            try:
                answer = self._send_chat(prompt, max_tokens, temperature, system)
            except LLMStoppedError as e:
                failures = [Failure(i, prompt, f"not attempted: {e}", 0) for i in rows]
            except LLMError as e:
                failures = [Failure(i, prompt, str(e), 1) for i in rows]
            else:
                if cache is not None:
                    cache.put(prompt, answer)  # written now: a kill loses only the answers in flight
                record(prompt, rows, answer, cached=False)
                return
            with lock:
                result.failed_items.extend(failures)
            if failures[0].attempts:  # a request that failed counts against the floor; a stop does not
                record(prompt, rows, None, cached=False)

        try:
            with ThreadPoolExecutor(max_workers=self.policy.concurrency) as pool:
                list(pool.map(ask, list(todo)))
        finally:
            result.stopped = self._stop_reason
            result.stopped_unusable = halt.is_set() and not self.policy.allow_partial and usable is not None
            note = ""
            if result.stopped:
                note = "; stopped: the endpoint cannot answer"
            elif result.stopped_unusable:
                note = f"; stopped early: fewer than {self.policy.min_usable:.0%} can be usable"
            shown.close(note)
        if result.unusable:
            self.count_unusable(len(result.unusable))
        result.unusable.sort()
        result.failed_items.sort(key=lambda f: f.index)
        return result

    def require_usable(self, total: int, usable: int, failed: int = 0, *, fix: str,
                       batch: ChatBatchResult | None = None, asked: int | None = None) -> bool:
        """``check_usable`` for this client's stage and model (kbench.llm.usable: one rule for every stage).
        With ``batch`` (what ``chat_many`` returned), ``failed`` is its requests that failed, and when it stopped
        early the counts are of the answers it got before stopping; ``asked``: a stage that stopped early itself
        after that many of ``total``."""
        if batch is not None:
            failed = sum(1 for f in batch.failed_items if f.attempts)
            if batch.stopped_unusable:
                asked = len(batch.answers) + failed
        return check_usable(UsableCount(self.endpoint.section, self.endpoint.model or "", total, usable, failed,
                                        stage=self.stage, asked=asked), self.policy, fix=fix, meter=self.meter)

    # ------------------------------------------------------------------ embeddings
    def _send_embeddings(self, texts: list[str], dimensions: int | None) -> list[np.ndarray]:
        def validate(data):
            items = sorted(data["data"], key=lambda item: item.get("index", 0))
            if len(items) != len(texts):
                raise ValueError(f"{len(items)} embeddings for {len(texts)} inputs")
            vectors = [np.asarray(item["embedding"], dtype=np.float32) for item in items]
            width = {v.shape for v in vectors}
            if len(width) != 1 or vectors[0].ndim != 1 or vectors[0].size == 0:
                raise ValueError("embeddings of different or empty shapes")
            for v in vectors:
                if not np.isfinite(v).all() or not v.any():
                    raise ValueError("a zero or non-finite embedding")
            return vectors, data.get("usage") or {}

        payload: dict[str, Any] = {"model": self.endpoint.model, "input": texts, "encoding_format": "float"}
        if dimensions is not None:
            payload["dimensions"] = dimensions
        (vectors, usage), _ = self._post("/embeddings", payload, validate)
        self._count(prompt_tokens=int(usage.get("prompt_tokens") or 0))
        return vectors

    def embed(self, texts: list[str], *, dimensions: int | None = None,
              batch_size: int | None = None) -> EmbeddingBatchResult:
        """Vectors for ``texts`` in batches; successes and failures apart, never a zero vector."""
        batch_size = batch_size or self.policy.batch_size
        cache = self._cache("embeddings", {"dimensions": dimensions})
        found: dict[int, np.ndarray] = {}
        failures: list[Failure] = []
        todo: dict[str, list[int]] = {}
        hits = 0
        for i, text in enumerate(texts):
            if cache is not None and (hit := cache.get(text)) is not None:
                found[i] = np.asarray(hit, dtype=np.float32)
                hits += 1
            else:
                todo.setdefault(text, []).append(i)
        if hits:
            self.check_endpoint()
            self._count(cache_hits=hits)
        unique = list(todo)
        lock = threading.Lock()

        def run(batch: list[str]) -> None:
            try:
                vectors = self._send_embeddings(batch, dimensions)
            except LLMStoppedError as e:
                failed = [Failure(i, t, f"not attempted: {e}", 0) for t in batch for i in todo[t]]
            except FATAL as e:
                failed = [Failure(i, t, str(e), 1) for t in batch for i in todo[t]]
            except LLMError as e:
                if len(batch) > 1:  # isolate the text the endpoint refuses
                    half = len(batch) // 2
                    run(batch[:half])
                    run(batch[half:])
                    return
                failed = [Failure(i, t, str(e), 1) for t in batch for i in todo[t]]
            else:
                if cache is not None:
                    cache.put_many([(text, vector.tolist()) for text, vector in zip(batch, vectors)])
                with lock:
                    for text, vector in zip(batch, vectors):
                        for i in todo[text]:
                            found[i] = vector
                return
            with lock:
                failures.extend(failed)

        batches = [unique[s : s + batch_size] for s in range(0, len(unique), batch_size)]
        try:
            with ThreadPoolExecutor(max_workers=self.policy.concurrency) as pool:
                list(pool.map(run, batches))
        finally:
            if cache is not None:
                cache.flush()
        order = sorted(found)
        return EmbeddingBatchResult(
            embeddings=[found[i] for i in order], indices=order, texts_processed=[texts[i] for i in order],
            failed_items=sorted(failures, key=lambda f: f.index), stopped=self._stop_reason, cache_hits=hits)


def stop_error(stage: str, stopped: str, done: int, total: int) -> LLMStoppedError:
    """The error a stage raises after a batch stopped: what stopped it and what was kept."""
    return LLMStoppedError(f"{stage}: stopped after {done} of {total} answers ({stopped})")
