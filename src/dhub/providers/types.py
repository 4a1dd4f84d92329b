"""The one model interface every provider adapter speaks (DESIGN.md 6).

A ``ModelRequest`` goes in; a stream of deltas (text, reasoning, tool-call fragments) comes out,
ending with one ``Finished`` that holds the complete assistant message and its usage. Plain
frozen dataclasses: the engine, the react loop and users' own tests build them by hand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[Effort, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
StopReason = Literal["end", "tool_calls", "max_tokens", "content_filter", "refusal"]


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for: ``arguments`` parsed from the model's JSON."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One turn of the conversation.

    - ``user``: ``content`` (and ``images``: URLs or ``data:`` URLs, for vision models);
    - ``assistant``: ``content`` and/or ``tool_calls``; ``replay`` holds what a provider needs
      back verbatim on the next turn (Anthropic's signed thinking blocks, OpenAI's encrypted
      reasoning items), keyed by provider wire format, opaque to everyone else;
    - ``tool``: the result of the call ``tool_call_id`` (``content`` as text, ``is_error`` when
      the tool failed).
    """

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    images: tuple[str, ...] = ()
    reasoning: str = ""
    replay: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: ``parameters`` is a JSON schema of an object."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True)
class ModelRequest:
    """What to ask the model. ``response_schema`` (a JSON schema) asks for structured output;
    ``tool_choice`` is ``auto``, ``required``, ``none`` or a tool's name; ``options`` go into
    the provider's request body as they are (provider-specific knobs dhub does not model)."""

    model: str
    messages: tuple[Message, ...]
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str = "auto"
    response_schema: Mapping[str, Any] | None = None
    reasoning_effort: Effort | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TextDelta:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ReasoningDelta:
    text: str
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of tool call ``index``: ``id`` and ``name`` come with its first fragment,
    ``arguments`` is the next piece of its JSON text (not parseable on its own)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    type: Literal["tool_call"] = "tool_call"


Delta = TextDelta | ReasoningDelta | ToolCallDelta


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. ``cached_tokens`` and ``reasoning_tokens`` are parts of
    ``input_tokens`` and ``output_tokens``; ``estimated`` when dhub counted them itself because
    the provider did not say."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cached_tokens + other.cached_tokens,
            self.estimated or other.estimated,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cached_tokens": self.cached_tokens,
            "estimated": self.estimated,
        }


@dataclass(frozen=True)
class ModelResponse:
    """The complete answer: an assistant ``Message``, why it stopped, what it cost (all zeros
    from an adapter: the provider reported nothing, and the client estimates it). ``parsed`` is
    the structured output (the request had a ``response_schema``), parsed and validated by the
    client (``ModelClient``); adapters leave it None."""

    message: Message
    usage: Usage
    stop_reason: StopReason
    provider: str
    model: str
    parsed: Any = None


@dataclass(frozen=True)
class Finished:
    """The last item of every stream."""

    response: ModelResponse
    type: Literal["finished"] = "finished"


StreamItem = Delta | Finished


class ModelProvider(Protocol):
    """One configured provider entry (``openai``, ``anthropic``, a named OpenAI-compatible
    server, a test model). ``stream`` yields deltas then exactly one ``Finished``, or raises
    ``ProviderError``; closing the iterator early (or cancelling its task) closes the HTTP
    stream."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]: ...

    async def aclose(self) -> None: ...
