"""``kbench serve``: a local OpenAI-compatible endpoint, so every LLM/API stage runs with no key and no network.

- ``GET /v1/models``: the catalogue's installed embedding models and the chat model.
- ``POST /v1/embeddings``: any model of kbench's offline catalogue (``kbench models list``) or a local
  folder, through the same encoder an in-process run uses (kbench.embedding), so a run through the server
  and a run in-process get the same vectors; ``dimensions`` truncates (Matryoshka), as in-process.
  Vectors are returned as the encoder gives them; the client's embedding stage normalizes, as in-process.
- ``POST /v1/chat/completions``: SmolLM2-135M-Instruct (kbench.serve.chat_model), loaded in the background
  from start; chat requests wait for it. Any ``model`` name is answered by it (the name is echoed back).
- Fault injection (kbench.serve.faults): per request (header ``X-Kbench-Fault``) or per server.

It binds to 127.0.0.1 by default and refuses any other address unless ``allow_remote`` is set; it checks
no key (any bearer token is accepted) and logs no header: the request log (``log``, one line per POST: route,
status, seconds, model and tokens) names no key and no prompt. A request is checked before it waits on anything:
a body above ``MAX_BODY_BYTES`` (413) or that does not arrive within ``read_timeout_s`` (408) is never read
whole, and an embedding model is a catalogue name or a folder's name under the models directory, never a path.
"""
from __future__ import annotations

import ipaddress
import json
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import CATALOGUE
from kbench.embedding.stage import load_encoder
from kbench.errors import ConfigError, shorten
from kbench.paths import models_dir
from kbench.ports import bind_fix, port_problem
from kbench.serve.chat_model import CHAT_MODEL, ChatModel, GenerationCancelled
from kbench.serve.faults import Fault, FaultQueue, parse_fault

FAULT_HEADER = "X-Kbench-Fault"
TEXT_FAULT = "<<fault:500>>"
MAX_BODY_BYTES = 16 * 2**20  # far above a batch of 64 chunks; a bigger body is refused before it is read
MAX_INPUTS = 2048  # texts per embeddings request (OpenAI's own limit)
READ_TIMEOUT_S = 30.0  # a client that stops sending (a Content-Length that lies) frees its thread after this
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a folder's name under the models directory, not a path


class RequestError(Exception):
    def __init__(self, status: int, message: str, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.code = status, code


def served_model(model: str) -> str:
    """What an embeddings request may load: a catalogue name, or the path of a folder named ``model`` under the
    models directory (what kbench prepares and trains). Any other name or path is refused unread."""
    if model in CATALOGUE:
        return model
    folder = models_dir() / model
    if MODEL_NAME.fullmatch(model) and folder.is_dir():
        return str(folder)
    raise RequestError(404, f"model {shorten(model, 60)} is not served: give a name from the catalogue "
                            f"({', '.join(CATALOGUE)}) or of a model folder under the models directory "
                            "(kbench models list); paths are not accepted", "model_not_found")


def check_embeddings(body: dict) -> tuple[str, list[str], int | None]:
    """The embeddings request's model (as ``served_model`` gives it), texts and dimensions, or a RequestError."""
    model = body.get("model")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(model, str) or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise RequestError(400, "'model' (a string) and 'input' (a string or a list of strings) are required")
    if len(texts) > MAX_INPUTS:
        raise RequestError(400, f"'input' holds {len(texts)} texts; at most {MAX_INPUTS} a request (send smaller "
                                "batches: embedding.batch_size)")
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1):
        raise RequestError(400, "'dimensions' must be a positive integer")
    spec = CATALOGUE.get(model)
    if spec is not None and dimensions is not None and dimensions > spec.dimension:
        raise RequestError(400, f"'dimensions' {dimensions} is larger than {model}'s {spec.dimension}")
    return served_model(model), texts, dimensions


def check_chat(body: dict) -> tuple[list[dict], int]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise RequestError(400, "'messages' must be a non-empty list of {role, content}")
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 256
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestError(400, "'max_tokens' must be a positive integer")
    return messages, max_tokens


