"""A scriptable OpenAI-compatible HTTP server on 127.0.0.1 for gateway tests and benches.

Serves ``POST /v1/chat/completions`` and ``POST /v1/embeddings``. By default it answers
every chat request with valid JSON for the prompt kind named in the request ("Task: kind";
a chat reply's prompt, which names no task, by its "Memory context:" section) and every
embedding request with deterministic unit vectors. A request with ``"stream": true`` is
answered with server-sent events (``data:`` lines, then ``data: [DONE]``), in chunked
transfer encoding, so a stream cut off mid-way is one a client can tell. Tests queue one-shot
:class:`Action` s per endpoint to inject latency, HTTP errors (429 with ``Retry-After``,
500), connection resets, requests never answered, or arbitrary (malformed, fenced)
content, or set a default action for every request (a provider that is down). Like a real
provider it can demand an API key (401 naming the presented key, masked, as OpenAI does)
and know only some models (404 ``model_not_found`` for the others). It counts requests and
embedding batch sizes. It binds an ephemeral port and stops in :meth:`FakeOpenAIServer.stop`.
:func:`refused_url` is a base URL where nothing listens.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["Action", "FakeOpenAIServer", "default_answer", "refused_url"]


@dataclass(frozen=True)
class Action:
    """What the server does for one request.

    ``delay`` seconds of latency first; then either ``hang`` (keep the connection open and
    never answer, until the server stops), ``reset`` (close the socket without answering),
    an error ``status`` (with ``retry_after`` seconds as a header, if set, and ``message``
    as its text), or a 200 whose message content is ``content`` (None: the default valid
    answer).
    """

    delay: float = 0.0
    status: int = 200
    retry_after: float | None = None
    content: str | None = None
    reset: bool = False
    hang: bool = False
    #: The error answer's ``error.message`` (None: a text tests check never leaks).
    message: str | None = None
    #: A streamed answer's pieces, in order (None: ``content`` or the default answer, cut
    #: into pieces of a few characters).
    pieces: tuple[str, ...] | None = None
    #: For a streamed answer: drop the connection (no end marker, no last chunk) after
    #: this many pieces, as a server that dies mid-stream.
    cut_after: int | None = None
    #: Seconds between streamed pieces.
    piece_delay: float = 0.0
    #: A weak model echoing its prompt back: ``"text"`` answers the request's messages
    #: (system, then user) as they came, ``"json"`` the same inside ``{"reply": ...}``.
    echo: str | None = None
    #: Answer a streamed request with a whole (not streamed) completion, as a server that
    #: does not stream does.
    no_stream: bool = False
    #: For a streamed answer: before piece number ``gate_after`` wait (up to 10 s) until the
    #: test sets ``state.gate``; ``state.gate_timed_out`` says whether it had to give up.
    gate_after: int | None = None


_INPUT_RE = re.compile(r"Input \(JSON\):\n(.*?)\n\nAnswer with ONE JSON object", re.DOTALL)


_CHAT_RE = re.compile(r"Memory context:\n(.*?)\n\nUser's message:\n(.*?)\n\nYour reply", re.DOTALL)


def _payload_of(user_message: str) -> dict[str, Any]:
    """The request payload the gateway's prompt carries (``{}`` if none is found)."""
    chat = _CHAT_RE.search(user_message)
    if chat:
        return {"context": chat.group(1), "query": chat.group(2)}
    m = _INPUT_RE.search(user_message)
    try:
        return json.loads(m.group(1)) if m else {}
    except ValueError:
        return {}


