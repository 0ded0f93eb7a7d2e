"""The litellm backend: any provider litellm supports, by model name, base URL and key variable.

litellm is imported lazily, on the first call, never at ``import memoryos_actors``. Before
importing it we set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the user already chose)
so litellm reads its bundled price map instead of fetching one over the network.

Two client paths, both async (the gateway's event loop awaits them): for a model litellm
addresses as ``openai/<name>`` at an explicit base URL (any OpenAI-compatible server) the
request is one plain HTTP POST through aiohttp, which costs about a tenth of the client CPU
of ``litellm.acompletion`` per call (``bench/client_cpu.py``); every other provider goes
through ``litellm.acompletion``. ``llm_client`` forces one path.

JSON mode (``response_format: {"type": "json_object"}``) is requested for the prompt kinds
answered in JSON (the background calls: chain meta, summaries, persona updates), where the
provider supports it: litellm says so for its path; on the HTTP path it is tried, and dropped
for good if the server rejects it (HTTP 400 or 422 naming ``response_format``). The
parse-repair-validate path stays the fallback for every answer. A chat reply is asked for
and taken in plain text, never in JSON mode, so any provider's model can write it.

:meth:`LiteLLMBackend.astream` streams a plain-text answer as the provider writes it: with
``stream=True`` through litellm, or as server-sent events (``data:`` lines, ending with
``data: [DONE]``) on the HTTP path. A stream that stops before its end (the connection
dropped, no end marker) raises, so a cut-off reply is never taken for a whole one. A server
that ignores ``stream`` and answers with the whole completion gives it as one piece.

This module does one provider attempt per call; retries, the breaker and limits live in
:mod:`memoryos_actors.gateway.service`. Every provider failure becomes a
:class:`ProviderCallError` (:func:`~memoryos_actors.gateway.failures.classify_error`) whose
message names the failure class and status, never the provider's body, so error text
cannot leak into results or logs; a configuration error (rejected key, unknown model,
unreachable base URL) carries the provider's reason apart, with keys masked.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from types import ModuleType
from typing import Any

from memoryos_actors.errors import ConfigError, ProviderConfigError
from memoryos_actors.gateway.base import BackendResult, ProviderCallError
from memoryos_actors.gateway.failures import HTTPStatusError, classify_error, config_error
from memoryos_actors.gateway.prompts import (
    PROMPTS,
    MalformedOutput,
    parse_answer,
    render_messages,
)
from memoryos_actors.prerequisites import install_hint

__all__ = ["LiteLLMBackend", "classify_error", "estimate_tokens", "import_litellm"]

_import_lock = threading.Lock()
_litellm: ModuleType | None = None


def import_litellm() -> ModuleType:
    """Import litellm once (thread-safe), pinning it to its local price map."""
    global _litellm
    if _litellm is None:
        with _import_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                try:
                    import litellm
                except ImportError as exc:
                    raise ConfigError(
                        f"llm_backend='litellm' needs the 'llm' extra: {install_hint('llm')}"
                    ) from exc
                litellm.suppress_debug_info = True
                litellm.telemetry = False
                _litellm = litellm
    return _litellm


def _need_client(use_http: bool) -> None:
    """Refuse, as a configuration error, a client path whose package is not installed:
    without it every call would fail, and the failures would read as a provider outage
    (offline replies marked degraded, a provider said to be ``ok``)."""
    import importlib.util

    module = "aiohttp" if use_http else "litellm"
    try:
        found = importlib.util.find_spec(module) is not None
    except ValueError:  # in sys.modules without a spec: a stand-in, taken as present
        found = True
    if not found:
        path = (
            "the OpenAI-compatible HTTP client (llm_client 'http', or 'auto' with an "
            "openai/ model and llm_base_url)"
            if use_http
            else "llm_backend='litellm'"
        )
        raise ConfigError(
            f"{path} needs the 'llm' extra ({module} is missing): {install_hint('llm')}"
        )


def _message_content(raw: bytes) -> str:
    """The message content of a whole (not streamed) completion's body."""
    try:
        return str(json.loads(raw)["choices"][0]["message"]["content"] or "")
    except (ValueError, KeyError, IndexError, TypeError):
        raise ProviderCallError("answer had no message content", category="malformed") from None


