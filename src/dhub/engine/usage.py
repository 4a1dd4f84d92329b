"""A run's token usage (docs/runs.md): every model call it made, summed, and by model.

``add`` sums one call's usage (the provider's counts: ``input_tokens``, ``output_tokens``,
``reasoning_tokens``, ``cached_tokens``) into a total; ``count`` does so for the run's total,
which also keeps ``total_tokens`` (input + output: reasoning tokens are part of the output,
cached ones of the input) and ``by_model`` (``"<provider>/<model>"`` -> the same counts and
the number of ``calls``). ``estimated`` is true once any count was an offline estimate.
``model`` is ``"demo"`` once the demo model answered a call (providers/demo.py): the one label
a call's usage may carry, kept in every total it goes into.

``cost_usd`` sums what the calls cost (the model port prices each call: providers/prices.py).
A call without a known price adds nothing and leaves its ``cost_note`` in the total and its
model's entry, whose ``cost_usd`` stays None while none of its calls had a price: the total is
then a lower bound, and the note says which model to price.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KINDS = ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")


def add(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for kind in KINDS:
        count = usage.get(kind)
        if isinstance(count, int) and not isinstance(count, bool):
            total[kind] = total.get(kind, 0) + count
    if isinstance(usage.get("model"), str):  # a label a call's usage carries: "demo"
        total["model"] = usage["model"]


def count(total: dict[str, Any], usage: Mapping[str, Any], provider: str, model: str) -> None:
    """Count one model call of ``provider``/``model`` into the run's ``total``."""
    per_model = total.setdefault("by_model", {}).setdefault(f"{provider}/{model}", {})
    for into in (total, per_model):
        add(into, usage)
        _cost(into, usage)
        into["total_tokens"] = into.get("input_tokens", 0) + into.get("output_tokens", 0)
        if usage.get("estimated") is True:
            into["estimated"] = True
    per_model["calls"] = per_model.get("calls", 0) + 1


def _cost(into: dict[str, Any], usage: Mapping[str, Any]) -> None:
    if "cost_usd" not in usage:
        return  # a call priced by no one (a run journaled before dhub priced calls)
    cost = usage["cost_usd"]
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        into["cost_usd"] = round(float(into.get("cost_usd") or 0.0) + cost, 9)
    else:
        into.setdefault("cost_usd", None)
        if isinstance(usage.get("cost_note"), str):
            into["cost_note"] = usage["cost_note"]


def spent(total: Mapping[str, Any]) -> float:
    """The run's cost so far in US dollars (0 before any priced call)."""
    cost = total.get("cost_usd")
    return float(cost) if isinstance(cost, int | float) else 0.0


def merge(total: dict[str, Any], run: Mapping[str, Any]) -> None:
    """Add one run's usage (the shape ``count`` makes) into ``total``, by model too: what
    GET /api/v1/usage answers. ``calls`` counts the model calls, in the total as well."""
    parts: list[tuple[dict[str, Any], Mapping[str, Any]]] = [(total, run)]
    for name, used in (run.get("by_model") or {}).items():
        if isinstance(used, Mapping):
            parts.append((total.setdefault("by_model", {}).setdefault(name, {}), used))
            total["calls"] = total.get("calls", 0) + _int(used.get("calls"))
    total.setdefault("calls", 0)
    for into, part in parts:
        add(into, part)
        into["total_tokens"] = into.get("input_tokens", 0) + into.get("output_tokens", 0)
        if part.get("estimated") is True:
            into["estimated"] = True
        _cost(into, part)
        if isinstance(part.get("cost_note"), str):
            into["cost_note"] = part["cost_note"]
        if into is not total:
            into["calls"] = into.get("calls", 0) + _int(part.get("calls"))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


BUDGET = "max_cost_usd"  # the agent's options key of its runs' cost budget, in US dollars


def budget(options: Mapping[str, Any] | None) -> float | None:
    """An agent's cost budget per run (``options.max_cost_usd``), None without one."""
    limit = (options or {}).get(BUDGET)
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
        return float(limit)
    return None


def budget_problem(options: Any) -> str | None:
    """Why ``options.max_cost_usd`` cannot be a budget, or None when it can (or is unset)."""
    if not isinstance(options, dict) or options.get(BUDGET) is None:
        return None
    if budget(options) is None:
        return (
            f"'{BUDGET}' is the most a run may cost, in US dollars: a number above 0 (or null "
            f"for no budget); got {options[BUDGET]!r:.60}."
        )
    return None
