"""A ``ModelRequest`` as the keyword arguments of Anthropic's ``messages.create``.

Everything the model or the Messages API cannot take is refused here, before anything is
sent, with an ``UnsupportedFeature`` that says what to change: nothing is dropped silently.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import ProviderError, UnsupportedFeature
from dhub.providers.reasoning import anthropic_thinking
from dhub.providers.types import Message, ModelRequest, ToolSpec

REPLAY_KEY = "anthropic"  # Message.replay key: the signed thinking blocks, sent back verbatim
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def build_params(request: ModelRequest, info: ModelInfo, provider: str) -> dict[str, Any]:
    """The arguments of ``messages.create`` (without ``stream``) for ``request``."""
    refusal = _Refusal(provider, request.model)
    if request.tools and not info.tools:
        raise refusal("this model does not take tools; remove the tools or pick a model that "
                      "calls tools")  # fmt: skip
    if not info.vision and any(m.images for m in request.messages):
        raise refusal("this model does not take images; remove the images or pick a vision "
                      "model")  # fmt: skip
    if request.response_schema is not None and not info.structured_output:
        raise refusal("this model has no structured output; remove response_schema or pick a "
                      "model with structured output")  # fmt: skip
    thinking = anthropic_thinking(info, request.reasoning_effort, request.max_output_tokens)
    if thinking.thinking is not None:
        sampling = [n for n in ("temperature", "top_p") if getattr(request, n) is not None]
        if sampling:
            raise refusal(
                f"Anthropic takes no {' or '.join(sampling)} while the model thinks; remove "
                f"{' and '.join(sampling)} or set reasoning_effort to none"
            )
        if request.tool_choice not in ("auto", "none"):
            raise refusal(
                f"Anthropic cannot force a tool call (tool_choice '{request.tool_choice}') while "
                "the model thinks; set tool_choice to auto or set reasoning_effort to none"
            )

    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": thinking.max_tokens,
        "messages": _messages(request.messages, refusal),
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [_tool(t) for t in request.tools]
        params["tool_choice"] = _tool_choice(request.tool_choice, request.tools, refusal)
    elif request.tool_choice not in ("auto", "none"):
        raise refusal(f"tool_choice '{request.tool_choice}' asks for a tool call, and the "
                      "request has no tools; add the tools or set tool_choice to auto")  # fmt: skip
    if thinking.thinking is not None:
        params["thinking"] = thinking.thinking
    output_config: dict[str, Any] = {}
    if thinking.effort is not None:
        output_config["effort"] = thinking.effort
    if request.response_schema is not None:
        schema = dict(request.response_schema)
        output_config["format"] = {"type": "json_schema", "schema": schema}
    if output_config:
        params["output_config"] = output_config
    if request.stop:
        params["stop_sequences"] = list(request.stop)
    # anthropic 2.x's ``messages.create`` has no temperature or top_p argument any more: they
    # go into the body as extra fields, with the provider-specific options.
    extra: dict[str, Any] = {}
    if request.temperature is not None:
        extra["temperature"] = request.temperature
    if request.top_p is not None:
        extra["top_p"] = request.top_p
    extra.update(request.options)
    if extra:
        params["extra_body"] = extra
    return params


class _Refusal:
    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model

    def __call__(self, message: str) -> UnsupportedFeature:
        return UnsupportedFeature(message, provider=self.provider, model=self.model)

    def bad_request(self, message: str) -> ProviderError:
        return ProviderError("bad_request", message, provider=self.provider, model=self.model)


def _tool(tool: ToolSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": tool.name, "input_schema": dict(tool.parameters)}
    if tool.description:
        spec["description"] = tool.description
    return spec


def _tool_choice(choice: str, tools: Sequence[ToolSpec], refusal: _Refusal) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if choice not in {t.name for t in tools}:
        raise refusal(f"tool_choice '{choice}' names no tool of the request; use auto, "
                      "required, none or the name of one of its tools")  # fmt: skip
    return {"type": "tool", "name": choice}


def _messages(messages: Sequence[Message], refusal: _Refusal) -> list[dict[str, Any]]:
    """Anthropic's turns: tool results go back as ``tool_result`` blocks of a user turn, the
    results of one round of calls together in one user turn."""
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []  # the tool results of the user turn being built
    for message in messages:
        if message.role == "tool":
            if not message.tool_call_id:
                raise refusal.bad_request("a tool message needs the tool_call_id it answers")
            if not results:
                out.append({"role": "user", "content": results})
            results.append(_tool_result(message))
            continue
        results = []
        if message.role == "user":
            out.append({"role": "user", "content": _user_content(message, refusal)})
        else:
            content = _assistant_content(message, refusal)
            if content:  # an empty assistant turn says nothing, and Anthropic refuses it
                out.append({"role": "assistant", "content": content})
    return out


def _tool_result(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.content:
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True
    return block


def _user_content(message: Message, refusal: _Refusal) -> str | list[dict[str, Any]]:
    if not message.images:
        return message.content
    blocks = [{"type": "image", "source": _image_source(url, refusal)} for url in message.images]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    return blocks


def _image_source(url: str, refusal: _Refusal) -> dict[str, Any]:
    if url.startswith(("http://", "https://")):
        return {"type": "url", "url": url}
    shown = url if len(url) <= 40 else url[:40] + "…"
    if not url.startswith("data:"):
        raise refusal(f"image '{shown}' is neither an http(s) URL nor a data: URL; give the "
                      "image as one of those")  # fmt: skip
    header, comma, data = url[len("data:") :].partition(",")
    media_type, _, encoding = header.partition(";")
    if not comma or encoding.lower() != "base64":
        raise refusal(f"image '{shown}' is a data: URL that is not base64; encode it as "
                      "data:<media type>;base64,<data>")  # fmt: skip
    if media_type.lower() not in IMAGE_TYPES:
        raise refusal(f"Anthropic takes images of type {', '.join(IMAGE_TYPES)}, not "
                      f"'{media_type or 'none given'}'; convert the image")  # fmt: skip
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise refusal(f"image '{shown}' is a data: URL whose data is not valid base64") from None
    return {"type": "base64", "media_type": media_type.lower(), "data": data}


def _assistant_content(message: Message, refusal: _Refusal) -> list[dict[str, Any]]:
    """Signed thinking first (Anthropic checks it when thinking and tools go together), then
    the text, then the tool calls."""
    blocks = _replay_blocks(message.replay.get(REPLAY_KEY), refusal)
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": dict(call.arguments)})  # fmt: skip
    return blocks


def _replay_blocks(replay: Any, refusal: _Refusal) -> list[dict[str, Any]]:
    if replay is None:
        return []
    if not isinstance(replay, Sequence) or isinstance(replay, str | bytes):
        raise refusal.bad_request(
            "an assistant message's replay for anthropic is not a list of thinking blocks; "
            "pass back what the model returned"
        )
    blocks: list[dict[str, Any]] = []
    for block in replay:
        if not isinstance(block, Mapping) or block.get("type") not in (
            "thinking", "redacted_thinking",
        ):  # fmt: skip
            raise refusal.bad_request(
                "an assistant message's replay for anthropic holds something other than "
                "thinking blocks"
            )
        blocks.append(dict(block))
    return blocks
