"""The access matrix for runs, events, tasks and conversations (DESIGN.md sections 2 and 4,
docs/runs.md) as test data, checked over HTTP on both databases, like test_access_matrix.py.

The world, built through the API by the admin (``user.admin``, which is no row below):

- one marking M, held as the ``holds`` column of PRINCIPALS says;
- agents owned by olivia alone, marked M, each shared the same way: the ``grant`` column of
  PRINCIPALS, plus group.crew (gina) runner and group.reviewers (gail) viewer:

  - ``form``: an event workflow whose human_input node ``review`` is assigned to user.asa,
    group.reviewers, user.noah (who cannot read the agent) and user.mona (who lacks M);
  - ``open``: the same form with no assignees (so its run's user answers it);
  - ``refund``: an actor_call whose actor needs confirmation (confirmations have no assignees);
  - ``chat``: a chat workflow that echoes and counts turns;

- probes, all started by rita (a runner): ``done``, an ``open`` run she answered (it
  succeeded); waiting ``form``, ``open`` and ``refund`` runs; ``chat``, a conversation with one
  finished turn.

Reads act on the probes. An allowed cancel, answer, confirmation or chat message acts on a fresh
run (or conversation) of rita's and is followed to its end, so "allowed" means the run really
moved on; a refused one acts on the probe, which must stay as it was.

Columns (expected status; for ``list`` 200 means the probe is listed):

- RUNS: start = POST /agents/{form}/runs, event = POST /agents/{form}/events, get = GET
  /runs/{done}, list = GET /runs?agent_id={open}, events = GET /runs/{done}/events (JSON),
  stream = the same as SSE (200: the stream replays exactly the stored log), cancel = POST
  /runs/{id}/cancel on a waiting form run, mine = what GET /runs lists: ``own`` (exactly the
  runs the caller started, some), ``all`` (every run) or ``none`` (nothing);
- TASKS: form / open = POST /runs/{id}/inputs/review, confirm = POST
  /runs/{id}/confirmations/{call_id}, tasks = which of the form / open / refund probes' tasks
  GET /tasks shows the caller;
- CHATS: converse = POST /agents/{chat}/conversations, read = GET /conversations/{chat}, say =
  POST /conversations/{id}/messages on a conversation of rita's.

The rules (DESIGN.md 2): runs, tasks and conversations are seen through their agent (markings
bind admins too); tasks are answered by the run's user or the node's assignees, never by an
admin as such; a conversation takes messages only from the user who started it.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from tests.integration.test_access_matrix import table
from tests.integration.test_conversations_api import ECHO
from tests.integration.test_runs_api import REFUND, sse
from tests.integration.test_sharing_api import AGENTS, API, World, ok

RUNS_URL = f"{API}/runs"
RITA = "user.rita"  # starts every probe

PRINCIPALS = """
user    admin  holds  member_of  grant
olivia  no     M      -          owner
adam    yes    M      -          -
alan    yes    -      -          -
vera    no     M      -          viewer
rita    no     M      -          runner
eddie   no     M      -          editor
gina    no     M      crew       -
asa     no     M      -          viewer
gail    no     M      reviewers  -
noah    no     M      -          -
mona    no     -      -          runner
ursula  no     M      -          -
"""

RUNS = """
user    start  event  get  list  events  stream  cancel  mine
olivia  202    202    200  200   200     200     200     own
adam    202    202    200  200   200     200     200     all
alan    404    404    404  404   404     404     404     none
vera    403    403    200  200   200     200     403     none
rita    202    202    200  200   200     200     200     own
eddie   202    202    200  200   200     200     200     own
gina    202    202    200  200   200     200     200     own
asa     403    403    200  200   200     200     403     none
gail    403    403    200  200   200     200     403     none
noah    404    404    404  404   404     404     404     none
mona    404    404    404  404   404     404     404     none
ursula  404    404    404  404   404     404     404     none
"""

TASKS = """
user    form  open  confirm  tasks
olivia  403   403   403      -
adam    403  403  403     -
alan    404   404   404      -
vera    403   403   403      -
rita    202  202   202      form,open,refund
eddie   403   403   403      -
gina    403   403   403      -
asa     202   403   403      form
gail    202   403   403      form
noah    404   404   404      -
mona    404   404   404      -
ursula  404   404   404      -
"""

CHATS = """
user    converse  read  say
olivia  201       404   404
adam    201       200   403
alan    404       404  404
vera    403       404   404
rita    201       200   202
eddie   201       404   404
gina    201       404   404
asa     403       404   404
gail    403       404   404
noah    404       404   404
mona    404       404   404
ursula  404       404   404
"""

INPUTS: dict[str, dict[str, Any]] = {
    "form": {"ticket": "T-1"},
    "open": {"ticket": "T-2"},
    "refund": {"amount": 30},
}
PROBE_TASKS = ("form", "open", "refund")
SCOPES = ("viewer", "runner", "editor")


def form(name: str, assignees: list[str]) -> dict[str, Any]:
    """A form that asks whether to approve the ticket; the run returns the answer and who
    gave it."""
    return {
        "name": name, "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "ticket", "type": "string"}]}},
            {"id": "review", "type": "human_input", "config": {
                "prompt": "Approve {{ ticket }}?", "assignees": assignees,
                "input_fields": [{"name": "approved", "type": "boolean"}]}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "approved", "type": "boolean", "value": "{{ approved }}"},
                {"name": "by", "type": "string", "value": "{{ responded_by }}"}]}},
        ],
        "edges": [{"source": "start", "target": "review"}, {"source": "review", "target": "end"}],
    }  # fmt: skip


def uid(name: str) -> str:
    return f"user.{name}"


def stable(thing: dict[str, Any]) -> dict[str, Any]:
    """What identifies a finished run or a conversation between turns (timestamps aside)."""
    keys = ("id", "user_id", "status", "outputs", "messages", "variables")
    return {k: thing[k] for k in keys if k in thing}


def cells(text: str) -> dict[tuple[str, str], str]:
    """(user, column) -> the cell, from a matrix table."""
    return {
        (row["user"], column): value
        for row in table(text)
        for column, value in row.items()
        if column != "user"
    }


class RunWorld:
    """The world above; agents and probes are made when first needed."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.w = w = World(client)
        people = table(PRINCIPALS)
        for row in people:
            w.user(row["user"], admin=row["admin"] == "yes")
        self.groups = {name: w.group(name) for name in ("crew", "reviewers")}
        self.marks = {"M": w.marking("m")}
        for row in people:
            if row["member_of"] != "-":
                w.join(self.groups[row["member_of"]], uid(row["user"]))
            if row["holds"] == "M":
                w.hold(self.marks["M"], uid(row["user"]))
        self.grants = {uid(r["user"]): r["grant"] for r in people if r["grant"] in SCOPES}
        self.grants.update({self.groups["crew"]: "runner", self.groups["reviewers"]: "viewer"})
        self.assignees = [uid("asa"), self.groups["reviewers"], uid("noah"), uid("mona")]
        self.agents: dict[str, str] = {}
        self.probes: dict[str, dict[str, Any]] = {}
        self.started: dict[str, str] = {}  # run id -> the user who started it

    # -- building -------------------------------------------------------------------------------

    def agent(self, kind: str) -> str:
        if kind not in self.agents:
            doc = {
                "form": lambda: form("form", self.assignees),
                "open": lambda: form("open", []),
                "refund": lambda: {**REFUND, "name": "refund"},
                "chat": lambda: {**ECHO, "name": "chat"},
            }[kind]()
            agent_id: str = ok(self.client.post(AGENTS, json=doc), 201)["id"]
            url = f"{AGENTS}/{agent_id}"
            for principal_id, scope in self.grants.items():
                body = {"principal_id": principal_id, "scope": scope}
                ok(self.client.post(f"{url}/grants", json=body), 201)
            ok(self.client.post(f"{url}/markings", json={"marking_id": self.marks["M"]}))
            ok(self.client.patch(url, json={"owners": [uid("olivia")]}))
            self.agents[kind] = agent_id
        return self.agents[kind]

    def start(self, user_id: str, kind: str, how: str = "runs") -> Any:
        """POST /agents/{id}/runs (or /events, ``how="events"``) as the user."""
        if how == "runs":
            body: dict[str, Any] = {"inputs": INPUTS[kind]}
        else:
            body = {"type": "ticket.created", "payload": INPUTS[kind]}
        response = self.w.call(user_id, "POST", f"{AGENTS}/{self.agent(kind)}/{how}", body)
        if response.status_code in (200, 202):
            self.started[response.json()["id"]] = user_id
        return response

    def until(self, run_id: str, *statuses: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            run: dict[str, Any] = ok(self.client.get(f"{RUNS_URL}/{run_id}"))
            if run["status"] in statuses:
                return run
            assert time.monotonic() < deadline, f"run {run_id} stayed {run['status']}"
            time.sleep(0.02)

    def waiting(self, kind: str) -> dict[str, Any]:
        """A fresh run of rita's, waiting for its person."""
        run = ok(self.start(RITA, kind), 202)
        return self.until(run["id"], "waiting")

    def conversation(self) -> str:
        """A fresh conversation of rita's."""
        url = f"{AGENTS}/{self.agent('chat')}/conversations"
        return str(ok(self.w.call(RITA, "POST", url), 201)["id"])

    def probe(self, name: str) -> dict[str, Any]:
        if name not in self.probes:
            if name == "done":
                run = self.waiting("open")
                assert self.answer(RITA, run).status_code == 202
                self.probes[name] = self.until(run["id"], "succeeded")
            elif name == "chat":
                chat_id = self.conversation()
                assert self.say(RITA, chat_id, "hello") == "202"
                self.probes[name] = ok(self.client.get(f"{API}/conversations/{chat_id}"))
            else:
                self.probes[name] = self.waiting(name)
        return self.probes[name]

    # -- acting ---------------------------------------------------------------------------------

    def answer(self, user_id: str, run: dict[str, Any]) -> Any:
        """Answer what the run waits for: approve the form, or the actor call."""
        url, waiting = f"{RUNS_URL}/{run['id']}", run["waiting"]
        if waiting["for"] == "input":
            body: dict[str, Any] = {"values": {"approved": True}}
            return self.w.call(user_id, "POST", f"{url}/inputs/{waiting['node_id']}", body)
        assert waiting["for"] == "confirmation", waiting
        body = {"approve": True}
        return self.w.call(user_id, "POST", f"{url}/confirmations/{waiting['command_id']}", body)

    def say(self, user_id: str, chat_id: str, text: str) -> str:
        """A message; when accepted, the turn runs to its end and its reply is saved."""
        url = f"{API}/conversations/{chat_id}"
        before = ok(self.client.get(url))["messages"]
        response = self.w.call(user_id, "POST", f"{url}/messages", {"content": text})
        if response.status_code != 202:
            if ok(self.client.get(url))["messages"] != before:
                return f"{response.status_code}, yet the conversation changed"
            return str(response.status_code)
        self.started[response.json()["id"]] = user_id
        self.until(response.json()["id"], "succeeded", "failed", "cancelled")
        after = ok(self.client.get(url))["messages"][len(before) :]
        turn = len(before) // 2 + 1
        said = [(m["role"], m["content"]) for m in after]
        if said != [("user", text), ("assistant", f"#{turn}: {text.upper()}")]:
            return f"202, but the conversation got {said}"
        return "202"

    def act(self, user: str, column: str, expected: str) -> str:
        """Do the column's action as the user; what happened, in the table's terms."""
        if column in table(RUNS)[0]:
            return self.run_action(uid(user), column, expected)
        if column in table(TASKS)[0]:
            return self.task_action(uid(user), column, expected)
        return self.chat_action(uid(user), column, expected)

    def run_action(self, user_id: str, column: str, expected: str) -> str:
        if column in ("start", "event"):
            response = self.start(user_id, "form", "runs" if column == "start" else "events")
            if response.status_code == 202 and response.json()["user_id"] != user_id:
                return f"202, but the run is {response.json()['user_id']}'s"
            return str(response.status_code)
        if column == "cancel":
            return self.cancel(user_id, expected)
        if column == "mine":
            return self.mine(user_id)
        done = self.probe("done")
        url = f"{RUNS_URL}/{done['id']}"
        stored = ok(self.client.get(f"{url}/events"))["data"]
        if column == "get":
            response = self.w.call(user_id, "GET", url)
            if response.status_code == 200 and stable(response.json()) != stable(done):
                return "200, but another run"
        elif column == "list":
            query = f"{RUNS_URL}?agent_id={self.agent('open')}&limit=200"
            response = self.w.call(user_id, "GET", query)
            if response.status_code == 200:
                listed = [r["id"] for r in response.json()["data"]]
                if done["id"] not in listed:
                    return "200, but the run is not listed"
        elif column == "events":
            response = self.w.call(user_id, "GET", f"{url}/events")
            if response.status_code == 200 and response.json()["data"] != stored:
                return "200, but other events"
        else:
            assert column == "stream"
            headers = {"Accept": "text/event-stream", **self.w.as_(user_id)}
            with self.client.stream("GET", f"{url}/events", headers=headers) as opened:
                status = opened.status_code
            if status == 200 and sse(self.client, f"{url}/events", **self.w.as_(user_id)) != stored:
                return "200, but the stream differs from the stored log"
            return str(status)
        return str(response.status_code)

    def cancel(self, user_id: str, expected: str) -> str:
        run = self.waiting("form") if expected == "200" else self.probe("form")
        url = f"{RUNS_URL}/{run['id']}"
        response = self.w.call(user_id, "POST", f"{url}/cancel")
        now = ok(self.client.get(url))
        if response.status_code == 200:
            last = ok(self.client.get(f"{url}/events"))["data"][-1]["type"]
            if (now["status"], last) != ("cancelled", "run.cancelled"):
                return f"200, but the run is {now['status']} after {last}"
        elif now["status"] != "waiting":
            return f"{response.status_code}, yet the run is {now['status']}"
        return str(response.status_code)

    def mine(self, user_id: str) -> str:
        self.probe("done")  # there is at least one run of a marked agent
        response = self.w.call(user_id, "GET", f"{RUNS_URL}?limit=200")
        page = ok(response)
        assert page["next_cursor"] is None
        listed = {r["id"] for r in page["data"]}
        own = {run_id for run_id, starter in self.started.items() if starter == user_id}
        if not listed:
            return "none"
        if listed == own:
            return "own"
        if listed == set(self.started):
            return "all"
        return f"lists {len(listed)} runs: {len(listed & own)} own, {len(listed - own)} others"

    def task_action(self, user_id: str, column: str, expected: str) -> str:
        if column == "tasks":
            probes = {self.probe(kind)["id"]: kind for kind in PROBE_TASKS}
            listed = ok(self.w.call(user_id, "GET", f"{API}/tasks"))["data"]
            seen = {probes[t["run_id"]] for t in listed if t["run_id"] in probes}
            return ",".join(k for k in PROBE_TASKS if k in seen) or "-"
        kind = "refund" if column == "confirm" else column
        if expected != "202":
            probe = self.probe(kind)
            status = self.answer(user_id, probe).status_code
            now = ok(self.client.get(f"{RUNS_URL}/{probe['id']}"))
            if now["status"] != "waiting":
                return f"{status}, yet the run is {now['status']}"
            return str(status)
        run = self.waiting(kind)
        response = self.answer(user_id, run)
        if response.status_code != 202:
            return str(response.status_code)
        done = self.until(run["id"], "succeeded", "failed", "cancelled")
        moved_on = {"approved": True, "by": user_id} if kind != "refund" else {"paid": 30}
        if (done["status"], done["outputs"]) != ("succeeded", moved_on):
            return f"202, but the run {done['status']}: {done['outputs'] or done['error']}"
        return "202"

    def chat_action(self, user_id: str, column: str, expected: str) -> str:
        if column == "converse":
            url = f"{AGENTS}/{self.agent('chat')}/conversations"
            response = self.w.call(user_id, "POST", url)
            if response.status_code == 201:
                body = response.json()
                if (body["user_id"], body["variables"]) != (user_id, {"turns": 0}):
                    return f"201, but {body}"
            return str(response.status_code)
        if column == "read":
            chat = self.probe("chat")
            response = self.w.call(user_id, "GET", f"{API}/conversations/{chat['id']}")
            if response.status_code == 200 and stable(response.json()) != stable(chat):
                return "200, but another conversation"
            return str(response.status_code)
        assert column == "say"
        chat_id = self.conversation() if expected == "202" else self.probe("chat")["id"]
        return self.say(user_id, chat_id, f"from {user_id}")


ALL_CELLS = {**cells(RUNS), **cells(TASKS), **cells(CHATS)}


def check(world: RunWorld, text: str, last: tuple[str, ...] = ()) -> list[str]:
    """Every cell of the table (the ``last`` columns after all the others);
    what differs from the table."""
    wrong = []
    found = cells(text)
    order = [k for k in found if k[1] not in last] + [k for k in found if k[1] in last]
    for user, column in order:
        expected = found[user, column]
        actual = world.act(user, column, expected)
        if actual != expected:
            wrong.append(f"{user} {column}: {actual}, expected {expected}")
    return wrong


def test_the_tables_cover_every_principal() -> None:
    people = [row["user"] for row in table(PRINCIPALS)]
    for text in (RUNS, TASKS, CHATS):
        assert [row["user"] for row in table(text)] == people


def test_who_may_start_read_list_stream_and_cancel_runs(client: TestClient) -> None:
    world = RunWorld(client)
    assert check(world, RUNS, last=("mine",)) == []


def test_who_may_answer_confirm_and_see_tasks(client: TestClient) -> None:
    world = RunWorld(client)
    assert check(world, TASKS) == []
    # Refused answers changed nothing: the probes still wait for the same thing.
    for kind in PROBE_TASKS:
        probe = world.probe(kind)
        assert ok(client.get(f"{RUNS_URL}/{probe['id']}"))["waiting"] == probe["waiting"]


def test_who_may_chat(client: TestClient) -> None:
    world = RunWorld(client)
    assert check(world, CHATS) == []


# -- a marking added to an agent after its runs started -------------------------------------------


def marked_later(client: TestClient) -> tuple[RunWorld, dict[str, Any], str]:
    """Rita's waiting ``open`` run and her conversation; then olivia (an owner holding K)
    marks both agents with K, which rita lacks."""
    world = RunWorld(client)
    run, chat = world.probe("open"), world.probe("chat")
    k = world.w.marking("k", [uid("olivia")])
    for kind in ("open", "chat"):
        url = f"{AGENTS}/{world.agent(kind)}/markings"
        ok(world.w.call(uid("olivia"), "POST", url, {"marking_id": k}))
    return world, run, chat["id"]


def test_a_marking_added_later_hides_the_runs_from_their_user(client: TestClient) -> None:
    world, run, chat_id = marked_later(client)
    url = f"{RUNS_URL}/{run['id']}"

    def status(method: str, path: str, body: Any = None, who: str = RITA) -> int:
        return int(world.w.call(who, method, path, body).status_code)

    assert status("GET", url) == 404
    assert status("GET", f"{url}/events") == 404
    headers = {"Accept": "text/event-stream", **world.w.as_(RITA)}
    with client.stream("GET", f"{url}/events", headers=headers) as opened:
        assert opened.status_code == 404
    assert status("GET", f"{RUNS_URL}?agent_id={world.agent('open')}") == 404
    assert status("POST", f"{url}/cancel") == 404
    assert world.answer(RITA, run).status_code == 404
    assert world.start(RITA, "open").status_code == 404
    assert status("POST", f"{AGENTS}/{world.agent('chat')}/conversations") == 404
    assert world.say(RITA, chat_id, "still there?") == "404"
    # Its owner, who holds K, still sees all of it, and the run still waits.
    assert status("GET", url, who=uid("olivia")) == 200
    assert ok(client.get(url))["status"] == "waiting"


def test_a_marking_added_later_hides_the_run_from_its_users_own_list(
    client: TestClient,
) -> None:
    world, run, _ = marked_later(client)
    listed = ok(world.w.call(RITA, "GET", RUNS_URL))["data"]
    assert run["id"] not in {r["id"] for r in listed}


def test_a_marking_added_later_hides_the_task_from_its_runs_user(client: TestClient) -> None:
    world, run, _ = marked_later(client)
    listed = ok(world.w.call(RITA, "GET", f"{API}/tasks"))["data"]
    assert run["id"] not in {t["run_id"] for t in listed}


def test_a_marking_added_later_hides_the_conversation_from_its_user(
    client: TestClient,
) -> None:
    world, _, chat_id = marked_later(client)
    assert world.w.call(RITA, "GET", f"{API}/conversations/{chat_id}").status_code == 404