async def _sse_pieces(lines: AsyncIterator[bytes]) -> AsyncGenerator[str, None]:
    """The content pieces of an OpenAI-style stream of server-sent events, in order.

    Raises the cut-off error when the lines end before ``data: [DONE]`` or a chunk with a
    ``finish_reason``: a stream that stopped early is not a whole answer."""
    finished = False
    async for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue  # blank separators, comments (": keep-alive"), event names
        data = line[5:].strip()
        if data == b"[DONE]":
            finished = True
            break
        try:
            choice = json.loads(data)["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            continue  # a usage-only or unknown event
        if choice.get("finish_reason"):
            finished = True
        delta = (choice.get("delta") or {}).get("content")
        if delta:
            yield str(delta)
    if not finished:
        raise _cut_off()


def _cut_off() -> ProviderCallError:
    return ProviderCallError(
        "provider call failed: the stream ended before the reply did", category="connection"
    )


#: Answer tokens allowed per page of a ``page_meta_batch`` (continuity, a one-paragraph
#: chain summary and up to 12 keywords each). A batch's answer grows with its pages; one cut
#: off at a fixed budget is broken JSON, asked again and in the end answered offline.
BATCH_TOKENS_PER_PAGE = 128


def estimate_tokens(text: str) -> int:
    """A rough token count (about 4 characters per token) for rate limiting."""
    return max(1, len(text) // 4)


class LiteLLMBackend:
    """Structured completions through ``litellm.acompletion`` or a plain HTTP POST.

    ``model`` is litellm's model name (``"openai/gpt-4o-mini"``, ``"ollama/llama3"``, ...),
    ``api_base`` an optional base URL, ``api_key_env`` the name of the environment variable
    holding the API key (read at each call, never stored), ``timeout`` seconds per call,
    ``temperature`` passed through (0 keeps memory updates stable). ``client`` is
    ``"auto"`` (plain HTTP for ``openai/`` models at an explicit ``api_base``, litellm
    otherwise), ``"http"`` or ``"litellm"``; ``json_mode`` is ``"auto"``, ``"on"`` or
    ``"off"`` (see the module docstring).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 30.0,
        temperature: float = 0.0,
        max_output_tokens: int = 512,
        client: str = "auto",
        json_mode: str = "auto",
    ) -> None:
        if not model:
            raise ConfigError("llm_model must be set when llm_backend='litellm'")
        if client not in ("auto", "http", "litellm"):
            raise ConfigError(f"llm_client must be 'auto', 'http' or 'litellm', got {client!r}")
        if json_mode not in ("auto", "on", "off"):
            raise ConfigError(f"llm_json_mode must be 'auto', 'on' or 'off', got {json_mode!r}")
        if client == "http" and not api_base:
            raise ConfigError("llm_client='http' needs llm_base_url")
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.json_mode = json_mode
        self.use_http = client == "http" or (
            client == "auto" and bool(api_base) and model.startswith("openai/")
        )
        self.name = f"litellm:{model}"
        _need_client(self.use_http)
        #: Whether JSON mode is requested (None: not decided yet).
        self._json_ok: bool | None = {"on": True, "off": False}.get(json_mode)
        self._session: Any = None
        self._price: tuple[float, float] | None = None
        self._price_lookup: Any = None

    @property
    def json_mode_active(self) -> bool | None:
        """Whether calls ask for JSON mode: True, False, or None while not decided yet."""
        return self._json_ok

    @property
    def client_path(self) -> str:
        """``"http"`` or ``"litellm"``: which client this backend's calls go through."""
        return "http" if self.use_http else "litellm"

    def estimate(self, kind: str, payload: dict[str, Any]) -> int:
        """Estimated tokens (prompt plus answer budget) of one call, for rate limiting."""
        msgs = render_messages(kind, payload)
        return (
            sum(estimate_tokens(m["content"]) for m in msgs) + self.max_tokens(kind, payload) // 4
        )

    def max_tokens(self, kind: str, payload: dict[str, Any]) -> int:
        """The answer budget of one call: ``max_output_tokens``, or for a chain-meta batch
        ``BATCH_TOKENS_PER_PAGE`` per page when that is more."""
        if kind == "page_meta_batch":
            pages = len(payload.get("pages") or ())
            return max(self.max_output_tokens, BATCH_TOKENS_PER_PAGE * pages)
        return self.max_output_tokens

    def _api_key(self) -> str | None:
        return os.environ.get(self.api_key_env, "") if self.api_key_env else None

    def config_error(self, exc: ProviderCallError) -> ProviderConfigError:
        """The typed error for a configuration-class failure of this backend's calls."""
        return config_error(
            exc, model=self.model, api_base=self.api_base, api_key_env=self.api_key_env
        )

    def _key_list(self) -> list[str]:
        key = self._api_key()
        return [key] if key else []

    def _transport_error(self, exc: BaseException) -> ProviderCallError:
        """What a transport failure of the HTTP path is: a timeout, or classified."""
        if isinstance(exc, asyncio.TimeoutError):
            return ProviderCallError("provider call failed: timeout", category="timeout")
        return classify_error(exc, self._key_list())

    # ---------------------------------------------------------------- validation

    @staticmethod
    def _validated(kind: str, text: str) -> dict[str, Any]:
        try:
            return parse_answer(kind, text)
        except MalformedOutput as exc:
            what = "JSON" if PROMPTS[kind].answer == "json" else "text"
            raise ProviderCallError(
                f"answer was not valid {kind} {what}: {exc}", category="malformed"
            ) from None

    @staticmethod
    def _wants_json(kind: str) -> bool:
        """Whether ``kind`` is answered in JSON (JSON mode may help); a chat reply is not."""
        return PROMPTS[kind].answer == "json"

    # ------------------------------------------------------------------ litellm

    def _litellm_kwargs(
        self, litellm: ModuleType, kind: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": render_messages(kind, payload),
            "timeout": self.timeout,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens(kind, payload),
            "max_retries": 0,  # the gateway retries; the client must not retry underneath
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key_env:
            kwargs["api_key"] = self._api_key()
        if not self._wants_json(kind):
            return kwargs
        if self._json_ok is None:
            try:
                params = litellm.get_supported_openai_params(model=self.model) or []
            except Exception:  # noqa: BLE001 - an unknown model: assume no JSON mode
                params = []
            self._json_ok = "response_format" in params
        if self._json_ok:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _litellm_result(self, litellm: ModuleType, kind: str, resp: Any) -> BackendResult:
        try:
            text = resp.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise ProviderCallError("answer had no message content", category="malformed") from None
        data = self._validated(kind, text)
        usage = getattr(resp, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost = float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # noqa: BLE001 - unknown model: no price, not an error
            cost = 0.0
        return BackendResult(data, prompt_tokens, completion_tokens, cost)

    def call(self, kind: str, payload: dict[str, Any]) -> BackendResult:
        """One blocking provider attempt through ``litellm.completion``.

        Raises :class:`ProviderCallError` on any failure, including an answer that stays
        malformed after repair (``category="malformed"``). The gateway uses :meth:`acall`.
        """
        litellm = import_litellm()
        kwargs = self._litellm_kwargs(litellm, kind, payload)
        try:
            resp = litellm.completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider error is classified
            raise classify_error(exc, self._key_list()) from None
        return self._litellm_result(litellm, kind, resp)

    def complete(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The :class:`LLMBackend` protocol: one attempt's validated answer."""
        return self.call(kind, payload).data

    async def acall(self, kind: str, payload: dict[str, Any]) -> BackendResult:
        """One provider attempt, awaited on the gateway's event loop (see :meth:`call`)."""
        if self.use_http:
            return await self._acall_http(kind, payload)
        litellm = import_litellm()
        kwargs = self._litellm_kwargs(litellm, kind, payload)
        try:
            resp = await litellm.acompletion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider error is classified
            raise classify_error(exc, self._key_list()) from None
        return self._litellm_result(litellm, kind, resp)

    # --------------------------------------------------------------- plain HTTP

    def _http_session(self) -> Any:
        import aiohttp

        if self._session is None:
            headers = {"Content-Type": "application/json"}
            key = self._api_key()
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._session = aiohttp.ClientSession(
                headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
            )
        return self._session

    def _url(self) -> str:
        return f"{(self.api_base or '').rstrip('/')}/chat/completions"

    async def _post(self, body: dict[str, Any]) -> tuple[int, Any, bytes]:
        async with self._http_session().post(self._url(), data=json.dumps(body)) as resp:
            return resp.status, resp.headers, await resp.read()

    def _http_model(self) -> str:
        return self.model.split("/", 1)[1] if self.model.startswith("openai/") else self.model

    async def _acall_http(self, kind: str, payload: dict[str, Any]) -> BackendResult:
        body: dict[str, Any] = {
            "model": self._http_model(),
            "messages": render_messages(kind, payload),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens(kind, payload),
        }
        json_mode = self._json_ok is not False and self._wants_json(kind)
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        try:
            status, headers, raw = await self._post(body)
            if (
                status in (400, 422)
                and json_mode
                and self.json_mode == "auto"
                and b"response_format" in raw
            ):
                # The server refuses JSON mode (its error names the field): stop asking
                # for it, and ask again without. The body is read for that word only.
                self._json_ok = False
                body.pop("response_format")
                status, headers, raw = await self._post(body)
            elif status == 200 and json_mode:
                self._json_ok = True
        except Exception as exc:  # noqa: BLE001 - every transport error is classified
            raise self._transport_error(exc) from None
        if status != 200:
            raise classify_error(HTTPStatusError(status, headers, raw), self._key_list())
        try:
            answer = json.loads(raw)
            text = answer["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ProviderCallError("answer had no message content", category="malformed") from None
        data = self._validated(kind, text)
        usage = answer.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        if self._price is None:
            if self._price_lookup is None:  # one lookup, shared by concurrent first calls
                self._price_lookup = asyncio.get_running_loop().run_in_executor(
                    None, self._lookup_price
                )
            self._price = await self._price_lookup
        cost = prompt_tokens * self._price[0] + completion_tokens * self._price[1]
        return BackendResult(data, prompt_tokens, completion_tokens, cost)

    # --------------------------------------------------------------- streaming

    async def astream(self, kind: str, payload: dict[str, Any]) -> AsyncIterator[str]:
        """The plain-text answer to ``kind`` (a text kind: ``chat_reply``), piece by piece
        as the provider streams it. One provider attempt, no validation (the caller checks
        the whole text when it ends). Raises :class:`ProviderCallError` for a failure
        before or during the stream, including a stream that ends without its end marker
        (``category="connection"``). Closing the iterator early closes the request.
        """
        if self._wants_json(kind):
            raise ProviderCallError(f"{kind} is answered in JSON, not streamed", retryable=False)
        pieces = (
            self._astream_http(kind, payload)
            if self.use_http
            else self._astream_litellm(kind, payload)
        )
        try:
            async for piece in pieces:
                yield piece
        except ProviderCallError:
            raise
        except Exception as exc:  # noqa: BLE001 - every transport error is classified
            raise self._transport_error(exc) from None
        finally:
            await pieces.aclose()

    async def _astream_litellm(
        self, kind: str, payload: dict[str, Any]
    ) -> AsyncGenerator[str, None]:
        litellm = import_litellm()
        kwargs = self._litellm_kwargs(litellm, kind, payload)
        stream = await litellm.acompletion(**kwargs, stream=True)
        finished = False
        try:
            async for chunk in stream:
                try:
                    choice = chunk.choices[0]
                except (AttributeError, IndexError, TypeError):
                    continue  # a usage-only chunk
                if getattr(choice, "finish_reason", None):
                    finished = True
                delta = getattr(getattr(choice, "delta", None), "content", None)
                if delta:
                    yield str(delta)
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None and not finished:
                try:
                    await close()
                except Exception:  # noqa: BLE001, S110 - closing a dropped stream is best effort
                    pass
        if not finished:
            raise _cut_off()

    async def _astream_http(self, kind: str, payload: dict[str, Any]) -> AsyncGenerator[str, None]:
        import aiohttp

        body: dict[str, Any] = {
            "model": self._http_model(),
            "messages": render_messages(kind, payload),
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            "stream": True,
        }
        # The whole-call timeout of the session would cut a long reply: a stream is
        # bounded by how long the provider stays silent instead.
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.timeout, sock_read=self.timeout
        )
        async with self._http_session().post(
            self._url(), data=json.dumps(body), timeout=timeout
        ) as resp:
            if resp.status != 200:
                raw = await resp.read()
                raise classify_error(
                    HTTPStatusError(resp.status, resp.headers, raw), self._key_list()
                )
            if "text/event-stream" not in resp.headers.get("Content-Type", "text/event-stream"):
                # A server that ignores "stream": the whole answer, as one piece.
                whole = _message_content(await resp.read())
                if whole:
                    yield whole
                return
            async for piece in _sse_pieces(resp.content):
                yield piece

    def _lookup_price(self) -> tuple[float, float]:
        """USD per prompt and per completion token, from litellm's bundled price map.

        The map is read as the JSON file litellm ships (tens of milliseconds), not by
        importing litellm (seconds): the plain HTTP path never imports litellm.
        """
        import importlib.util

        try:
            spec = importlib.util.find_spec("litellm")
            if spec is None or spec.origin is None:
                return (0.0, 0.0)
            path = os.path.join(
                os.path.dirname(spec.origin), "model_prices_and_context_window_backup.json"
            )
            with open(path, encoding="utf-8") as fh:
                prices = json.load(fh)
            entry = prices.get(self.model) or prices.get(self.model.split("/", 1)[-1]) or {}
            return (
                float(entry.get("input_cost_per_token") or 0.0),
                float(entry.get("output_cost_per_token") or 0.0),
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return (0.0, 0.0)  # no price map or no price: cost unknown (0)

    async def aclose(self) -> None:
        """Close the HTTP connection pool (called by the gateway when it closes)."""
        if self._session is not None:
            await self._session.close()
            self._session = None
