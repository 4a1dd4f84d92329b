"""The OpenAI-compatible API (/v1, docs/openai.md) through the official ``openai`` client,
unchanged, pointed at the app (SQLite and PostgreSQL): models are the chat agents the caller
may run, and nothing else; a chat completion or a response is a turn of a conversation, with
its usage; a turn that waits for a person says where to answer; bad input is OpenAI's 400."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fastapi.testclient import TestClient

from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.services.builtins import shipped
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_cli_chat import ASKING, BROKEN
from tests.integration.test_conversations_api import ECHO, finished, ok
from tests.integration.test_llm_runs_api import app_client
from tests.integration.test_sharing_api import World
from tests.support.wire import OpenAIReply
from tests.support.wire import openai_wire as ow
from tests.support.wire.openai_wire import OpenAIServer

API = "/api/v1"
BUILTIN_CHAT = {b.spec.name for b in shipped() if b.spec.input_mode == "chat"}
GONE = {"error": {"message": "The model 'X' does not exist or you do not have access to it.",
                  "type": "invalid_request_error", "param": "model",
                  "code": "model_not_found"}}  # fmt: skip
# A chat agent whose answer is a model's: its usage is the model call's.
ASKED = {
    "name": "asked", "description": "", "mode": "workflow", "input_mode": "chat",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "message", "type": "string"}]}},
        {"id": "think", "type": "llm", "config": {
            "model_provider": "openai", "model": "gpt-4o-mini", "prompt": "{{ sys.message }}",
            "reasoning_effort": "none", "output": "answer"}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "answer", "type": "string", "value": "{{ answer }}"}]}},
    ],
    "edges": [{"source": "start", "target": "think"}, {"source": "think", "target": "end"}],
}  # fmt: skip


def sdk(client: TestClient, token: str = ADMIN_TOKEN, retries: int = 0) -> openai.OpenAI:
    """The official client, unchanged, its HTTP going into the app through the TestClient."""
    return openai.OpenAI(
        base_url=f"{client.base_url}/v1", api_key=token, http_client=client, max_retries=retries
    )


def agent(client: TestClient, doc: dict[str, Any], **extra: Any) -> str:
    return str(ok(client.post(f"{API}/agents", json={**doc, **extra}), 201)["id"])


def conversation(client: TestClient, conversation_id: str) -> list[tuple[str, str]]:
    seen = ok(client.get(f"{API}/conversations/{conversation_id}"))
    return [(m["role"], m["content"]) for m in seen["messages"]]


def gone(response: Any, model: str) -> dict[str, Any]:
    """A 404 body with the model's name taken out, to compare with another's."""
    assert response.status_code == 404, response.text
    body: dict[str, Any] = response.json()
    body["error"]["message"] = body["error"]["message"].replace(f"'{model}'", "'X'")
    return body


# --- what a caller must not reach ------------------------------------------------------------


def test_models_are_exactly_the_chat_agents_the_caller_may_run(client: TestClient) -> None:
    w = World(client)
    sam = w.user("sam")
    secret = w.marking("secret")  # sam does not hold it
    shared = agent(client, ECHO, name="shared")
    viewed = agent(client, ECHO, name="viewed")
    marked = agent(client, ECHO, name="marked")
    agent(client, ECHO, name="unshared")
    evented = agent(client, ECHO, name="evented", input_mode="event")
    for agent_id, scope in ((shared, "runner"), (viewed, "viewer"), (marked, "editor"),
                            (evented, "runner")):  # fmt: skip
        body = {"principal_id": sam, "scope": scope}
        ok(client.post(f"{API}/agents/{agent_id}/grants", json=body), 201)
    ok(client.post(f"{API}/agents/{marked}/markings", json={"marking_id": secret}))
    own = ok(client.post(f"{API}/agents", json={**ECHO, "name": "own"}, headers=w.as_(sam)), 201)

    listed = sdk(client, w.tokens[sam]).models.list()
    assert {m.id for m in listed.data} == BUILTIN_CHAT | {"shared", "own"}
    mine = next(m for m in listed.data if m.id == "own")
    assert (mine.object, mine.owned_by) == ("model", sam) and mine.created > 0
    # The admin (who holds the marking) runs every chat agent.
    everything = {m.id for m in sdk(client).models.list().data}
    assert everything == BUILTIN_CHAT | {"shared", "viewed", "marked", "unshared", "own"}
    assert own["id"]

    # Naming what sam cannot run answers exactly as a name or id that never existed.
    headers = w.as_(sam)
    nothing = gone(client.get("/v1/models/nothing", headers=headers), "nothing")
    assert nothing == GONE
    for model in ("viewed", viewed, "marked", marked, "unshared", "agent.nothing"):
        chat = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        assert gone(client.post("/v1/chat/completions", json=chat, headers=headers),
                    model) == GONE  # fmt: skip
        asked = {"model": model, "input": "hi"}
        assert gone(client.post("/v1/responses", json=asked, headers=headers), model) == GONE
        assert gone(client.get(f"/v1/models/{model}", headers=headers), model) == GONE
    with pytest.raises(openai.NotFoundError) as refused:
        sdk(client, w.tokens[sam]).chat.completions.create(
            model="marked", messages=[{"role": "user", "content": "hi"}]
        )
    assert (refused.value.code, refused.value.param) == ("model_not_found", "model")
    assert ok(client.get(f"{API}/conversations", headers=headers))["data"] == []


def test_someone_elses_conversation_or_response_cannot_be_continued(client: TestClient) -> None:
    w = World(client)
    sam = w.user("sam")
    echo = agent(client, ECHO)
    ok(client.post(f"{API}/agents/{echo}/grants", json={"principal_id": sam, "scope": "runner"}),
       201)  # fmt: skip
    admins = sdk(client).responses.with_raw_response.create(model="echo", input="mine")
    theirs = admins.headers["X-Dhub-Conversation"]
    response_id = admins.parse().id
    headers = w.as_(sam)
    chat = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}

    def refused(body: dict[str, Any], extra: dict[str, str], param: str) -> dict[str, Any]:
        answer = client.post("/v1/chat/completions" if "messages" in body else "/v1/responses",
                             json=body, headers={**headers, **extra})  # fmt: skip
        assert answer.status_code == 404, answer.text
        error: dict[str, Any] = answer.json()["error"]
        assert (error["param"], error["code"]) == (param, "conversation_not_found")
        return {**error, "message": None}

    own = refused(chat, {"X-Dhub-Conversation": theirs}, "conversation")
    assert refused(chat, {"X-Dhub-Conversation": "conversation.nothing"}, "conversation") == own
    assert refused({**chat, "user": theirs}, {}, "conversation") == own
    previous = {"model": "echo", "input": "hi", "previous_response_id": response_id}
    mine = refused(previous, {}, "previous_response_id")
    nothing = {**previous, "previous_response_id": "resp_run.nothing"}
    assert refused(nothing, {}, "previous_response_id") == mine
    assert conversation(client, theirs) == [("user", "mine"), ("assistant", "#1: MINE")]


# --- turns -----------------------------------------------------------------------------------


def test_chat_completions_continue_a_conversation(client: TestClient) -> None:
    echo = agent(client, ECHO)
    api = sdk(client)
    say = [{"role": "system", "content": "ignored"}, {"role": "user", "content": "hello"}]
    raw = api.chat.completions.with_raw_response.create(model="echo", messages=say)  # type: ignore[arg-type]
    chat = raw.headers["X-Dhub-Conversation"]
    first = raw.parse()
    assert first.object == "chat.completion" and first.model == "echo"
    assert first.choices[0].message.content == "#1: HELLO"
    assert first.choices[0].finish_reason == "stop" and first.choices[0].message.role == "assistant"
    assert first.usage is not None and first.usage.total_tokens == 0  # no model was called
    assert (first.model_extra or {})["dhub"]["conversation_id"] == chat
    # Continued by the header, or by ``user``; the model named by its id as well.
    again = api.chat.completions.create(
        model=echo, messages=[{"role": "user", "content": [{"type": "text", "text": "again"}]}],
        extra_headers={"X-Dhub-Conversation": chat},
    )  # fmt: skip
    third = api.chat.completions.create(
        model="echo", messages=[{"role": "user", "content": "more"}], user=chat
    )
    assert again.choices[0].message.content == "#2: AGAIN"
    assert third.choices[0].message.content == "#3: MORE"
    assert len(conversation(client, chat)) == 6
    fresh = api.chat.completions.create(model="echo", messages=[{"role": "user", "content": "x"}])
    assert fresh.choices[0].message.content == "#1: X"  # no conversation named: a new one


def test_a_streamed_chat_completion(client: TestClient) -> None:
    agent(client, ECHO)
    stream = sdk(client).chat.completions.create(
        model="echo", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "#1: HI"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 0


def test_responses_continue_by_previous_response_id_and_stream(client: TestClient) -> None:
    agent(client, ECHO)
    api = sdk(client)
    first = api.responses.create(model="echo", input="hello")
    assert first.object == "response" and first.status == "completed"
    assert first.output_text == "#1: HELLO" and first.id.startswith("resp_")
    given: Any = [{"role": "user", "content": [{"type": "input_text", "text": "again"}]}]
    second = api.responses.create(model="echo", input=given, previous_response_id=first.id)
    assert second.output_text == "#2: AGAIN" and second.previous_response_id == first.id
    events = list(api.responses.create(model="echo", input="more", stream=True,
                                       previous_response_id=second.id))  # fmt: skip
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and "response.output_text.delta" in kinds
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "#3: MORE"
    done = events[-1]
    assert done.type == "response.completed" and done.response.output_text == "#3: MORE"
    # The SDK's own stream helper assembles the same answer from the events.
    with api.responses.stream(model="echo", input="last", previous_response_id=done.response.id
                              ) as helper:  # fmt: skip
        assert helper.get_final_response().output_text == "#4: LAST"


@pytest.fixture
def modelled(settings: Settings, openai_server: OpenAIServer) -> Iterator[TestClient]:
    entry = EntryConfig(type="openai", base_url=openai_server.base_url,
                        api_key=openai_server.api_key)  # fmt: skip
    with app_client(settings, ProvidersConfig(entries={"openai": entry})) as client:
        yield client


def test_usage_is_the_runs(modelled: TestClient, openai_server: OpenAIServer) -> None:
    agent(modelled, ASKED)
    api = sdk(modelled)
    openai_server.queue(OpenAIReply("Forty-two.", usage=ow.Usage(31, 6, cached_tokens=4)))
    said = api.chat.completions.create(model="asked", messages=[{"role": "user", "content": "?"}])
    assert said.choices[0].message.content == "Forty-two."
    assert said.usage is not None
    assert (said.usage.prompt_tokens, said.usage.completion_tokens, said.usage.total_tokens) == (
        31, 6, 37)  # fmt: skip
    assert said.usage.prompt_tokens_details is not None
    assert said.usage.prompt_tokens_details.cached_tokens == 4
    openai_server.queue(OpenAIReply("Seven.", usage=ow.Usage(12, 2)))
    answered = api.responses.create(model="asked", input="and?")
    assert answered.output_text == "Seven." and answered.usage is not None
    assert (answered.usage.input_tokens, answered.usage.output_tokens) == (12, 2)


def test_a_turn_that_waits_for_a_person_says_where_to_answer(client: TestClient) -> None:
    agent(client, ASKING)
    api = sdk(client)
    raw = api.chat.completions.with_raw_response.create(
        model="asking", messages=[{"role": "user", "content": "go"}]
    )
    said = raw.parse()
    run_id = raw.headers["X-Dhub-Run"]
    note = said.choices[0].message.content or ""
    assert said.choices[0].finish_reason == "stop"
    assert f"{client.base_url}/api/v1/runs/{run_id}/inputs/ask" in note, note
    extension = (said.model_extra or {})["dhub"]
    assert extension["status"] == "waiting" and extension["waiting"]["for"] == "input"
    ok(client.post(f"{API}/runs/{run_id}/inputs/ask", json={"values": {"ok": True}}), 202)
    assert finished(client, run_id)["status"] == "succeeded"
    chat = raw.headers["X-Dhub-Conversation"]
    assert conversation(client, chat)[-1] == ("assistant", "go, ok=True")
    # Streamed, the stream ends with the same kind of note.
    events = list(api.responses.create(model="asking", input="again", stream=True,
                                       extra_headers={"X-Dhub-Conversation": chat}))  # fmt: skip
    done = events[-1]
    assert done.type == "response.completed" and "/inputs/ask" in done.response.output_text


def test_a_failed_turn_is_an_error_never_retried(client: TestClient) -> None:
    agent(client, BROKEN)
    api = sdk(client, retries=2)  # the client's default: a retry would be another turn
    with pytest.raises(openai.InternalServerError) as failed:
        api.chat.completions.with_raw_response.create(
            model="broken", messages=[{"role": "user", "content": "hi"}]
        )
    assert failed.value.code == "run_failed" and "failed" in failed.value.message
    chat = failed.value.response.headers["X-Dhub-Conversation"]
    assert conversation(client, chat) == [("user", "hi")]
    stream = api.chat.completions.create(
        model="broken", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError, match="failed"):
        list(stream)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model", "missing"),
        ({"model": "echo", "messages": []}, "messages", "missing"),
        ({"model": "echo", "messages": [{"role": "system", "content": "x"}]}, "messages",
         "missing"),
        ({"model": "echo", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
         "messages[0].content[0]", "invalid_type"),
        ({"model": "echo", "messages": [{"role": "user", "content": "hi"}], "n": 2}, "n",
         "invalid_value"),
        ({"model": "echo", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
         "stream", "invalid_type"),
        ({"model": "evented", "messages": [{"role": "user", "content": "hi"}]}, "model",
         "model_not_chat"),
        ({"model": "twin", "messages": [{"role": "user", "content": "hi"}]}, "model",
         "ambiguous_model"),
    ],
)  # fmt: skip
def test_bad_chat_input_is_a_400_naming_the_param(
    client: TestClient, body: dict[str, Any], param: str, code: str
) -> None:
    agent(client, ECHO)
    agent(client, ECHO, name="evented", input_mode="event")
    folder = ok(client.post(f"{API}/folders", json={"name": "elsewhere"}), 201)["id"]
    agent(client, ECHO, name="twin")
    agent(client, ECHO, name="twin", folder_id=folder)
    answer = client.post("/v1/chat/completions", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)


def test_bad_input_through_the_sdk(client: TestClient) -> None:
    agent(client, ECHO)
    api = sdk(client)
    with pytest.raises(openai.BadRequestError) as bad:
        api.responses.create(model="echo", input="")
    assert bad.value.param == "input"
    with pytest.raises(openai.BadRequestError) as bad:
        api.responses.create(model="echo", input="x", previous_response_id="nope")
    assert bad.value.param == "previous_response_id"
    with pytest.raises(openai.AuthenticationError) as unknown:
        sdk(client, "dhub_wrong").models.list()
    assert unknown.value.code == "invalid_api_key"
    not_json = client.post("/v1/chat/completions", content=b"{", headers={
        "Content-Type": "application/json"})  # fmt: skip
    assert not_json.status_code == 400 and "error" in not_json.json()
    assert client.get("/v1/nothing").json()["error"]["code"] == "not_found"
