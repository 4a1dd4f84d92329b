"""The OpenAI adapter: the OpenAI API and any OpenAI-compatible server (Ollama, vLLM,
llama.cpp, LM Studio) configured by base URL, through the official ``openai`` SDK.

A model whose catalog entry says ``api: responses`` (OpenAI's reasoning models) goes through
the Responses API (``openai_responses``), anything else, and every model of an
OpenAI-compatible server, through Chat Completions (``openai_chat``). The SDK never retries
(``max_retries=0``): dhub's resilience layer does, from the ``ProviderError`` raised here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx2  # the HTTP client under openai 3.x (not httpx)
import openai

from dhub.providers import openai_chat, openai_responses
from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import (
    RETRYABLE,
    ErrorKind,
    ProviderError,
    kind_for_status,
    retry_after_seconds,
)
from dhub.providers.types import Finished, ModelRequest, StreamItem

_MAX_MESSAGE = 500  # characters of a server's error text kept in a ProviderError


class OpenAIAdapter:
    """One provider entry speaking OpenAI's wire protocol. ``compatible`` marks an
    OpenAI-compatible server: Chat Completions only, ``max_tokens`` instead of
    ``max_completion_tokens``, no OpenAI-only fields."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None,
        base_url: str | None,
        models: Callable[[str], ModelInfo],
        timeout: float = 600.0,
        headers: Mapping[str, str] | None = None,
        compatible: bool = False,
    ) -> None:
        self.name = name
        self._api_key = api_key
        self._base_url = base_url
        self._models = models
        self._timeout = timeout
        self._headers = dict(headers) if headers else None
        self._compatible = compatible
        self._client: openai.AsyncOpenAI | None = None

    def _sdk(self) -> openai.AsyncOpenAI:
        """The SDK client, made on first use (making it does no I/O, but needs no loop)."""
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key or "not-needed", base_url=self._base_url,
                max_retries=0, timeout=self._timeout, default_headers=self._headers,
            )  # fmt: skip
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        info = self._models(request.model)
        responses = info.api == "responses" and not self._compatible
        reader: openai_chat.ChatReader | openai_responses.ResponsesReader
        if responses:
            params = openai_responses.request_params(request, info, provider=self.name)
            reader = openai_responses.ResponsesReader(self.name, request)
        else:
            params = openai_chat.request_params(
                request, info, provider=self.name, compatible=self._compatible
            )
            reader = openai_chat.ChatReader(self.name, request)

        output = False  # whether anything was yielded: a failure after that is a cut stream
        try:
            events: Any
            if responses:
                events = await self._sdk().responses.create(stream=True, **params)
            else:
                events = await self._sdk().chat.completions.create(stream=True, **params)
            async with events:
                async for event in events:
                    for item in reader.feed(event):
                        output = True
                        yield item
        except ProviderError as exc:
            raise self._after_output(exc, output) from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc, request) from exc
        except (openai.APITimeoutError, httpx2.TimeoutException) as exc:
            error = self._error(
                "timeout",
                f"no answer within the timeout ({self._timeout:g} s)",
                request,
            )
            raise self._after_output(error, output) from exc
        except (openai.APIConnectionError, httpx2.TransportError) as exc:
            if not reader.finished:  # a drop after the last event loses nothing
                raise self._connection_error(exc, request, output) from exc
        except openai.APIError as exc:  # an error event inside the stream
            error = self._error(_error_kind(exc), _api_message(exc.body, exc.message), request)
            raise self._after_output(error, output) from exc
        except json.JSONDecodeError as exc:
            raise self._error(
                "provider_error",
                f"the server sent a stream event that is not JSON ({exc.msg} at {exc.pos})",
                request,
            ) from exc
        if not reader.finished:
            what = "a finish_reason" if not responses else "response.completed"
            error = self._error(
                "connection",
                f"the stream ended without {what}: the server or a proxy closed it early",
                request,
            )
            raise self._after_output(error, output)
        yield Finished(reader.response())

    # -- errors --

    def _error(
        self,
        kind: ErrorKind,
        message: str,
        request: ModelRequest,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> ProviderError:
        return ProviderError(
            kind, self._scrub(message), provider=self.name, model=request.model,
            status=status, retry_after=retry_after,
        )  # fmt: skip

    def _after_output(self, error: ProviderError, output: bool) -> ProviderError:
        """Once output was streamed, a failure that would be retried becomes ``stream_cut``
        (a retry would repeat what the consumer already has)."""
        if not output or error.kind not in RETRYABLE:
            if self._scrub(error.message) == error.message:
                return error
            return ProviderError(
                error.kind, self._scrub(error.message), provider=error.provider,
                model=error.model, status=error.status, retry_after=error.retry_after,
            )  # fmt: skip
        return ProviderError(
            "stream_cut", self._scrub(f"the stream broke after output began: {error.message}"),
            provider=error.provider, model=error.model, status=error.status,
        )  # fmt: skip

    def _status_error(self, exc: openai.APIStatusError, request: ModelRequest) -> ProviderError:
        status = exc.status_code
        kind = kind_for_status(status)
        message = _api_message(exc.body, exc.message)
        if kind == "auth":
            message += f" (check the API key configured for provider '{self.name}')"
        return self._error(kind, message, request, status=status,
                           retry_after=retry_after_seconds(exc.response.headers))  # fmt: skip

    def _connection_error(
        self, exc: Exception, request: ModelRequest, output: bool
    ) -> ProviderError:
        cause = exc.__cause__ if isinstance(exc, openai.APIError) else exc
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        if output:
            return self._error("stream_cut", f"the connection broke mid-stream{detail}", request)
        where = self._base_url or "the OpenAI API"
        return self._error("connection", f"could not reach {where}{detail}", request)

    def _scrub(self, text: str) -> str:
        """No key material in messages, whatever a server or proxy echoes back."""
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "[api key]")
        return text


def _api_message(body: object, fallback: str) -> str:
    """The readable message of an error body: OpenAI's ``{"message": ...}`` (the SDK has already
    unwrapped ``error``), a compatible server's plain text or ``{"error": "..."}``."""
    text: object = None
    if isinstance(body, Mapping):
        text = body.get("message") or body.get("error") or body.get("detail")
    elif isinstance(body, str):
        text = body
    if not isinstance(text, str) or not text.strip():
        text = fallback
    text = text.strip()
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"


def _error_kind(exc: openai.APIError) -> ErrorKind:
    body = exc.body if isinstance(exc.body, Mapping) else {}
    return openai_chat.error_kind(body.get("code") or body.get("type") or exc.code or exc.type)