def default_answer(kind: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """A valid answer of each prompt kind, recognisable as the provider's.

    A ``page_meta_batch`` answer has one entry per page of ``payload``, each naming the
    page's own query (``"provider chain: <query>"``).
    """
    if kind == "page_meta_batch":
        pages = (payload or {}).get("pages") or []
        return {
            "pages": [
                {
                    "continues": i > 0,
                    "meta_chain": f"provider chain: {p.get('query', '')}",
                    "keywords": ["provider"],
                }
                for i, p in enumerate(pages)
            ]
        }
    return {
        "page_meta": {"continues": False, "meta_chain": "provider chain", "keywords": ["provider"]},
        "segment_summary": {"summary": "provider summary", "keywords": ["provider"]},
        "persona_update": {
            "traits": [{"name": "music", "level": "high", "evidence": "provider"}],
            "facts": ["provider fact"],
            "agent_traits": ["provider agent trait"],
        },
        "chat_reply": {"reply": "provider reply"},
        "segment_persona": {
            "summary": "provider summary",
            "keywords": ["provider"],
            "traits": [{"name": "music", "level": "high", "evidence": "provider"}],
            "facts": ["provider fact"],
            "agent_traits": ["provider agent trait"],
        },
    }.get(kind, {})


def _vector(text: str, dim: int) -> list[float]:
    raw = hashlib.blake2b(text.encode("utf-8"), digest_size=dim).digest()
    vec = [b - 127.5 for b in raw]
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    return [v / norm for v in vec]


@dataclass
class _State:
    chat: deque[Action] = field(default_factory=deque)
    #: Actions for streamed chat requests only (taken before ``chat``'s).
    streams: deque[Action] = field(default_factory=deque)
    embed: deque[Action] = field(default_factory=deque)
    chat_requests: int = 0
    embed_requests: int = 0
    #: Requests answered 401 (wrong key) or 404 (unknown model).
    refused: int = 0
    embed_batch_sizes: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    #: Every chat request body, in arrival order (prompts, response_format, ...).
    bodies: list[dict[str, Any]] = field(default_factory=list)
    #: ``responder(kind, payload)`` -> an answer dict, or None for the default answer; for
    #: ``chat_reply`` it may return a string, the reply in plain text.
    responder: Callable[[str, dict[str, Any]], dict[str, Any] | str | None] | None = None
    #: When True, a chat request asking for ``response_format`` gets a 400 naming it.
    reject_json_mode: bool = False
    #: Set by a test to let a gated stream go on (``Action.gate_after``).
    gate: threading.Event = field(default_factory=threading.Event)
    gate_timed_out: bool | None = None
    #: When set, a request without ``Authorization: Bearer <api_key>`` gets a 401.
    api_key: str | None = None
    #: When set, a chat request for another model gets a 404 ``model_not_found``.
    models: frozenset[str] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        st = self.server.state
        if self._refused(body):
            return
        if self.path.rstrip("/").endswith("/chat/completions"):
            with st.lock:
                st.chat_requests += 1
                st.bodies.append(body)
                if st.reject_json_mode and "response_format" in body:
                    action = Action(status=400)
                    self._send(
                        400,
                        {
                            "error": {
                                "message": "response_format is not supported",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                    return
                if body.get("stream") and st.streams:
                    action = st.streams.popleft()
                else:
                    action = st.chat.popleft() if st.chat else self.server.default_action
            streamed = body.get("stream") and not action.no_stream
            if streamed and action.status == 200 and not (action.reset or action.hang):
                if action.delay:
                    time.sleep(action.delay)
                self._stream(body, action)
                return
            self._act(action, lambda: self._chat_body(body, action))
        elif self.path.rstrip("/").endswith("/embeddings"):
            inputs = body.get("input") or []
            if isinstance(inputs, str):
                inputs = [inputs]
            with st.lock:
                st.embed_requests += 1
                st.embed_batch_sizes.append(len(inputs))
                action = st.embed.popleft() if st.embed else self.server.default_action
            self._act(action, lambda: self._embed_body(inputs))
        else:
            self._send(404, {"error": {"message": "not found"}})

    def _refused(self, body: dict[str, Any]) -> bool:
        """Answer 401 for a wrong key or 404 for an unknown model, as OpenAI words them."""
        st = self.server.state
        with st.lock:
            api_key, models = st.api_key, st.models
        if api_key is not None:
            auth = self.headers.get("Authorization") or ""
            presented = auth.removeprefix("Bearer ").strip()
            if presented != api_key:
                with st.lock:
                    st.refused += 1
                shown = (presented[:5] + "*" * 12 + presented[-4:]) if presented else "''"
                self._send(
                    401,
                    {
                        "error": {
                            "message": f"Incorrect API key provided: {shown}. You can find your API "
                            "key at https://platform.openai.com/account/api-keys.",
                            "type": "invalid_request_error",
                            "code": "invalid_api_key",
                        }
                    },
                )
                return True
        if models is not None and self.path.rstrip("/").endswith("/chat/completions"):
            model = str(body.get("model", ""))
            if model not in models:
                with st.lock:
                    st.refused += 1
                self._send(
                    404,
                    {
                        "error": {
                            "message": f"The model `{model}` does not exist or you do not have "
                            "access to it.",
                            "type": "invalid_request_error",
                            "code": "model_not_found",
                        }
                    },
                )
                return True
        return False

    def _act(self, action: Action, ok_body: Any) -> None:
        if action.delay:
            time.sleep(action.delay)  # a slow provider: the latency is what is simulated
        if action.hang:
            # Accepted and read, never answered: the client can only time out. Released
            # (the socket closed unanswered) when the server stops, so its thread ends.
            self.server.stopping.wait()
            self.close_connection = True
            return
        if action.reset:
            # Drop the connection with no answer: the client sees a connection error.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if action.status != 200:
            headers = {}
            if action.retry_after is not None:
                headers["Retry-After"] = f"{action.retry_after:g}"
            self._send(
                action.status,
                {
                    "error": {
                        "message": action.message or f"SECRET-ERROR-TEXT status {action.status}",
                        "type": "server_error",
                        "code": action.status,
                    }
                },
                headers,
            )
            return
        self._send(200, ok_body())

    def _content(self, body: dict[str, Any], action: Action) -> str:
        """The answer's text: the action's, the responder's or the default."""
        messages = body.get("messages") or []
        user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        m = re.search(r"Task: (\w+)", user or "")
        kind = m.group(1) if m else ("chat_reply" if "Memory context:" in (user or "") else "")
        with self.server.state.lock:
            self.server.state.kinds.append(kind)
            responder = self.server.state.responder
        content = action.content
        if action.echo is not None:
            echoed = "\n\n".join(str(m.get("content", "")) for m in messages)
            content = echoed if action.echo == "text" else json.dumps({"reply": echoed})
        if content is None:
            payload = _payload_of(user or "")
            answer = responder(kind, payload) if responder is not None else None
            if answer is None:
                answer = default_answer(kind, payload)
            content = answer if isinstance(answer, str) else json.dumps(answer)
        return content

    def _stream(self, body: dict[str, Any], action: Action) -> None:
        """Answer as server-sent events, one ``data:`` event per piece, in chunked encoding
        (or cut off after ``action.cut_after`` pieces: no last chunk, connection dropped)."""
        if action.pieces is not None:
            with self.server.state.lock:
                self.server.state.kinds.append("chat_reply")
            pieces = list(action.pieces)
        else:
            content = self._content(body, action)
            pieces = [content[i : i + 7] for i in range(0, len(content), 7)]
        self.protocol_version = "HTTP/1.1"  # chunked transfer encoding is HTTP/1.1
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

        def event(data: str) -> None:
            raw = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            self.wfile.flush()

        model = body.get("model", "fake-model")
        try:
            for n, piece in enumerate(pieces):
                if action.cut_after is not None and n >= action.cut_after:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action.gate_after is not None and n == action.gate_after:
                    self.server.state.gate_timed_out = not self.server.state.gate.wait(10.0)
                if action.piece_delay:
                    time.sleep(action.piece_delay)
                delta = {"role": "assistant", "content": piece} if n == 0 else {"content": piece}
                chunk = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                event(json.dumps(chunk))
            if action.cut_after is not None:
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            last = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            event(json.dumps(last))
            event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass  # the client went away (it abandoned the stream)

    def _chat_body(self, body: dict[str, Any], action: Action) -> dict[str, Any]:
        content = self._content(body, action)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }

    def _embed_body(self, inputs: list[str]) -> dict[str, Any]:
        dim = self.server.embed_dim
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": _vector(t, dim)}
                for i, t in enumerate(inputs)
            ],
            "model": "fake-embed",
            "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
        }

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    # Non-daemon handler threads are tracked, so server_close() joins them: nothing leaks.
    daemon_threads = False
    block_on_close = True
    # Benches open 100+ connections at once; the default listen backlog (5) would reset them.
    request_queue_size = 512
    state: _State
    embed_dim: int
    default_action: Action
    stopping: threading.Event


class FakeOpenAIServer:
    """The scriptable server; use as a context manager or call start()/stop()."""

    def __init__(
        self,
        embed_dim: int = 16,
        latency: float = 0.0,
        *,
        api_key: str | None = None,
        models: set[str] | None = None,
        default: Action | None = None,
    ) -> None:
        """``embed_dim``: length of served vectors; ``latency``: seconds added to every
        request that has no scripted action (simulates a remote provider); ``api_key``: the
        one key accepted (None: any); ``models``: the only chat models served (None: any);
        ``default``: what every request without a scripted action gets (overrides
        ``latency``; e.g. ``Action(status=500)`` for a provider that is down)."""
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.state = _State(
            api_key=api_key, models=frozenset(models) if models is not None else None
        )
        self._httpd.embed_dim = embed_dim
        self._httpd.default_action = default if default is not None else Action(delay=latency)
        self._httpd.stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-openai-server",
            daemon=True,
        )

    @property
    def state(self) -> _State:
        """Counters and queued actions."""
        return self._httpd.state

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> int:
        """Chat completion requests received so far."""
        with self.state.lock:
            return self.state.chat_requests

    @property
    def embed_requests(self) -> int:
        """Embedding requests received so far."""
        with self.state.lock:
            return self.state.embed_requests

    def script_chat(self, *actions: Action) -> None:
        """Queue one-shot actions for the next chat requests (then defaults resume)."""
        with self.state.lock:
            self.state.chat.extend(actions)

    def script_stream(self, *actions: Action) -> None:
        """Queue one-shot actions for the next streamed chat requests only (background
        requests, never streamed, leave them alone)."""
        with self.state.lock:
            self.state.streams.extend(actions)

    def script_embed(self, *actions: Action) -> None:
        """Queue one-shot actions for the next embedding requests."""
        with self.state.lock:
            self.state.embed.extend(actions)

    def start(self) -> FakeOpenAIServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def set_default(self, action: Action) -> None:
        """What every later request without a scripted action gets."""
        with self.state.lock:
            self._httpd.default_action = action

    def stop(self) -> None:
        """Stop serving (releasing requests left hanging) and join every server thread."""
        self._httpd.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5.0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def refused_url() -> str:
    """``http://127.0.0.1:PORT/v1`` where nothing listens: a connection is refused.

    The port was free a moment ago (bound, then closed); nothing in the tests listens on
    ephemeral ports they did not ask for.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    finally:
        sock.close()
    return f"http://127.0.0.1:{port}/v1"
