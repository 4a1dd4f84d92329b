"""dhub's agents and runs in A2A's shapes (the SDK's protocol buffers): an agent's card, a run
as a task, and a message's parts read as an ``Ask`` (docs/a2a.md).

A task is read from its run every time (services/a2a_tasks.py): its state is the run's status
(a run waiting for a person is ``input-required``, its status message saying where to answer,
as the MCP server says it), its one artifact the run's outputs once it succeeded.
"""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Artifact,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from dhub.runtime.run_writer import chat_reply
from dhub.services.a2a_tasks import Ask, Delegate
from dhub.services.agent_tools import asks_person, outcome
from dhub.services.types import RunRecord

PREFIX = "/a2a/agents"
CARD_PATH = "/.well-known/agent-card.json"
TEXT, JSON = "text/plain", "application/json"
_STATES = {
    "queued": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    "waiting": TaskState.TASK_STATE_WORKING,  # for a timer, a sub-run: still working
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
_TYPES = {"string": "text", "number": "number", "boolean": "true or false",
          "object": "JSON object", "array": "JSON array"}  # fmt: skip


def agent_url(base: str, agent_id: str) -> str:
    """Where an agent's JSON-RPC endpoint is; its card is at this URL + CARD_PATH."""
    return f"{base}{PREFIX}/{agent_id}"


def card(agent: Delegate, base: str) -> AgentCard:
    """The agent's card: one skill (what the agent takes and answers), its JSON-RPC endpoint
    for A2A 1.0 and 0.3 clients alike, and the bearer token it requires."""
    url = agent_url(base, agent.agent_id)
    inputs = [TEXT] if agent.chat else [JSON, TEXT]
    return AgentCard(
        name=agent.title,
        description=agent.description,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=version
            )
            for version in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        provider=AgentProvider(organization="dhub", url=base),
        version=str(agent.version),  # the agent's version: its card changes with it
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="A dhub API token: Authorization: Bearer <token>"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=inputs,
        default_output_modes=[TEXT, JSON],
        skills=[
            AgentSkill(
                id=agent.agent_id,
                name=agent.name,
                description=f"{agent.description}\n\n{_takes(agent)}",
                tags=["chat"] if agent.chat else ["event"],
                input_modes=inputs,
                output_modes=[TEXT, JSON],
            )
        ],
    )


def _takes(agent: Delegate) -> str:
    """What a message to the agent holds, in words (the card has no place for a schema)."""
    if agent.chat:
        return (
            "Send a message as text; the answer is the agent's reply (text, and its outputs "
            "as data). Send the contextId of an earlier task to continue that conversation."
        )
    properties: dict[str, Any] = agent.input_schema.get("properties", {})
    required = set(agent.input_schema.get("required", []))
    lines = []
    for name, prop in properties.items():
        kind = _TYPES.get(prop.get("type", "string"), "text")
        need = "required" if name in required else "optional"
        if "default" in prop:
            need = f"default {json_format.MessageToJson(_value(prop['default']))}"
        about = f": {prop['description']}" if prop.get("description") else ""
        lines.append(f"- {name} ({kind}, {need}){about}")
    plain = f" Plain text fills '{agent.text_input}'." if agent.text_input else ""
    listed = "\n".join(lines) if lines else "(it takes none)"
    return (
        f"Send its inputs as a JSON object in a data part (or as the text).{plain} Inputs:\n"
        f"{listed}\nThe answer is the run's outputs, as data."
    )


def task(run: RunRecord, base: str) -> Task:
    """The task a run is, now."""
    found = Task(id=run.id, context_id=context_of(run), status=status(run, base))
    if run.status == "succeeded":
        found.artifacts.append(artifact(run))
    found.metadata.update({"dhub_run_url": f"{base}/api/v1/runs/{run.id}"})
    return found


def context_of(run: RunRecord) -> str:
    return run.conversation_id or run.id


def status(run: RunRecord, base: str) -> TaskStatus:
    """The run's status as a task's: its state, and a message saying why it failed, where a
    person answers it, or where to follow it (none once it succeeded: see its artifact)."""
    at = Timestamp()
    at.FromMilliseconds(run.updated_at)
    state = TaskState.TASK_STATE_INPUT_REQUIRED if asks_person(run) else _STATES[run.status]
    found = TaskStatus(state=state, timestamp=at)
    if run.status != "succeeded":
        said = outcome(run, run.conversation_id, base)
        found.message.CopyFrom(
            Message(
                message_id=f"{run.id}.{run.step_count}",
                context_id=context_of(run),
                task_id=run.id,
                role=Role.ROLE_AGENT,
                # MCP's sentence (services/agent_tools.py), less the JSON it appends: here
                # that is the data part.
                parts=[Part(text=said.text.split("\n{", 1)[0]), Part(data=_value(said.result))],
            )
        )
    return found


def artifact(run: RunRecord) -> Artifact:
    """A succeeded run's outputs: as text (a chat agent's reply; else the outputs as JSON) and
    as data."""
    outputs = run.outputs or {}
    text = chat_reply(outputs) if run.conversation_id else json_format.MessageToJson(
        _value(outputs), indent=None)  # fmt: skip
    return Artifact(
        artifact_id=f"{run.id}.outputs",
        name="outputs",
        parts=[Part(text=text, media_type=TEXT), Part(data=_value(outputs), media_type=JSON)],
    )


def ask(message: Message) -> Ask:
    """A message's text parts (joined by blank lines) and its one data part (an object).
    Files are refused, naming the part: no dhub agent reads them here."""
    texts: list[str] = []
    data: dict[str, Any] | None = None
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = json_format.MessageToDict(part.data)
            if not isinstance(value, dict) or data is not None:
                raise InvalidParamsError(
                    f"message.parts[{index}]: send the inputs as one data part holding a JSON "
                    "object."
                )
            data = value
        else:
            raise InvalidParamsError(
                f"message.parts[{index}] is a file: dhub agents take text and data parts."
            )
    text = "\n\n".join(texts) if texts else None
    return Ask(text, data, message.context_id or None)


def _value(value: Any) -> struct_pb2.Value:
    return json_format.ParseDict(value, struct_pb2.Value())
