"""The conversations half of ``Client``: chat with an agent whose input mode is ``chat``.

Each message is one *turn*, and a turn is a run: it is sent with the plain (non-streaming)
``POST /conversations/{id}/messages``, which answers with the run, and its events are then
followed on the run's own event stream. The ``stream: true`` form of that POST sends the same
events but never says which run they belong to, so a client using it could not resume a
dropped stream, name the run to answer its tasks or cancel it, or find its reply.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from dhub.client._models import Conversation, Run, RunEvent, Turn
from dhub.client._paths import segment
from dhub.client._runs import END_EVENTS


class _Turns(Protocol):
    """What a TurnStream needs of the client."""

    def stream_run_events(
        self, run_id: str, after: int = 0, timeout: float | None = None
    ) -> Generator[RunEvent, None, None]: ...

    def get_run(self, run_id: str) -> Run: ...

    def get_conversation(self, conversation_id: str) -> Conversation: ...


class ConversationsMixin:
    """Mixed into ``Client`` after ``RunsMixin``, which supplies the run methods."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _agent_path(self, agent: str) -> str: ...

        def stream_run_events(
            self, run_id: str, after: int = 0, timeout: float | None = None
        ) -> Generator[RunEvent, None, None]: ...

        def get_run(self, run_id: str) -> Run: ...

    def create_conversation(self, agent: str) -> Conversation:
        """A new conversation with a chat agent (its id or its name; ``runner`` scope on it),
        its variables at their defaults. An agent whose input mode is ``event`` gives
        ``InvalidInput``."""
        body = self._object("POST", f"{self._agent_path(agent)}/conversations")
        return Conversation.from_json(body)

    def get_conversation(self, conversation_id: str) -> Conversation:
        """The conversation's messages and variables (its user's; admins may read any)."""
        return Conversation.from_json(
            self._object("GET", f"/conversations/{segment(conversation_id)}")
        )

    def stream_message(
        self, conversation_id: str, content: str, timeout: float | None = None
    ) -> TurnStream:
        """Send a message and follow the turn that answers it::

            with dhub.stream_message(conversation_id, "hello") as turn:
                for event in turn:  # the run's events as they happen, until it ends
                    ...
                print(turn.result().reply)

        The message is sent here (a turn still answering gives ``Conflict``, an empty message
        ``InvalidInput``); the events are read while iterating. A turn that waits for a person
        waits for them too (see ``list_tasks``). ``timeout`` bounds the whole wait
        (``TimeoutError``; the turn goes on)."""
        path = f"/conversations/{segment(conversation_id)}/messages"
        run = Run.from_json(self._object("POST", path, json={"content": content}))
        return TurnStream(self, conversation_id, run, timeout)

    def send_message(
        self, conversation_id: str, content: str, timeout: float | None = None
    ) -> Turn:
        """Send a message and wait for the turn to finish: its run, and its reply when it
        succeeded. ``timeout`` as in ``stream_message``."""
        with self.stream_message(conversation_id, content, timeout) as turn:
            return turn.result()


class TurnStream:
    """One turn of a conversation as it happens (``Client.stream_message``). Iterating
    yields the run's events from where the last iteration stopped, until the run ends;
    ``close()`` (or leaving the ``with`` block) hangs up, and the turn goes on on the
    server."""

    def __init__(self, api: _Turns, conversation_id: str, run: Run, timeout: float | None) -> None:
        self.conversation_id = conversation_id
        self.run = run  # as it was when the message was accepted (queued)
        self._api = api
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._timeout = timeout
        self._seq = 0  # the last event seen: a later iteration resumes after it
        self._ended = False
        self._current: Generator[RunEvent, None, None] | None = None

    @property
    def run_id(self) -> str:
        return self.run.id

    def __iter__(self) -> Iterator[RunEvent]:
        self.close()
        self._current = self._follow()
        return self._current

    def _follow(self) -> Generator[RunEvent, None, None]:
        if self._ended:
            return
        left = None
        if self._deadline is not None:
            left = max(self._deadline - time.monotonic(), 0.0)
        events = self._api.stream_run_events(self.run.id, self._seq, left)
        try:
            for event in events:
                self._seq = event.seq
                self._ended = event.type in END_EVENTS
                yield event
        except TimeoutError:
            if self._timeout is None:
                raise
            # Name the turn's whole timeout, not what was left of it for this stream.
            raise TimeoutError(
                f"Run {self.run.id} did not finish within {self._timeout:g}s."
            ) from None
        finally:
            events.close()

    def result(self) -> Turn:
        """Wait for the turn to end (reading the events not read yet), then the finished
        run and its reply."""
        for _ in self:
            pass
        run = self._api.get_run(self.run.id)
        conversation = self._api.get_conversation(self.conversation_id)
        replies = (
            m.content for m in conversation.messages if m.role == "assistant" and m.run_id == run.id
        )
        return Turn(run=run, reply=next(replies, None))

    def close(self) -> None:
        if self._current is not None:
            self._current.close()  # its finally hangs the HTTP stream up
            self._current = None

    def __enter__(self) -> TurnStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<TurnStream run_id={self.run.id!r} conversation_id={self.conversation_id!r}>"
