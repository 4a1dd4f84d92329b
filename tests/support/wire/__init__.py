"""Fake provider APIs for tests: real HTTP servers on 127.0.0.1 that speak OpenAI's and
Anthropic's wire protocols from a per-test script, so the official SDKs run unmodified against
them. See docs/testing.md."""

from tests.support.wire.anthropic_wire import (
    AnthropicReply,
    AnthropicServer,
    RedactedThinking,
    Text,
    Thinking,
    ToolUse,
)
from tests.support.wire.openai_wire import OpenAIReply, OpenAIServer, ToolCall
from tests.support.wire.server import (
    JSONReply,
    RecordedRequest,
    Rendered,
    Reply,
    SSEEvent,
    SSEReply,
    WireServer,
)

__all__ = [
    "AnthropicReply",
    "AnthropicServer",
    "JSONReply",
    "OpenAIReply",
    "OpenAIServer",
    "RecordedRequest",
    "RedactedThinking",
    "Rendered",
    "Reply",
    "SSEEvent",
    "SSEReply",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolUse",
    "WireServer",
]
