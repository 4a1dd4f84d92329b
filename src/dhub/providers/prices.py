"""What a model call cost, in US dollars (docs/observability.md "Usage and cost").

Prices come from ``genai-prices``, a maintained table shipped as a snapshot in its wheel (no
network: dhub never asks it to update), and ``DHUB_PRICES_FILE`` (YAML or JSON) overrides
it per model, in US dollars per million tokens::

    prices:
      openai/gpt-4o-mini: {input_mtok: 0.15, output_mtok: 0.60, cache_read_mtok: 0.075}
      my-local-model: {input_mtok: 0, output_mtok: 0}   # any provider

The file is read with the providers configuration (providers/config.py). A key
``provider/model`` wins over a bare ``model``; either wins over the table. A model found
in neither has no cost (``None``) and a note saying how to give it one: never an error, since a
run must not fail because a price is unknown.

A call's cost is computed once, when it answers, and kept in its usage: a price changed later
does not rewrite what past runs cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeFloat

ENV = "DHUB_PRICES_FILE"
# Entry types whose name in the table is their own: a scripted or OpenAI-compatible entry
# is looked up by its entry name ("openai" for a scripted stand-in of OpenAI in tests).
_TABLE_PROVIDERS = {"openai": "openai", "anthropic": "anthropic"}


class ModelPrice(BaseModel):
    """US dollars per million tokens. Cached input tokens are part of the input tokens and
    cost ``cache_read_mtok`` instead (default: the input price); reasoning tokens are part of
    the output tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_mtok: NonNegativeFloat
    output_mtok: NonNegativeFloat
    cache_read_mtok: NonNegativeFloat | None = None

    def cost(self, usage: Mapping[str, Any]) -> float:
        inp, out, cached = _tokens(usage)
        read = self.input_mtok if self.cache_read_mtok is None else self.cache_read_mtok
        return ((inp - cached) * self.input_mtok + cached * read + out * self.output_mtok) / 1e6


class Prices:
    """The price table with its overrides. ``cost`` never raises for an unknown model."""

    def __init__(self, overrides: Mapping[str, ModelPrice] | None = None) -> None:
        self.overrides = dict(overrides or {})
        self._unknown: set[tuple[str, str]] = set()  # not in the table: looked up once
        self.loaded = False  # the table is read on first use (about half a second)

    def cost(
        self, provider: str, wire: str, model: str, usage: Mapping[str, Any]
    ) -> tuple[float | None, str | None]:
        """(US dollars, None), or (None, a note) when no price is known for the model."""
        price = self.overrides.get(f"{provider}/{model}") or self.overrides.get(model)
        if price is not None:
            return round(price.cost(usage), 9), None
        table_provider = _TABLE_PROVIDERS.get(wire, provider)
        if (table_provider, model) not in self._unknown:
            found = _from_table(table_provider, model, usage)
            self.loaded = True
            if found is not None:
                return found, None
            self._unknown.add((table_provider, model))
        return None, (
            f"no price known for model '{model}' of provider '{provider}': add it to the "
            f"prices file ({ENV}, docs/observability.md) to count its cost"
        )


def _from_table(table_provider: str, model: str, usage: Mapping[str, Any]) -> float | None:
    import genai_prices  # imported on first use: it loads its whole table

    inp, out, cached = _tokens(usage)
    counts = genai_prices.Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached)
    try:
        found = genai_prices.calc_price(counts, model, provider_id=table_provider)
    except (LookupError, ValueError):  # not in the table, or counts it cannot price
        return None
    return round(float(Decimal(found.total_price)), 9)


def _tokens(usage: Mapping[str, Any]) -> tuple[int, int, int]:
    def count(kind: str) -> int:
        value = usage.get(kind)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    inp, cached = count("input_tokens"), count("cached_tokens")
    return inp, count("output_tokens"), min(cached, inp)
