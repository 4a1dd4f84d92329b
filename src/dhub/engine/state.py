"""What the stepper reads and writes: the run state, the commands it gives the executor and the
events the executor feeds back (DESIGN.md 3, 4). All of it is plain data, so a run state can be
persisted as JSON and a command or event can cross a process boundary.

Keys. A node that runs at the top level is keyed by its id. A loop body runs once per iteration
and a parallel branch once per run of its node, each in a *frame*: the frame of iteration 2 of
loop ``each`` is ``each#2``, the frame of branch ``total`` of parallel ``agg`` is ``agg@total``,
and a node ``square`` inside it is keyed ``each#2/square``. Frames nest
(``outer#0/inner#3/square``), so every key says exactly which run of a node it is.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

NodeState = Literal["running", "waiting", "succeeded", "failed", "skipped"]
RunStatus = Literal["running", "succeeded", "failed", "cancelled"]


@dataclass
class RunState:
    """Everything a run knows. ``frames``, ``loops``, ``parallels`` and ``asked`` hold the
    bookkeeping of open loop iterations, parallel nodes and pending confirmations."""

    status: RunStatus = "running"
    inputs: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)  # run scope: last writer wins
    node_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # top-level nodes
    nodes: dict[str, NodeState] = field(default_factory=dict)  # node key -> state
    links: dict[str, bool] = field(default_factory=dict)  # resolved link key -> taken
    pending: dict[str, str] = field(default_factory=dict)  # command id -> node key
    timers: dict[str, str] = field(default_factory=dict)  # node key -> its timeout's command id
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    next_command: int = 0
    attempts: dict[str, int] = field(default_factory=dict)  # node key -> failed tries so far
    now: float = 0.0  # the executor's clock at the last event (the stepper has none)
    sys: dict[str, Any] = field(default_factory=dict)  # run_id, agent_id, user_id, ...
    conversation: dict[str, Any] = field(default_factory=dict)
    frames: dict[str, dict[str, Any]] = field(default_factory=dict)
    loops: dict[str, dict[str, Any]] = field(default_factory=dict)  # loop key -> progress
    parallels: dict[str, dict[str, Any]] = field(default_factory=dict)  # parallel key -> branches
    asked: dict[str, dict[str, Any]] = field(default_factory=dict)  # actor key -> arguments
    usage: dict[str, Any] = field(default_factory=dict)  # model tokens so far (engine/usage.py)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)  # react node key -> loop

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        return cls(**copy.deepcopy(data))


# -- commands: what the executor must do --------------------------------------------------------


@dataclass(frozen=True)
class CallFunction:
    """Run user Python (a code node, a tool or an approved actor); answer with ``Done``."""

    command_id: str
    node_id: str
    source: str
    inputs: dict[str, Any]
    timeout: float
    entry: str | None = None
    dependencies: tuple[str, ...] = ()
    frame: str = ""
    network: bool = False  # the function's options allow network access
    parameters: dict[str, Any] | None = None  # JSON schema the inputs must fit (tools, actors)
    outputs: dict[str, Any] | None = None  # name -> JSON schema the result must hold
    decorators: tuple[dict[str, Any], ...] = ()  # {decorator, name, arguments}
    browser: bool = False  # a tool with require_browser: headless Chromium in its sandbox
    # The agent's knowledge tools its code may call (domain/knowledge.py ``for_code``).
    knowledge: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class CallKnowledge:
    """Perform a knowledge operation (a table query, a template render, an ontology search:
    domain/knowledge.py) for the run's user; answer with ``Done``. ``arguments`` hold the
    bound ids already."""

    command_id: str
    node_id: str
    operation: str
    arguments: dict[str, Any]
    frame: str = ""


@dataclass(frozen=True)
class CallModel:
    """One model call of an ``llm`` node; answer with ``Done`` (the text, or the parsed object
    when ``response_schema`` is not empty)."""

    command_id: str
    node_id: str
    model_provider: str
    model: str
    system_prompt: str
    prompt: str
    response_schema: dict[str, Any]
    reasoning_effort: str | None
    frame: str = ""


@dataclass(frozen=True)
class CallChat:
    """One model call of a react loop; answer with ``Done`` whose value is the assistant
    message as JSON (``content``, ``tool_calls`` [{id, name, arguments}], ``reasoning``,
    ``replay``, and ``parsed`` when ``response_schema`` is set). ``messages`` are the
    transcript as JSON (roles user, assistant, tool); ``tools`` are {name, description,
    parameters}."""

    command_id: str
    node_id: str
    model_provider: str
    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    response_schema: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    max_output_tokens: int | None = None
    options: dict[str, Any] | None = None
    frame: str = ""
    path: str = ""  # the delegate (role) loop it is for: call ids from the top loop


@dataclass(frozen=True)
class AwaitInput:
    """Open a human task; answer with ``InputGiven``. ``fields`` are the node's input fields as
    JSON; the timeout is a separate ``SleepUntil`` the stepper tracks itself."""

    command_id: str
    node_id: str
    prompt: str
    fields: list[dict[str, Any]]
    assignees: list[str]
    timeout_at: float | None
    frame: str = ""


@dataclass(frozen=True)
class AwaitConfirmation:
    """Ask a person to approve an actor call; answer with ``Confirmed``."""

    command_id: str
    node_id: str
    actor: str
    arguments: dict[str, Any]
    frame: str = ""


@dataclass(frozen=True)
class SleepUntil:
    """Wake the run (with ``Woke``) at ``at`` (seconds on the executor's clock): a retry delay
    or a timeout."""

    command_id: str
    node_id: str
    at: float
    frame: str = ""


@dataclass(frozen=True)
class Cancel:
    """Abandon these commands (a branch lost, a timeout fired, the run ended): stop the calls,
    close the tasks, drop the timers. Results that still arrive for them are ignored."""

    command_ids: tuple[str, ...]


@dataclass(frozen=True)
class Complete:
    outputs: dict[str, Any]


@dataclass(frozen=True)
class Fail:
    error: dict[str, Any]


Command = (
    CallFunction
    | CallKnowledge
    | CallModel
    | CallChat
    | AwaitInput
    | AwaitConfirmation
    | SleepUntil
    | Cancel
    | Complete
    | Fail
)


# -- events: what the executor feeds back -------------------------------------------------------


@dataclass(frozen=True)
class Done:
    """A call's result: ``value`` when ``ok``, else ``error`` (``kind`` and ``message``)."""

    command_id: str
    ok: bool
    value: Any = None
    error: dict[str, Any] | None = None
    now: float = 0.0
    usage: dict[str, Any] | None = None  # a model call's tokens


@dataclass(frozen=True)
class Woke:
    """A SleepUntil's time has come."""

    command_id: str
    now: float = 0.0


@dataclass(frozen=True)
class InputGiven:
    """A person answered a human task."""

    command_id: str
    values: dict[str, Any]
    responded_by: str | None = None
    now: float = 0.0


@dataclass(frozen=True)
class Confirmed:
    """A person decided on an actor call: approved (maybe with edited arguments) or not."""

    command_id: str
    approve: bool
    arguments: dict[str, Any] | None = None
    reason: str = ""
    by: str | None = None
    now: float = 0.0


@dataclass(frozen=True)
class CancelRun:
    reason: str = ""
    now: float = 0.0


Event = Done | Woke | InputGiven | Confirmed | CancelRun


@dataclass(frozen=True)
class Step:
    state: RunState
    commands: list[Command]
    events: list[dict[str, Any]]  # the trace: node.started / succeeded / failed / skipped / ...


def node_key(frame: str, node_id: str) -> str:
    return f"{frame}/{node_id}" if frame else node_id
