"""Request bodies of the OpenAI-compatible endpoints (docs/openai.md), checked and reduced to
what dhub uses: the model, the last user message's text, where the conversation continues,
and how to answer. Every problem is an InvalidInput whose pointer names the parameter (the
API turns ``/messages/2/content`` into OpenAI's ``messages[2].content``).

Everything else a client may send (temperature, tools, instructions, earlier messages...) is
accepted and ignored: the agent decides how it answers, and the conversation's history lives
on the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dhub.domain.errors import FieldError, InvalidInput

CONVERSATION_PREFIX = "conversation."
RESPONSE_PREFIX = "resp_"


@dataclass(frozen=True, slots=True)
class Ask:
    """One turn asked of an agent through the OpenAI-compatible API."""

    model: str
    text: str
    conversation_id: str | None  # continue this conversation (else a new one)
    previous_response_id: str | None  # Responses API: continue that response's conversation
    stream: bool
    include_usage: bool  # chat completions, streaming: send a usage chunk at the end


def _bad(loc: str, message: str, code: str = "invalid_value") -> InvalidInput:
    return InvalidInput([FieldError(loc, message, code)])


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _bad("", "The request body must be a JSON object.", "invalid_type")
    return body


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad("/model", "model (an agent's name or id) is required.", "missing")
    return model


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad(f"/{name}", f"{name} must be true or false.", "invalid_type")
    return value


def _conversation(body: dict[str, Any], header: str | None) -> str | None:
    """The conversation a request continues: the X-Dhub-Conversation header, else ``user``
    when it holds a conversation id (any other ``user`` is an end-user label, ignored)."""
    if header is not None and header.strip():
        return header.strip()
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise _bad("/user", "user must be a string.", "invalid_type")
    if user is not None and user.startswith(CONVERSATION_PREFIX):
        return user
    return None


def _text(content: Any, loc: str, part_types: tuple[str, ...]) -> str:
    """A message's text: a string, or a list of text parts (joined by blank lines)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise _bad(loc, "content must be a string or a list of text parts.", "invalid_type")
    texts = []
    for i, part in enumerate(content):
        where = f"{loc}/{i}"
        if not isinstance(part, dict) or part.get("type") not in part_types:
            kinds = " or ".join(f"'{t}'" for t in part_types)
            raise _bad(where, f"Only text parts (type {kinds}) are supported.", "invalid_type")
        text = part.get("text")
        if not isinstance(text, str):
            raise _bad(f"{where}/text", "text must be a string.", "invalid_type")
        texts.append(text)
    return "\n\n".join(texts)


def _last_user_text(messages: list[Any], loc: str, part_types: tuple[str, ...]) -> str:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, dict):
            raise _bad(f"{loc}/{i}", "Each message must be an object.", "invalid_type")
        if message.get("role") == "user":
            text = _text(message.get("content"), f"{loc}/{i}/content", part_types)
            if not text.strip():
                raise _bad(f"{loc}/{i}/content", "The user message is empty.", "missing")
            return text
    raise _bad(loc, "There is no message with role 'user' to answer.", "missing")


def chat_completion(body: Any, conversation_header: str | None) -> Ask:
    """POST /v1/chat/completions: the last user message of ``messages`` is the turn."""
    body = _object(body)
    model = _model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("/messages", "messages must be a non-empty list of messages.", "missing")
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("/n", "Only one choice (n = 1) is supported: a turn has one answer.")
    text = _last_user_text(messages, "/messages", ("text",))
    stream = _flag(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("/stream_options", "stream_options must be an object.", "invalid_type")
    include_usage = _flag(options, "include_usage") if options else False
    if include_usage and not stream:
        raise _bad("/stream_options", "stream_options is only allowed with stream: true.")
    return Ask(model, text, _conversation(body, conversation_header), None, stream, include_usage)


def response(body: Any, conversation_header: str | None) -> Ask:
    """POST /v1/responses: ``input`` is the message (a string), or a list of input items
    whose last user message is."""
    body = _object(body)
    model = _model(body)
    given = body.get("input")
    if isinstance(given, str):
        if not given.strip():
            raise _bad("/input", "input is empty.", "missing")
        text = given
    elif isinstance(given, list) and given:
        text = _last_user_text(given, "/input", ("input_text", "text"))
    else:
        raise _bad("/input", "input must be a string or a non-empty list of messages.", "missing")
    previous = body.get("previous_response_id")
    if previous is not None and (
        not isinstance(previous, str) or not previous.startswith(RESPONSE_PREFIX)
    ):
        raise _bad("/previous_response_id", "previous_response_id must be the id of a response "
                   f"this server made ('{RESPONSE_PREFIX}...').")  # fmt: skip
    conversation = _conversation(body, conversation_header)
    if previous is not None and conversation is not None:
        raise _bad("/previous_response_id", "Name the conversation once: previous_response_id "
                   "or a conversation id, not both.")  # fmt: skip
    return Ask(model, text, conversation, previous, _flag(body, "stream"), False)
