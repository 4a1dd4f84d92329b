"""/a2a on SQLite and PostgreSQL, driven by the official A2A SDK's client against the app
served on a socket: the cards are exactly the agents the caller may run, a task delegated to
an agent runs it as the caller and reads back its result, a run waiting for a person is
``input-required`` saying where to answer, and another caller's task is a random id."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.errors import AgentCardResolutionError
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text, new_message
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from google.protobuf import json_format, struct_pb2

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_conversations_api import ECHO
from tests.integration.test_mcp_server import TRIAGE, builtin_ids
from tests.integration.test_sharing_api import World
from tests.support.served import serving

API = "/api/v1"
T = TypeVar("T")
OUTAGE = {"ticket": "Total outage since 9am"}  # an urgent ticket: waits for a person


@pytest.fixture
def served(settings: Settings) -> Iterator[str]:
    """The app on a real socket, with the demo model answering for every model provider."""
    with serving(create_app(Settings(**{**vars(settings), "demo_model": True}))) as url:
        yield url


@pytest.fixture
def world(served: str) -> Iterator[World]:
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=served, headers=auth, timeout=30) as http:
        yield World(http)  # type: ignore[arg-type]


def agent_url(served: str, agent_id: str) -> str:
    return f"{served}/a2a/agents/{agent_id}"


def with_a2a(
    url: str, token: str, use: Callable[[Client], Awaitable[T]], streaming: bool = True
) -> T:
    """``use`` on the SDK's client for the agent at ``url``, made from the card it resolves
    there with ``token`` (the card needs the token, as every call does)."""

    async def session() -> T:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            config = ClientConfig(httpx_client=http, streaming=streaming)
            async with ClientFactory(config).create(card) as client:
                return await use(client)

    return asyncio.run(session())


def card_of(url: str, token: str) -> AgentCard:
    async def resolve() -> AgentCard:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            return await A2ACardResolver(http, url).get_agent_card()

    return asyncio.run(resolve())


def text(words: str, context_id: str | None = None) -> Message:
    return new_message([Part(text=words)], context_id=context_id, role=Role.ROLE_USER)


def data(value: dict[str, Any]) -> Message:
    part = Part(data=json_format.ParseDict(value, struct_pb2.Value()))
    return new_message([part], role=Role.ROLE_USER)


def send(
    url: str, token: str, message: Message, streaming: bool = True, at_once: bool = False
) -> tuple[list[StreamResponse], Task]:
    """Everything the send answered, and the task as tasks/get reads it afterwards."""

    async def use(client: Client) -> tuple[list[StreamResponse], Task]:
        config = SendMessageConfiguration(return_immediately=at_once)
        request = SendMessageRequest(message=message, configuration=config)
        seen = [event async for event in client.send_message(request)]
        task_id = seen[0].task.id
        return seen, await client.get_task(GetTaskRequest(id=task_id))

    return with_a2a(url, token, use, streaming)


def refusal(url: str, token: str, call: Callable[[Client], Awaitable[Any]]) -> A2AError:
    async def use(client: Client) -> A2AError:
        with pytest.raises(A2AError) as caught:
            await call(client)
        return caught.value

    return with_a2a(url, token, use)


def outputs(task: Task) -> Any:
    [artifact] = task.artifacts
    return json_format.MessageToDict(artifact.parts[1].data)


def cards(served: str, token: str) -> dict[str, dict[str, Any]]:
    listed = httpx.get(f"{served}/a2a/agents", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200, listed.text
    return {c["skills"][0]["id"]: c for c in listed.json()["data"]}


# --- what a caller may reach --------------------------------------------------------------


def test_the_cards_are_exactly_the_agents_the_caller_may_run(world: World, served: str) -> None:
    alice, bob = world.user("alice"), world.user("bob")
    secret = world.marking("secret", [bob])  # bob holds it, alice does not
    mine = world.agent("alices-agent", owners=[alice])
    ran = world.agent("granted", grants={alice: "runner"})
    viewed = world.agent("viewed", grants={alice: "viewer"})  # she may read it, not run it
    unshared = world.agent("unshared")
    classified = world.agent("classified", grants={alice: "runner", bob: "runner"},
                             markings=[secret])  # fmt: skip
    token = world.tokens[alice]
    listed = cards(served, token)
    assert set(listed) == {mine, ran, *builtin_ids(world)}
    auth = {"Authorization": f"Bearer {token}"}
    served_card = httpx.get(f"{agent_url(served, mine)}/.well-known/agent-card.json", headers=auth)
    assert served_card.json() == listed[mine]  # the listing holds the cards themselves
    card = card_of(agent_url(served, mine), token)  # as the SDK reads it
    assert (card.name, card.supported_interfaces[0].url) == ("Support Assistant",
                                                             agent_url(served, mine))  # fmt: skip
    random = "agent.01nosuchagent0000000000000"
    gone = httpx.get(f"{agent_url(served, random)}/.well-known/agent-card.json", headers=auth)
    assert gone.status_code == 404
    hello = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "run.x"}}
    for hidden in (viewed, unshared, classified, random):
        with pytest.raises(AgentCardResolutionError) as caught:
            card_of(agent_url(served, hidden), token)
        assert caught.value.status_code == 404
        for method, url in (("GET", f"{agent_url(served, hidden)}/.well-known/agent-card.json"),
                            ("POST", agent_url(served, hidden))):  # fmt: skip
            answer = httpx.request(method, url, json=hello, headers=auth)
            assert answer.status_code == 404
            assert answer.text == gone.text.replace(random, hidden)  # nothing tells them apart
    assert classified in cards(served, world.tokens[bob])  # it exists, for who may see it


def test_a_card_describes_what_its_agent_takes(world: World, served: str) -> None:
    triage = world.client.post(f"{API}/agents", json=TRIAGE).json()["id"]
    echo = world.client.post(f"{API}/agents", json=ECHO).json()["id"]
    card = card_of(agent_url(served, triage), ADMIN_TOKEN)
    assert (card.name, card.description) == ("Ticket triage", TRIAGE["description"])
    [skill] = card.skills
    assert (skill.id, skill.name) == (triage, "ticket-triage")
    assert list(skill.input_modes) == ["application/json", "text/plain"]
    assert "- ticket (text, required): The ticket text" in skill.description
    assert '- customer (text, default "anonymous")' in skill.description
    assert "Plain text fills 'ticket'." in skill.description
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert "bearer" in card.security_schemes
    chat = card_of(agent_url(served, echo), ADMIN_TOKEN)
    assert list(chat.skills[0].input_modes) == ["text/plain"]
    assert "contextId" in chat.skills[0].description


def test_without_a_valid_token_every_route_is_401(world: World, served: str) -> None:
    agent = world.client.post(f"{API}/agents", json=ECHO).json()["id"]
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        for method, url in (("GET", f"{served}/a2a/agents"),
                            ("GET", f"{agent_url(served, agent)}/.well-known/agent-card.json"),
                            ("POST", agent_url(served, agent))):  # fmt: skip
            refused = httpx.request(method, url, headers=headers, json={})
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Bearer"


def test_a_body_that_is_not_json_rpc_gets_json_rpc_errors(world: World, served: str) -> None:
    agent = world.client.post(f"{API}/agents", json=ECHO).json()["id"]
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "A2A-Version": "1.0"}

    def post(body: bytes) -> dict[str, Any]:
        answer = httpx.post(agent_url(served, agent), content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return dict(answer.json()["error"])

    assert post(b"{not json")["code"] == -32700
    nul = post(b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "a\\u0000"}}')
    assert nul["code"] == -32600 and "NUL" in nul["message"]
    unknown = post(b'{"jsonrpc": "2.0", "id": 1, "method": "Nope", "params": {}}')
    assert unknown["code"] == -32601


# --- delegating a task ----------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [True, False])
def test_a_task_to_a_chat_agent_is_a_turn_of_a_conversation(
    world: World, served: str, streaming: bool
) -> None:
    bob = world.user("bob")
    agent = world.agent("helper", grants={bob: "runner"})  # react, on the demo model
    url, token = agent_url(served, agent), world.tokens[bob]
    seen, task = send(url, token, text("Hello there"), streaming)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    reply = get_artifact_text(task.artifacts[0], "")
    assert reply.startswith("I am the demo model: this server has no model provider"), reply
    run = world.client.get(f"{API}/runs/{task.id}").json()  # the task is the run
    assert (run["user_id"], run["status"]) == (bob, "succeeded")
    if streaming:  # the task as it started, then its changes, its artifact before it completes
        assert seen[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        assert seen[-2].artifact_update.artifact.parts[0].text == reply
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    else:
        assert [s.task for s in seen] == [task]
    _, again = send(url, token, text("And again", task.context_id), streaming)
    assert again.context_id == task.context_id and again.id != task.id
    said = world.client.get(f"{API}/conversations/{task.context_id}").json()["messages"]
    assert [m["role"] for m in said] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in said][::2] == ["Hello there", "And again"]
    assert [m["run_id"] for m in said][1::2] == [task.id, again.id]  # each task a turn's run


def test_a_task_to_a_workflow_agent_runs_it_with_its_inputs(world: World, served: str) -> None:
    triage = world.client.post(f"{API}/agents", json=TRIAGE).json()["id"]
    url = agent_url(served, triage)
    _, task = send(url, ADMIN_TOKEN, data({"ticket": "Checkout page shows an error"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert outputs(task) == {"category": "bug", "summary": "bug from anonymous"}
    assert task.context_id == task.id  # no conversation: the run is its own context
    _, plain = send(url, ADMIN_TOKEN, text("The app crashes"), streaming=False)
    assert outputs(plain) == {"category": "bug", "summary": "bug from anonymous"}

    async def bad(client: Client) -> Any:
        request = SendMessageRequest(message=data({"customer": 3}))
        return [event async for event in client.send_message(request)]

    refused = refusal(url, ADMIN_TOKEN, bad)
    assert isinstance(refused, InvalidParamsError)
    assert "/inputs/ticket: 'ticket' is required (string)." in refused.message


# --- a run that waits for a person ----------------------------------------------------------


@pytest.mark.parametrize("streaming", [True, False])
def test_a_run_waiting_for_a_person_is_input_required(
    world: World, served: str, streaming: bool
) -> None:
    triage = world.client.post(f"{API}/agents", json=TRIAGE).json()["id"]
    url = agent_url(served, triage)
    seen, task = send(url, ADMIN_TOKEN, data(OUTAGE), streaming)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    if streaming:
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    run_url = f"{served}{API}/runs/{task.id}"
    said = get_message_text(task.status.message)
    assert f"answer it at POST {run_url}/inputs/approve" in said
    assert "{" not in said  # the details are the data part
    details = json_format.MessageToDict(task.status.message.parts[1].data)
    assert (details["run_url"], details["answer_url"]) == (run_url, f"{run_url}/inputs/approve")
    answered = world.client.post(details["answer_url"], json={"values": {"escalate": True}})
    assert answered.status_code == 202

    async def done(client: Client) -> Task:
        for _ in range(200):
            found = await client.get_task(GetTaskRequest(id=task.id))
            if found.status.state == TaskState.TASK_STATE_COMPLETED:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError(f"the task did not complete: {found}")

    assert outputs(with_a2a(url, ADMIN_TOKEN, done))["category"] == "bug"


def test_an_actor_call_to_confirm_is_input_required_too(world: World, served: str) -> None:
    """The react support agent, on the demo model, asks to confirm the refund it issues."""
    bob = world.user("bob")
    agent = world.agent("support", grants={bob: "runner"})
    _, task = send(agent_url(served, agent), world.tokens[bob], text("Please refund order A-1001"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    details = json_format.MessageToDict(task.status.message.parts[1].data)
    assert details["waiting"]["for"] == "confirmation"
    run_url = f"{served}{API}/runs/{task.id}"
    assert details["answer_url"] == f"{run_url}/confirmations/{details['waiting']['command_id']}"
    assert f"answer it at POST {details['answer_url']}" in get_message_text(task.status.message)


def test_a_waiting_task_can_be_cancelled_once(world: World, served: str) -> None:
    triage = world.client.post(f"{API}/agents", json=TRIAGE).json()["id"]
    url = agent_url(served, triage)
    _, task = send(url, ADMIN_TOKEN, data(OUTAGE), at_once=True)

    async def cancel(client: Client) -> Task:
        return await client.cancel_task(CancelTaskRequest(id=task.id))

    cancelled = with_a2a(url, ADMIN_TOKEN, cancel)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert world.client.get(f"{API}/runs/{task.id}").json()["status"] == "cancelled"
    assert isinstance(refusal(url, ADMIN_TOKEN, cancel), TaskNotCancelableError)


# --- someone else's task ----------------------------------------------------------------------


def test_another_callers_task_is_answered_as_a_random_id(world: World, served: str) -> None:
    """Bob may run the agent, and the admin may read every run through the API: neither
    reaches a task through A2A that is not their own."""
    bob = world.user("bob")
    triage = world.client.post(f"{API}/agents", json=TRIAGE).json()["id"]
    world.client.post(f"{API}/agents/{triage}/grants", json={"principal_id": bob,
                                                               "scope": "runner"})  # fmt: skip
    echo = world.client.post(f"{API}/agents", json=ECHO).json()["id"]
    url = agent_url(served, triage)
    _, admins = send(url, ADMIN_TOKEN, data(OUTAGE), at_once=True)
    _, bobs = send(url, world.tokens[bob], data(OUTAGE), at_once=True)
    _, chat = send(agent_url(served, echo), ADMIN_TOKEN, text("hi"))
    random = "run.01nosuchrun00000000000000"

    def answers(token: str, agent: str, task_id: str) -> list[tuple[type, str]]:
        async def get(client: Client) -> Any:
            return await client.get_task(GetTaskRequest(id=task_id))

        async def cancel(client: Client) -> Any:
            return await client.cancel_task(CancelTaskRequest(id=task_id))

        async def subscribe(client: Client) -> Any:
            return [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]

        found = [refusal(agent_url(served, agent), token, c) for c in (get, cancel, subscribe)]
        return [(type(e), e.message.replace(task_id, "<id>")) for e in found]

    unknown = answers(world.tokens[bob], triage, random)
    assert {kind for kind, _ in unknown} == {TaskNotFoundError}
    assert answers(world.tokens[bob], triage, admins.id) == unknown
    assert answers(ADMIN_TOKEN, triage, bobs.id) == unknown  # an admin's view is the API's
    assert answers(ADMIN_TOKEN, triage, chat.id) == unknown  # a task of another agent
    assert world.client.get(f"{API}/runs/{bobs.id}").json()["status"] == "waiting"  # untouched

    async def continued(client: Client) -> Any:  # the admin's conversation, as bob's context
        message = text("mine now?", chat.context_id)
        return [e async for e in client.send_message(SendMessageRequest(message=message))]

    world.client.post(f"{API}/agents/{echo}/grants", json={"principal_id": bob,
                                                             "scope": "runner"})  # fmt: skip
    refused = refusal(agent_url(served, echo), world.tokens[bob], continued)
    assert isinstance(refused, InvalidParamsError)
    assert f"No conversation with id '{chat.context_id}' is yours" in refused.message


# --- A2A 0.3 clients --------------------------------------------------------------------------


def test_a_0_3_client_sends_message_send(world: World, served: str) -> None:
    echo = world.client.post(f"{API}/agents", json=ECHO).json()["id"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "text", "text": "hello"}]}}}  # fmt: skip
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    answer = httpx.post(agent_url(served, echo), json=body, headers=headers, timeout=60)
    result = answer.json()["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "completed")
    assert result["artifacts"][0]["parts"][0]["text"] == "#1: HELLO"
    card = httpx.get(f"{agent_url(served, echo)}/.well-known/agent-card.json", headers=headers)
    assert (card.json()["url"], card.json()["protocolVersion"]) == (agent_url(served, echo), "0.3")
