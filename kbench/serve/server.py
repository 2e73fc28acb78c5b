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
status, seconds, model and tokens) names no key and no prompt.
"""
from __future__ import annotations

import ipaddress
import json
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
from kbench.errors import ConfigError
from kbench.serve.chat_model import CHAT_MODEL, ChatModel, GenerationCancelled
from kbench.serve.faults import Fault, FaultQueue, parse_fault

FAULT_HEADER = "X-Kbench-Fault"
TEXT_FAULT = "<<fault:500>>"


class RequestError(Exception):
    def __init__(self, status: int, message: str, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.code = status, code


@dataclass
class ServeState:
    chat: ChatModel = field(default_factory=ChatModel)
    faults: FaultQueue = field(default_factory=FaultQueue)
    chat_enabled: bool = True
    requests: dict[str, int] = field(default_factory=dict)
    _encoders: dict[tuple[str, int | None], tuple[object, threading.Lock]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    chat_ready: threading.Event = field(default_factory=threading.Event)
    chat_error: str | None = None
    cancelled_generations: int = 0  # stopped because the client went away

    def count(self, path: str) -> None:
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1

    def encoder(self, model: str, dimensions: int | None):
        key = (model, dimensions)
        with self._lock:
            if key not in self._encoders:
                try:
                    config = EmbeddingConfig(model=model, dimension=dimensions)
                    self._encoders[key] = (load_encoder(config), threading.Lock())
                except (ConfigError, ValueError) as e:
                    raise RequestError(404 if "not installed" in str(e) or "unknown model" in str(e) else 400,
                                       str(e), "model_not_found") from None
            return self._encoders[key]

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
        model = body.get("model")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(model, str) or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise RequestError(400, "'model' (a string) and 'input' (a string or a list of strings) are required")
        if any(TEXT_FAULT in t for t in texts):
            raise RequestError(500, f"injected fault: an input contains {TEXT_FAULT}", "server_error")
        dimensions = body.get("dimensions")
        if dimensions is not None and (not isinstance(dimensions, int) or dimensions < 1):
            raise RequestError(400, "'dimensions' must be a positive integer")
        encoder, lock = self.encoder(model, dimensions)
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
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
            raise RequestError(400, "'messages' must be a non-empty list of {role, content}")
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 256
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise RequestError(400, "'max_tokens' must be a positive integer")
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


def make_handler(state: ServeState, log: Callable[[str], None] | None = None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
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
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                raise RequestError(400, "the request body is not JSON") from None
            if not isinstance(body, dict):
                raise RequestError(400, "the request body must be a JSON object")
            return body

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
                self._error(404, f"no route {self.path}", "not_found")

        def do_DELETE(self):  # noqa: N802
            if self.path.rstrip("/") == "/v1/kbench/faults":
                state.faults.clear()
                self._json(200, {"cleared": True})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self):  # noqa: N802
            path = self.path.rstrip("/")
            started, body, result, self.status = time.perf_counter(), {}, None, 0
            try:
                body = self._read_json()
                if path == "/v1/kbench/faults":
                    fault = Fault(str(body.get("kind")), int(body.get("times", 1)),
                                  float(body.get("retry_after_s", 1.0)), float(body.get("delay_s", 5.0)))
                    state.faults.add(fault)
                    self._json(200, {"queued": fault.kind, "times": fault.times})
                    return
                if path not in ("/v1/embeddings", "/v1/chat/completions"):
                    raise RequestError(404, f"no route {self.path}", "not_found")
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
    server: ThreadingHTTPServer
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
                 log: Callable[[str], None] | None = None) -> RunningServer:
    """Bind, start loading the chat model in the background, and (``background``) serve from a thread;
    ``log`` receives one line per request (``kbench serve`` prints them on stderr)."""
    check_host(host, allow_remote)
    state = ServeState(chat_enabled=chat)
    for spec in faults:
        state.faults.add(parse_fault(spec))
    server = ThreadingHTTPServer((host, port), make_handler(state, log))
    server.daemon_threads = True
    if chat:
        threading.Thread(target=state.load_chat, daemon=True).start()
    for model in preload:  # in the background: requests for it wait on its lock instead of timing out on a cold load
        threading.Thread(target=state.encoder, args=(model, None), daemon=True).start()
    running = RunningServer(server, state)
    if background:
        running.thread = threading.Thread(target=server.serve_forever, daemon=True)
        running.thread.start()
    return running
