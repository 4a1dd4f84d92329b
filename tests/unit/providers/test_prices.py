"""Pricing a model call (providers/prices.py): the prices file's entries win over the table, a
``provider/model`` key over a bare model, and a model known to neither has no cost and a note."""

from __future__ import annotations

import pytest

from dhub.providers.prices import ModelPrice, Prices

USED = {"input_tokens": 1000, "output_tokens": 200, "cached_tokens": 400, "reasoning_tokens": 50}


def test_the_table_prices_known_models_of_their_provider_type() -> None:
    prices = Prices()
    # gpt-4o-mini: 600 x $0.15 + 400 x $0.075 + 200 x $0.60 a million
    assert prices.cost("openai", "openai", "gpt-4o-mini", USED) == (pytest.approx(0.00024), None)
    # An entry of another type is looked up by its name: a scripted stand-in of "openai".
    assert prices.cost("openai", "scripted", "gpt-4o-mini", USED)[0] == pytest.approx(0.00024)


def test_the_file_wins_a_provider_model_key_over_a_bare_model() -> None:
    prices = Prices({
        "gpt-4o-mini": ModelPrice(input_mtok=1, output_mtok=1),
        "openai/gpt-4o-mini": ModelPrice(input_mtok=2, output_mtok=10, cache_read_mtok=0.5),
    })  # fmt: skip
    assert prices.cost("openai", "openai", "gpt-4o-mini", USED)[0] == pytest.approx(0.0034)
    assert prices.cost("azure", "openai_compatible", "gpt-4o-mini", USED)[0] == pytest.approx(
        0.0012
    )


def test_a_model_nobody_prices_has_no_cost_and_says_how_to_give_it_one() -> None:
    prices = Prices()
    for _ in range(2):  # the second look-up is remembered, with the same answer
        cost, note = prices.cost("ollama", "openai_compatible", "llama3.1:8b", USED)
        assert cost is None and note is not None
        assert "llama3.1:8b" in note and "DHUB_PRICES_FILE" in note
