"""The JSON shapes of OpenAI's wire protocol that dhub's /v1 endpoints answer with (chat
completions and their chunks, responses and their stream events, models, errors), as the
``openai`` package's types (openai/types/chat, openai/types/responses) define them.

Each object also carries ``dhub``: the run, its conversation and its status (``waiting`` when
it waits for a person), which OpenAI's clients keep as an extra field.
"""

from __future__ import annotations

from typing import Any

from dhub.api.responses import encode
from dhub.services.openai_compat import Model, Outcome, Turn
from dhub.services.openai_requests import RESPONSE_PREFIX

CONVERSATION_HEADER = "X-Dhub-Conversation"


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = b"event: %s\n" % event.encode() if event else b""
    return head + b"data: " + encode(data) + b"\n\n"


def openai_error(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def model_json(model: Model) -> dict[str, Any]:
    created = model.agent.created_at // 1000
    return {"id": model.id, "object": "model", "created": created, "owned_by": model.owned_by}


def _counts(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    """input, output, cached (part of input), reasoning (part of output) tokens."""
    return tuple(  # type: ignore[return-value]
        int(usage.get(name) or 0)
        for name in ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
    )


def _extension(turn: Turn, outcome: Outcome | None) -> dict[str, Any]:
    run = outcome.run if outcome else turn.run
    return {"run_id": run.id, "conversation_id": turn.conversation_id, "status": run.status,
            "waiting": run.waiting}  # fmt: skip


class ChatShapes:
    """A chat completion (``chat.completion``) and its chunks (``chat.completion.chunk``)."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.head = {"id": f"chatcmpl-{turn.run.id}", "created": turn.run.created_at // 1000,
                     "model": turn.model, "system_fingerprint": None}  # fmt: skip

    @staticmethod
    def usage(outcome: Outcome) -> dict[str, Any]:
        inp, out, cached, reasoning = _counts(outcome.usage)
        return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}  # fmt: skip

    def completion(self, outcome: Outcome) -> dict[str, Any]:
        message = {"role": "assistant", "content": outcome.text, "refusal": None}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        return {**self.head, "object": "chat.completion", "choices": [choice],
                "usage": self.usage(outcome), "dhub": _extension(self.turn, outcome)}  # fmt: skip

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**self.head, "object": "chat.completion.chunk", "choices": [choice]}

    def usage_chunk(self, outcome: Outcome) -> dict[str, Any]:
        return {**self.head, "object": "chat.completion.chunk", "choices": [],
                "usage": self.usage(outcome), "dhub": _extension(self.turn, outcome)}  # fmt: skip


class ResponseShapes:
    """A response (``response``) and its stream of events, numbered by ``sequence_number``."""

    def __init__(self, turn: Turn, previous: str | None) -> None:
        self.turn = turn
        self.id = f"{RESPONSE_PREFIX}{turn.run.id}"
        self.item_id = f"msg_{turn.run.id}"
        self.previous = previous
        self.seq = 0

    @staticmethod
    def usage(outcome: Outcome) -> dict[str, Any]:
        inp, out, cached, reasoning = _counts(outcome.usage)
        return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": out, "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": inp + out}  # fmt: skip

    def _message(self, text: str | None) -> dict[str, Any]:
        content = [] if text is None else [self._part(text)]
        status = "in_progress" if text is None else "completed"
        return {"type": "message", "id": self.item_id, "status": status, "role": "assistant",
                "content": content}  # fmt: skip

    @staticmethod
    def _part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def _response(self, status: str, outcome: Outcome | None) -> dict[str, Any]:
        output = [self._message(outcome.text)] if outcome and status == "completed" else []
        error = None
        if outcome and status == "failed":
            error = {"code": "server_error", "message": outcome.text}
        return {
            "id": self.id, "object": "response", "created_at": self.turn.run.created_at // 1000,
            "status": status, "model": self.turn.model, "output": output, "error": error,
            "incomplete_details": None, "instructions": None, "metadata": {},
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
            "temperature": None, "top_p": None, "previous_response_id": self.previous,
            "usage": self.usage(outcome) if outcome else None,
            "dhub": _extension(self.turn, outcome),
        }  # fmt: skip

    def response(self, outcome: Outcome) -> dict[str, Any]:
        """A turn that ended, or waits for a person (then its text says where to answer)."""
        return self._response("completed", outcome)

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {"type": kind, "sequence_number": self.seq, **fields}

    def opening(self) -> list[dict[str, Any]]:
        started = self._response("in_progress", None)
        return [self._event("response.created", response=started),
                self._event("response.in_progress", response=started)]  # fmt: skip

    def closing(self, outcome: Outcome) -> list[dict[str, Any]]:
        """The answer as one message of one text part, then the response completed."""
        at = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        text = outcome.text
        return [
            self._event("response.output_item.added", output_index=0, item=self._message(None)),
            self._event("response.content_part.added", **at, part=self._part("")),
            self._event("response.output_text.delta", **at, delta=text, logprobs=[]),
            self._event("response.output_text.done", **at, text=text, logprobs=[]),
            self._event("response.content_part.done", **at, part=self._part(text)),
            self._event("response.output_item.done", output_index=0, item=self._message(text)),
            self._event("response.completed", response=self.response(outcome)),
        ]

    def failure(self, outcome: Outcome) -> list[dict[str, Any]]:
        return [self._event("response.failed", response=self._response("failed", outcome))]
