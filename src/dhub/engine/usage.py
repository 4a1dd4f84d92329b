"""A run's token usage (docs/runs.md): every model call it made, summed, and by model.

``add`` sums one call's usage (the provider's counts: ``input_tokens``, ``output_tokens``,
``reasoning_tokens``, ``cached_tokens``) into a total; ``count`` does so for the run's total,
which also keeps ``total_tokens`` (input + output: reasoning tokens are part of the output,
cached ones of the input) and ``by_model`` (``"<provider>/<model>"`` -> the same counts and
the number of ``calls``). ``estimated`` is true once any count was an offline estimate.
``model`` is ``"demo"`` once the demo model answered a call (providers/demo.py): the one label
a call's usage may carry, kept in every total it goes into.
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
        into["total_tokens"] = into.get("input_tokens", 0) + into.get("output_tokens", 0)
        if usage.get("estimated") is True:
            into["estimated"] = True
    per_model["calls"] = per_model.get("calls", 0) + 1
