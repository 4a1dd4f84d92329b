"""The offline model: answers from a script, for tests and for `dhub run --model-replies`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dhub.engine.state import CallModel
from dhub.runtime.ports import PortError

Reply = Any  # text, a parsed object, or an Exception to raise as the model's failure


class ScriptedModel:
    """A model port that answers each request with the next scripted reply (or what
    ``script(request)`` returns) and records every request it received, in order."""

    def __init__(self, script: Iterable[Reply] | Callable[[CallModel], Reply]) -> None:
        self._answer: Callable[[CallModel], Reply] | None = script if callable(script) else None
        self._replies: list[Reply] = [] if callable(script) else list(script)
        self.requests: list[CallModel] = []

    async def complete(self, request: CallModel) -> Any:
        self.requests.append(request)
        reply = self._next(request)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _next(self, request: CallModel) -> Reply:
        if self._answer is not None:
            return self._answer(request)
        if not self._replies:
            raise PortError(
                "no_reply",
                f"the scripted model has no reply left for llm node '{request.node_id}' "
                f"(it answered {len(self.requests) - 1} request(s))",
            )
        return self._replies.pop(0)