def fault_from_body(body: dict) -> Fault:
    """``POST /v1/kbench/faults``: the fault it queues, every field checked (Fault refuses times 0)."""
    return Fault(str(body.get("kind")), body.get("times", 1), body.get("retry_after_s", 1.0),
                 body.get("delay_s", 5.0))


@dataclass
class ServeState:
    chat: ChatModel = field(default_factory=ChatModel)
    faults: FaultQueue = field(default_factory=FaultQueue)
    chat_enabled: bool = True
    requests: dict[str, int] = field(default_factory=dict)
    _encoders: dict[tuple[str, int | None], list] = field(default_factory=dict)  # key -> [encoder | None, lock]
    _lock: threading.Lock = field(default_factory=threading.Lock)  # held for bookkeeping only, never for a load
    chat_ready: threading.Event = field(default_factory=threading.Event)
    chat_error: str | None = None
    cancelled_generations: int = 0  # stopped because the client went away

    def count(self, path: str) -> None:
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1

    def encoder(self, model: str, dimensions: int | None):
        """(encoder, its lock): loaded once; only requests for this model wait while it loads."""
        key = (model, dimensions)
        with self._lock:
            slot = self._encoders.setdefault(key, [None, threading.Lock()])
        with slot[1]:
            if slot[0] is None:
                try:
                    spec = CATALOGUE.get(model)  # the reference backend: a server neither tunes nor exports
                    local = spec is not None and spec.provider == "sentence_transformers"
                    backend = spec.backends[0] if local else "torch"
                    slot[0] = load_encoder(EmbeddingConfig(model=model, dimension=dimensions, backend=backend))
                except (ConfigError, ValueError) as e:
                    raise RequestError(404 if "not installed" in str(e) or "unknown model" in str(e) else 400,
                                       str(e)[:300], "model_not_found") from None
        return slot[0], slot[1]

    def preload(self, model: str) -> None:
        """Load ``model`` ahead of its first request; a failure is answered to each request that asks for it."""
        try:
            self.encoder(model, None)
        except RequestError:
            pass

    def load_chat(self) -> None:
        try:
            self.chat.load()
        except Exception as e:  # reported on each chat request
            self.chat_error = f"{type(e).__name__}: {e}"
        finally:
            self.chat_ready.set()

    # ------------------------------------------------------------------ the API
    def models(self) -> dict:
        data = [{"id": name, "object": "model", "owned_by": "kbench"} for name, spec in CATALOGUE.items()
                if spec.locate() is not None]
        if self.chat_enabled:
            data.append({"id": CHAT_MODEL, "object": "model", "owned_by": "kbench"})
        return {"object": "list", "data": data}

    def embeddings(self, body: dict) -> dict:
        served, texts, dimensions = check_embeddings(body)
        model = body["model"]
        if any(TEXT_FAULT in t for t in texts):
            raise RequestError(500, f"injected fault: an input contains {TEXT_FAULT}", "server_error")
        encoder, lock = self.encoder(served, dimensions)
        with lock:
            vectors = encoder.encode(texts) if texts else []
            tokenizer = getattr(encoder, "tokenizer", None)
            tokens = sum(len(tokenizer(t)["input_ids"]) for t in texts) if tokenizer is not None else 0
        data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vectors)]
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def chat_completion(self, body: dict, client_gone: Callable[[], bool] = lambda: False) -> dict:
        if not self.chat_enabled:
            raise RequestError(404, "this server was started with --no-chat", "model_not_found")
        messages, max_tokens = check_chat(body)
        self.chat_ready.wait()
        if self.chat_error:
            raise RequestError(503, f"the chat model could not be loaded: {self.chat_error}", "server_error")
        temperature = body.get("temperature")
        try:
            out = self.chat.generate([{"role": m.get("role", "user"), "content": m["content"]} for m in messages],
                                     max_tokens, temperature if isinstance(temperature, (int, float)) else None,
                                     cancelled=client_gone)
        except GenerationCancelled:
            with self._lock:
                self.cancelled_generations += 1
            raise
        return {
            "id": f"chatcmpl-kbench-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or CHAT_MODEL,
            "choices": [{"index": 0, "finish_reason": out.finish_reason,
                         "message": {"role": "assistant", "content": out.text}}],
            "usage": {"prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                      "total_tokens": out.prompt_tokens + out.completion_tokens},
        }


def make_handler(state: ServeState, read_timeout_s: float = READ_TIMEOUT_S,
                 log: Callable[[str], None] | None = None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = read_timeout_s  # on the socket: a read that waits longer fails (socketserver's setup sets it)
        status = 0  # of the last answer sent (for the request log)

        def log_message(self, *args):  # http.server's own log: headers carry keys; ours is request_line
            pass

        def request_line(self, path: str, started: float, body: dict, result: dict | None) -> str:
            """``POST /v1/chat/completions 200 in 5.1s (model x, 312 prompt + 19 completion tokens)``."""
            usage = (result or {}).get("usage") or {}
            model = body.get("model") if isinstance(body.get("model"), str) else "?"
            detail = f"model {model[:80]}"
            if usage:
                detail += (f", {usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} "
                           "completion tokens" if "completion_tokens" in usage else
                           f", {usage.get('prompt_tokens', 0)} tokens")
            return (f"kbench serve: POST {path} {self.status or '-'} in {time.perf_counter() - started:.1f}s "
                    f"({detail})")

        def _send(self, status: int, payload: bytes, content_type: str = "application/json",
                  headers: dict | None = None) -> None:
            self.status = status
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            if self.close_connection:  # a body left unread: the connection cannot carry another request
                self.send_header("Connection", "close")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, status: int, data: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(data).encode(), headers=headers)

        def _error(self, status: int, message: str, code: str, headers: dict | None = None) -> None:
            self._json(status, {"error": {"message": message, "type": code, "code": code}}, headers)

        def _client_gone(self) -> bool:
            """The client closed its side (its timeout gave up): the socket reads as ended."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _read_json(self) -> dict:
            """The JSON body, read only when its declared length is within MAX_BODY_BYTES and it arrives in time."""
            length = self._content_length()
            try:
                raw = self.rfile.read(length)
            except (TimeoutError, socket.timeout):
                self.close_connection = True
                raise RequestError(408, f"the body did not arrive within {read_timeout_s:g} s (Content-Length "
                                        f"says {length} bytes); send the whole body", "request_timeout") from None
            if len(raw) < length:
                self.close_connection = True
                raise RequestError(400, f"the body ended after {len(raw)} of the {length} bytes its "
                                        "Content-Length says")
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                raise RequestError(400, "the request body is not JSON") from None
            if not isinstance(body, dict):
                raise RequestError(400, "the request body must be a JSON object")
            return body

        def _content_length(self) -> int:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                raise RequestError(411, "send the body with a Content-Length (a chunked body is not read)",
                                   "length_required")
            declared = (self.headers.get("Content-Length") or "0").strip()
            if not declared.isdigit() or not declared.isascii():
                self.close_connection = True
                raise RequestError(400, f"Content-Length {shorten(declared, 30)} is not a whole number of bytes")
            if int(declared) > MAX_BODY_BYTES:
                self.close_connection = True
                raise RequestError(413, f"the body is {int(declared):,} bytes; at most {MAX_BODY_BYTES:,} are read. "
                                        "Send fewer texts per request (embedding.batch_size)", "request_too_large")
            return int(declared)

        def _fault(self) -> Fault | None:
            header = self.headers.get(FAULT_HEADER)
            if header:
                return parse_fault(header)
            return state.faults.next()

        def _apply(self, fault: Fault) -> bool:
            """Send the fault's answer; True when the request is answered (else: go on, after a delay)."""
            state.faults.record(fault)
            if fault.kind == "pass":
                return False
            if fault.kind == "429":
                self._error(429, "Rate limit reached (injected)", "rate_limit_exceeded",
                            {"Retry-After": f"{fault.retry_after_s:g}"})
            elif fault.kind == "500":
                self._error(500, "Internal server error (injected)", "server_error")
            elif fault.kind == "quota":
                self._error(429, "You exceeded your current quota, please check your plan and billing details "
                                 "(injected)", "insufficient_quota")
            elif fault.kind == "malformed":
                self._send(200, b'{"object": "list", "data": [')
            else:  # slow
                time.sleep(fault.delay_s)
                return False
            return True

        def do_GET(self):  # noqa: N802
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, state.models())
            elif self.path.rstrip("/") == "/health":
                self._json(200, {"status": "ok", "chat_ready": state.chat_ready.is_set(),
                                 "chat_busy": state.chat.busy, "cancelled_generations": state.cancelled_generations})
            else:
                self._error(404, f"no route {shorten(self.path, 80)}", "not_found")

        def do_DELETE(self):  # noqa: N802
            if self.path.rstrip("/") == "/v1/kbench/faults":
                state.faults.clear()
                self._json(200, {"cleared": True})
            else:
                self._error(404, f"no route {shorten(self.path, 80)}", "not_found")

        def do_POST(self):  # noqa: N802
            path = self.path.rstrip("/")
            started, body, result, self.status = time.perf_counter(), {}, None, 0
            try:
                body = self._read_json()
                if path == "/v1/kbench/faults":
                    fault = fault_from_body(body)
                    state.faults.add(fault)
                    self._json(200, {"queued": fault.kind, "times": fault.times})
                    return
                if path == "/v1/embeddings":  # checked before any lock or load: a bad request never waits
                    check_embeddings(body)
                elif path == "/v1/chat/completions":
                    check_chat(body)
                else:
                    raise RequestError(404, f"no route {shorten(self.path, 80)}", "not_found")
                state.count(path)
                fault = self._fault()
                if fault is not None and self._apply(fault):
                    return
                result = state.embeddings(body) if path == "/v1/embeddings" else \
                    state.chat_completion(body, self._client_gone)
                self._json(200, result)
            except RequestError as e:
                self._error(e.status, str(e), e.code)
            except ValueError as e:  # a bad fault header or body
                self._error(400, str(e), "invalid_request_error")
            except (BrokenPipeError, ConnectionResetError, GenerationCancelled):
                pass  # the client gave up (its timeout): nothing to answer, nothing more to generate
            finally:
                if log is not None and path != "/v1/kbench/faults":
                    log(self.request_line(path, started, body if isinstance(body, dict) else {}, result))

    return Handler


