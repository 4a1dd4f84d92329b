"""The demo model: what answers, offline and clearly labelled, for a model provider the server
has no configuration for, when the demo model is on (``DHUB_DEMO_MODEL``, docs/providers.md).

It is a ``FunctionModel`` (the project's test model) scripted for the examples, so a new user
sees each example run end to end before setting a key:

- an agent with ``lookup_order`` and ``issue_refund`` tools (examples/support_assistant.yaml)
  looks the order named in the message up, asks to refund it through the actor when the
  message asks for a refund (the run waits for a person's confirmation), then answers from
  the results;
- a request for an alert's headline (examples/incident_summarizer.json) gets a one-line
  summary of the alert's JSON;
- anything else gets an honest "I am the demo model" reply saying what to configure.

It never pretends to be a real model: every answer it gives is marked ``"model": "demo"`` in
its usage (runtime/model.py), which the CLI and the console show.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dhub.providers.errors import ProviderError
from dhub.providers.testing import FunctionModel, Reply, ReplyLike
from dhub.providers.types import Message, ModelRequest

NAME = "demo"
_ORDER_ID = re.compile(r"\b[A-Z]{1,4}-\d{2,}\b")
_METRICS = ("disk", "cpu", "memory", "mem", "load", "latency", "errors")
_HOST_KEYS = ("host", "hostname", "server", "service", "instance", "node", "name")


class DemoModel(FunctionModel):
    """The demo model standing in for the provider ``provider``; ``configure`` says how to
    configure a real one (e.g. "set DHUB_OPENAI_API_KEY")."""

    def __init__(self, provider: str, configure: str) -> None:
        super().__init__(self._answer, name=NAME)
        self.provider = provider
        self.configure = configure

    def _answer(self, request: ModelRequest) -> ReplyLike:
        if request.response_schema is not None:
            return ProviderError(
                "unsupported",
                f"the demo model (answering for model provider '{self.provider}', which is "
                f"not configured) writes no structured output: {self.configure}",
                provider=NAME,
                model=request.model,
            )
        tools = {t.name for t in request.tools}
        if {"lookup_order", "issue_refund"} <= tools:
            return support_turn(request.messages, self._intro())
        asked = _last_user(request.messages)
        if "headline" in f"{request.system} {asked}".lower() and "{" in asked:
            return headline(asked)
        return (
            f"{self._intro()} It answers offline so that you can try dhub; it does not "
            f"understand your message. {self._setup()}"
        )

    def _intro(self) -> str:
        return (
            f"I am the demo model: this server has no model provider '{self.provider}' "
            "configured, so dhub answers with a scripted stand-in instead of a real LLM."
        )

    def _setup(self) -> str:
        return f"For real answers, {self.configure} and restart the server."


# -- the support example --------------------------------------------------------------------


def support_turn(messages: tuple[Message, ...], intro: str) -> ReplyLike:
    """The support assistant's turn, from the transcript since the customer's last message:
    look the order up, ask to refund it (needs confirmation), then answer."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    asked = messages[start].content if start >= 0 else ""
    turn = messages[start + 1 :]
    order_id = _order_id(asked)
    results = _results(turn)
    if order_id is None:
        return (
            f"{intro} In this demo I can look an order up and refund it: name the order, "
            "for example 'Please refund order A-1001'."
        )
    step = len(turn)  # distinct call ids across the turn's iterations
    if "lookup_order" not in results:
        return Reply(tool_calls=[{"id": f"demo_lookup_{step}", "name": "lookup_order",
                                  "arguments": {"order_id": order_id}}])  # fmt: skip
    found, failed = results["lookup_order"]
    order = _json_object(found)
    if failed or order is None:
        return f"I could not look order {order_id} up: {found}"
    status = order.get("status", "unknown")
    amount = order.get("amount")
    if "refund" not in asked.lower():
        return f"Order {order_id} is {status}; its amount is {amount}."
    if "issue_refund" not in results:
        arguments = {"order_id": order_id, "amount": amount}
        return Reply(
            f"Order {order_id} is {status}. I am asking to refund {amount}.",
            tool_calls=[{"id": f"demo_refund_{step}", "name": "issue_refund",
                         "arguments": arguments}],
        )  # fmt: skip
    outcome, refused = results["issue_refund"]
    if refused:
        return f"I did not refund order {order_id}. {outcome}"
    refunded = (_json_object(outcome) or {}).get("refunded", amount)
    return f"Done: order {order_id} is refunded ({refunded})."


def _order_id(text: str) -> str | None:
    found = _ORDER_ID.search(text)
    return found.group(0) if found else None


def _results(turn: tuple[Message, ...]) -> dict[str, tuple[str, bool]]:
    """Each tool's last result in the turn: its text and whether it failed."""
    names = {c.id: c.name for m in turn for c in m.tool_calls}
    return {
        names[m.tool_call_id]: (m.content, m.is_error)
        for m in turn
        if m.role == "tool" and m.tool_call_id in names
    }


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# -- the summarizer example -----------------------------------------------------------------


def headline(prompt: str) -> str:
    """A one-line headline for the JSON object in ``prompt``."""
    start, end = prompt.find("{"), prompt.rfind("}")
    alert = _json_object(prompt[start : end + 1]) if 0 <= start < end else None
    alert = alert or {}
    host = next((str(alert[k]) for k in _HOST_KEYS if k in alert), "")
    where = f" on {host}" if host else ""
    for key in _METRICS:
        value = alert.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            unit = "%" if key in ("disk", "cpu", "memory", "mem") else ""
            return f"{key.capitalize()} at {value:g}{unit}{where}"
    rest = ", ".join(f"{k} {v}" for k, v in alert.items() if k not in _HOST_KEYS)
    return f"Alert{where}: {rest}" if rest else f"Alert{where}"


def _last_user(messages: tuple[Message, ...]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")
