"""The SDK's conversation methods against a real app (SQLite and PostgreSQL): turns, their
replies, and following a turn's events as they happen."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dhub.client import (
    Client,
    Conflict,
    Conversation,
    InvalidInput,
    Message,
    NotFound,
    RunEvent,
    Turn,
)
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_cli_chat import ASKING, BROKEN
from tests.integration.test_conversations_api import ECHO


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


def test_each_turn_comes_back_with_its_reply(api: Client) -> None:
    agent = api.create_agent(ECHO)["id"]
    started = api.create_conversation(agent)
    assert isinstance(started, Conversation)
    assert (started.agent_id, started.user_id) == (agent, "user.admin")
    assert (started.variables, started.messages) == ({"turns": 0}, [])

    first = api.send_message(started.id, "hello")
    second = api.send_message(started.id, "again")  # sees what the first turn left
    assert isinstance(first, Turn)
    assert (first.reply, second.reply) == ("#1: HELLO", "#2: AGAIN")
    assert first.run.status == "succeeded" and first.run_id == first.run.id
    assert api.get_run(second.run_id).outputs == {"answer": "#2: AGAIN"}

    seen = api.get_conversation(started.id)
    assert seen.variables == {"turns": 2}
    assert all(isinstance(m, Message) for m in seen.messages)
    assert [(m.seq, m.role, m.content, m.run_id) for m in seen.messages] == [
        (1, "user", "hello", first.run_id), (2, "assistant", "#1: HELLO", first.run_id),
        (3, "user", "again", second.run_id), (4, "assistant", "#2: AGAIN", second.run_id),
    ]  # fmt: skip
    assert seen.to_json()["messages"][0]["content"] == "hello"


def test_a_streamed_turn_yields_its_events_then_its_reply(api: Client) -> None:
    agent = api.create_agent(ECHO)["id"]
    conversation = api.create_conversation(agent).id
    with api.stream_message(conversation, "hi") as turn:
        assert turn.run.status == "queued" and turn.conversation_id == conversation
        events = list(turn)
        assert list(turn) == []  # the turn has ended: nothing more to follow
        done = turn.result()
    assert all(isinstance(e, RunEvent) for e in events)
    assert events == api.run_events(turn.run_id)  # every event once, in order
    assert events[0].type == "run.started"
    assert ("node.succeeded", "reply") in {(e.type, e.node_id) for e in events}
    assert (events[-1].type, events[-1].data) == (
        "run.succeeded",
        {"outputs": {"answer": "#1: HI"}},
    )
    assert (done.reply, done.run.status) == ("#1: HI", "succeeded")


def test_a_turn_followed_again_after_hanging_up_misses_nothing(api: Client) -> None:
    agent = api.create_agent(ASKING)["id"]
    conversation = api.create_conversation(agent).id
    turn = api.stream_message(conversation, "go")
    before: list[RunEvent] = []
    for event in turn:
        before.append(event)
        if event.type == "node.waiting":
            break
    turn.close()  # hang up while the turn waits for its form: it goes on

    with pytest.raises(Conflict, match="still answering"):  # one turn at a time
        api.send_message(conversation, "too soon")
    [task] = api.list_tasks()
    assert (task.run_id, task.node_id) == (turn.run_id, "ask")
    api.answer_input(turn.run_id, "ask", {"ok": True})

    after = list(turn)  # resumes after the last event read
    assert before + after == api.run_events(turn.run_id)
    assert turn.result().reply == "go, ok=True"


def test_a_failed_turn_has_no_reply(api: Client) -> None:
    conversation = api.create_conversation(api.create_agent(BROKEN)["id"]).id
    turn = api.send_message(conversation, "hello")
    assert (turn.reply, turn.run.status) == (None, "failed")
    assert turn.run.error is not None and turn.run.error["node_id"] == "reply"
    assert [m.role for m in api.get_conversation(conversation).messages] == ["user"]


def test_what_cannot_be_said_is_refused(api: Client) -> None:
    evented = api.create_agent({**ECHO, "name": "evented", "input_mode": "event"})["id"]
    with pytest.raises(InvalidInput, match="takes events"):
        api.create_conversation(evented)
    conversation = api.create_conversation(api.create_agent(ECHO)["id"]).id
    with pytest.raises(InvalidInput) as caught:
        api.stream_message(conversation, "   ")  # refused when sent, before any event
    assert [e.loc for e in caught.value.errors] == ["/content"]
    with pytest.raises(NotFound):
        api.get_conversation("conversation.nope")
    with pytest.raises(NotFound):
        api.send_message("conversation.nope", "hello")
    with pytest.raises(NotFound):
        api.create_conversation("agent.nope")


def test_waiting_for_a_turn_gives_up_after_the_timeout(api: Client, client: TestClient) -> None:
    client.app.state.services.runs.keepalive = 0.05  # type: ignore[attr-defined]
    conversation = api.create_conversation(api.create_agent(ASKING)["id"]).id
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.3s"):
        api.send_message(conversation, "go", timeout=0.3)
    [run] = api.list_runs()
    assert run.status == "waiting"  # the turn goes on