class Server(ThreadingHTTPServer):
    """One thread per request, and a listen backlog that holds a burst: Python's default of 5 reset 2 of 20
    concurrent requests (a sweep's workers, a judge's concurrency) before the accept loop took them."""

    request_queue_size = 128  # the kernel caps it at net.core.somaxconn
    daemon_threads = True


def check_host(host: str, allow_remote: bool) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise ConfigError(f"--host {host}: kbench serve listens on loopback only (127.0.0.1, ::1, localhost); it "
                          "checks no key, so exposing it needs --allow-remote")


@dataclass
class RunningServer:
    server: Server
    state: ServeState
    thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_server(host: str = "127.0.0.1", port: int = 0, *, chat: bool = True, faults: list[str] = (),
                 allow_remote: bool = False, background: bool = True,
                 preload: tuple[str, ...] = ("all-MiniLM-L6-v2",),
                 read_timeout_s: float = READ_TIMEOUT_S, log: Callable[[str], None] | None = None) -> RunningServer:
    """Bind, start loading the chat model in the background, and (``background``) serve from a thread;
    ``log`` receives one line per request (``kbench serve`` prints them on stderr)."""
    check_host(host, allow_remote)
    if port_problem(port):
        raise ConfigError(port_problem(port))
    state = ServeState(chat_enabled=chat)
    for spec in faults:
        try:
            state.faults.add(parse_fault(spec))
        except ValueError as e:
            raise ConfigError(f"--fault {shorten(spec, 60)}: {e} (e.g. 429x2;retry_after_s=1, quotax-1)") from None
    try:
        server = Server((host, port), make_handler(state, read_timeout_s, log))
    except OSError as e:
        if bind_fix(e, "another kbench serve") is None:
            raise
        raise ConfigError(f"--host {host} --port {port}: {bind_fix(e, 'another kbench serve')}") from None
    if chat:
        threading.Thread(target=state.load_chat, daemon=True).start()
    for model in preload:  # in the background: requests for it wait on its lock instead of timing out on a cold load
        threading.Thread(target=state.preload, args=(model,), daemon=True).start()
    running = RunningServer(server, state)
    if background:
        running.thread = threading.Thread(target=server.serve_forever, daemon=True)
        running.thread.start()
    return running
