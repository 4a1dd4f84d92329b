"""The runs half of ``Client``: start and watch runs of agents, and answer the human tasks
(input forms, actor confirmations) that waiting runs open."""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx

from dhub.client._exceptions import DhubClientError, ServerUnreachable, error_from_response
from dhub.client._models import Run, RunEvent, RunPage, RunStatus, Task
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    from collections.abc import Callable

END_EVENTS = ("run.succeeded", "run.failed", "run.cancelled")
STREAM_RETRIES = 3
# The server sends a keep-alive comment every 15 s; a stream silent for much longer than that
# is dead, and is reconnected rather than waited on forever.
STREAM_TIMEOUT = httpx.Timeout(30.0, read=60.0)


class RunsMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:
        base_url: str
        _headers: dict[str, str]
        _http: httpx.Client

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

        def _agent_id(self, agent: str) -> str: ...

        def _agent_path(self, agent: str) -> str: ...

    # -- runs --------------------------------------------------------------------------------

    def start_run(self, agent: str, inputs: Mapping[str, Any], version: int | None = None) -> Run:
        """Start a run of the agent's latest version (or ``version``); ``agent`` is its id or
        its name. It executes on the server in the background, so the run comes back
        ``queued``."""
        body: dict[str, Any] = {"inputs": dict(inputs)}
        if version is not None:
            body["version"] = int(version)
        path = f"{self._agent_path(agent)}/runs"
        return Run.from_json(self._object("POST", path, json=body))

    def get_run(self, run_id: str) -> Run:
        return Run.from_json(self._object("GET", f"/runs/{segment(run_id)}"))

    def runs_page(
        self,
        *,
        agent: str | None = None,
        status: RunStatus | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunPage:
        """One page of runs, newest first: the agent's (``agent``, an id or a name), else the
        caller's own (admins: everyone's)."""
        agent_id = None if agent is None else self._agent_id(agent)
        params = query(agent_id=agent_id, status=status, limit=limit, cursor=cursor)
        body = self._object("GET", "/runs", params=params)
        runs = [Run.from_json(r) for r in body.get("data") or []]
        return RunPage(data=runs, next_cursor=body.get("next_cursor"))

    def list_runs(
        self,
        agent: str | None = None,
        status: RunStatus | None = None,
        *,
        page_size: int | None = None,
    ) -> Iterator[Run]:
        """Every matching run, newest first, fetching pages lazily (``agent``: an id or a
        name, looked up once)."""
        agent_id = None if agent is None else self._agent_id(agent)
        return follow(
            lambda cursor: self.runs_page(
                agent=agent_id, status=status, limit=page_size, cursor=cursor
            )
        )

    def usage(
        self,
        agent: str | None = None,
        *,
        user_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> dict[str, Any]:
        """Tokens and cost summed over the runs ``list_runs`` would give (``agent``: an id or
        a name), created in ``[since, until)`` (datetimes, or ISO 8601 text; a naive time is
        UTC), and ``user_id``'s only: ``{"runs", "calls", token counts, "cost_usd",
        "by_model"}`` (docs/observability.md, GET /api/v1/usage)."""
        agent_id = None if agent is None else self._agent_id(agent)
        params = query(agent_id=agent_id, user_id=user_id)
        for name, moment in (("from", since), ("to", until)):
            if moment is not None:
                params[name] = moment.isoformat() if isinstance(moment, datetime) else moment
        return self._object("GET", "/usage", params=params)

    def cancel_run(self, run_id: str) -> Run:
        """Cancel a run that has not finished (a finished one: ``Conflict``)."""
        return Run.from_json(self._object("POST", f"/runs/{segment(run_id)}/cancel"))

    # -- events ------------------------------------------------------------------------------

    def run_events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[RunEvent]:
        """The run's events so far with ``seq`` above ``after``, oldest first."""
        params = query(after=after, limit=limit)
        body = self._object("GET", f"/runs/{segment(run_id)}/events", params=params)
        return [RunEvent.from_json(e) for e in body.get("data") or []]

    def stream_run_events(
        self, run_id: str, after: int = 0, timeout: float | None = None
    ) -> Generator[RunEvent, None, None]:
        """The run's events after ``after`` as they happen, ending with the run. A dropped
        connection is resumed where it stopped (each event arrives once), a few times. Close the
        generator to hang up early. ``TimeoutError`` when the run has not ended after
        ``timeout`` seconds, checked at each event and keep-alive (the run goes on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for event in self._events_live(run_id, after):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"Run {run_id} did not finish within {timeout:g}s.")
            if event is not None:
                yield event

    def wait_run(self, run_id: str, timeout: float | None = None) -> Run:
        """Block until the run has finished and return it (a run waiting for a person waits
        for them too); ``TimeoutError`` as in ``stream_run_events``."""
        for _ in self.stream_run_events(run_id, timeout=timeout):
            pass
        return self.get_run(run_id)

    def _events_live(self, run_id: str, after: int) -> Iterator[RunEvent | None]:
        """The stream's events, and None at each keep-alive (so a waiting caller can check
        its deadline). Reconnects with Last-Event-ID while the run has not finished."""
        failures = 0
        while True:
            try:
                for event in self._sse(run_id, after):
                    if event is None:
                        yield None
                        continue
                    after, failures = event.seq, 0
                    yield event
                    if event.type in END_EVENTS:
                        return
            except (httpx.TransportError, ServerUnreachable) as exc:
                failures += 1
                if failures > STREAM_RETRIES:
                    raise ServerUnreachable(
                        f"Lost the event stream of run {run_id} {failures} times: {exc}",
                        url=f"{self.base_url}/api/v1/runs/{run_id}/events",
                    ) from exc
                time.sleep(min(0.2 * 2**failures, 2.0))
                continue
            # The server ends a stream only with its run, so a clean end before the last event
            # means a proxy cut it: check the run rather than trust the connection.
            if self.get_run(run_id).finished:
                return
            failures += 1
            if failures > STREAM_RETRIES:
                raise DhubClientError(f"The event stream of run {run_id} kept ending early.")

    def _sse(self, run_id: str, after: int) -> Iterator[RunEvent | None]:
        headers = {"Accept": "text/event-stream"}
        if after:
            headers["Last-Event-ID"] = str(after)
        with self._streaming("GET", f"/runs/{segment(run_id)}/events", headers) as response:
            yield from parse_sse(response.iter_lines(), RunEvent.from_json)

    @contextmanager
    def _streaming(
        self, method: str, path: str, headers: Mapping[str, str]
    ) -> Iterator[httpx.Response]:
        url = f"{self.base_url}/api/v1{path}"
        try:
            with self._http.stream(
                method, url, headers={**self._headers, **headers}, timeout=STREAM_TIMEOUT
            ) as response:
                if response.is_error:
                    response.read()
                    raise error_from_response(response)
                yield response
        except httpx.ConnectError as exc:
            raise ServerUnreachable(
                f"Could not reach the dhub server at {self.base_url}: {exc}", url=url
            ) from exc

    # -- tasks -------------------------------------------------------------------------------

    def list_tasks(self) -> list[Task]:
        """The pending input forms and actor confirmations the caller may answer."""
        return [Task.from_json(t) for t in self._object("GET", "/tasks").get("data") or []]

    def answer_input(self, run_id: str, node_id: str, values: Mapping[str, Any]) -> None:
        """Answer the waiting human_input node; the server checks ``values`` against its
        fields (``InvalidInput`` names each bad one)."""
        path = f"/runs/{segment(run_id)}/inputs/{segment(node_id)}"
        self._request("POST", path, json={"values": dict(values)})

    def confirm_call(
        self,
        run_id: str,
        call_id: str,
        approve: bool,
        arguments: Mapping[str, Any] | None = None,
        reason: str = "",
    ) -> None:
        """Approve (maybe with edited ``arguments``) or reject (with a ``reason``) the actor
        call ``call_id`` (the task's ``command_id``)."""
        body: dict[str, Any] = {"approve": approve}
        if arguments is not None:
            body["arguments"] = dict(arguments)
        if reason:
            body["reason"] = reason
        path = f"/runs/{segment(run_id)}/confirmations/{segment(call_id)}"
        self._request("POST", path, json=body)


def parse_sse(
    lines: Iterator[str], decode: Callable[[dict[str, Any]], RunEvent]
) -> Iterator[RunEvent | None]:
    """Server-sent events (the ``data`` of each as JSON) from a stream's lines; None for
    each comment (the server's keep-alives)."""
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            yield None
        elif line:
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value.removeprefix(" "))
        elif data:
            yield decode(json.loads("\n".join(data)))
            data = []
