"""The reasoning-effort mapping table (docs/providers.md) and the offline token estimator."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.providers.catalog import BUILT_IN, ModelInfo
from dhub.providers.errors import UnsupportedFeature
from dhub.providers.reasoning import anthropic_thinking, openai_effort
from dhub.providers.tokens import TokenCounter, estimate_request, estimate_text
from dhub.providers.types import EFFORTS, Message, ModelRequest

MODELS = {m.id: m for m in BUILT_IN}
REFUSED = "refused"

# dhub effort -> what each OpenAI model is sent (None: nothing is sent).
OPENAI_TABLE = {
    #           gpt-4o-mini  o3        gpt-5      gpt-5.1   gpt-5.2
    "none":    (None,        "low",     "minimal", "none",   "none"),
    "minimal": (REFUSED,     "low",     "minimal", "low",    "low"),
    "low":     (REFUSED,     "low",     "low",     "low",    "low"),
    "medium":  (REFUSED,     "medium",  "medium",  "medium", "medium"),
    "high":    (REFUSED,     "high",    "high",    "high",   "high"),
    "xhigh":   (REFUSED,     "high",    "high",    "high",   "xhigh"),
    "max":     (REFUSED,     "high",    "high",    "high",   "xhigh"),
}  # fmt: skip
OPENAI_MODELS = ("gpt-4o-mini", "o3", "gpt-5", "gpt-5.1", "gpt-5.2")


@pytest.mark.parametrize("effort", EFFORTS)
def test_openai_effort_table(effort: str) -> None:
    for model, expected in zip(OPENAI_MODELS, OPENAI_TABLE[effort], strict=True):
        info = MODELS[model]
        if expected == REFUSED:
            with pytest.raises(UnsupportedFeature, match="does not reason"):
                openai_effort(info, effort)  # type: ignore[arg-type]
        else:
            assert openai_effort(info, effort) == expected, (model, effort)  # type: ignore[arg-type]
    assert openai_effort(MODELS["o3"], None) is None


# dhub effort -> (thinking, budget_tokens, max_tokens) for a budget model with 64k output and
# the default 4,096-token answer; and (thinking, effort) for an adaptive model.
BUDGET_TABLE = {
    "none": (None, None, 4096),
    "minimal": ("enabled", 1024, 5120),
    "low": ("enabled", 2048, 6144),
    "medium": ("enabled", 8192, 12288),
    "high": ("enabled", 16384, 20480),
    "xhigh": ("enabled", 32768, 36864),
    "max": ("enabled", 59904, 64000),
}
ADAPTIVE_TABLE = {
    "none": (None, None),
    "minimal": ("adaptive", "low"),
    "low": ("adaptive", "low"),
    "medium": ("adaptive", "medium"),
    "high": ("adaptive", "high"),
    "xhigh": ("adaptive", "xhigh"),
    "max": ("adaptive", "max"),
}


@pytest.mark.parametrize("effort", EFFORTS)
def test_anthropic_thinking_table(effort: str) -> None:
    budget = anthropic_thinking(MODELS["claude-sonnet-4-5"], effort, None)  # type: ignore[arg-type]
    kind, tokens, max_tokens = BUDGET_TABLE[effort]
    assert (budget.thinking or {}).get("type") == kind
    assert (budget.thinking or {}).get("budget_tokens") == tokens
    assert budget.max_tokens == max_tokens and budget.effort is None
    adaptive = anthropic_thinking(MODELS["claude-opus-4-6"], effort, 2000)  # type: ignore[arg-type]
    assert ((adaptive.thinking or {}).get("type"), adaptive.effort) == ADAPTIVE_TABLE[effort]
    assert adaptive.max_tokens == 2000


def test_a_budget_that_cannot_fit_beside_the_answer_is_refused() -> None:
    with pytest.raises(UnsupportedFeature, match="lower max_output_tokens"):
        anthropic_thinking(MODELS["claude-sonnet-4-5"], "low", 63_500)


def test_a_model_that_does_not_reason_only_accepts_none() -> None:
    plain = dataclasses.replace(MODELS["claude-sonnet-4-5"], thinking="none")
    assert anthropic_thinking(plain, "none", None).thinking is None
    with pytest.raises(UnsupportedFeature):
        anthropic_thinking(plain, "high", None)


# -- tokens --------------------------------------------------------------------------------------

# Texts with hand counts of how a BPE tokenizer (o200k-like) splits them: the estimate is a
# heuristic, held to within 35% (or 3 tokens) of them.
SAMPLES = [
    ("The quick brown fox jumps over the lazy dog.", 10),
    ('Write a one-line headline for this alert: {"host": "db-1", "disk": 97}', 23),
    ("def add(a: int, b: int) -> int:\n    return a + b\n", 16),
    ("Internationalization and localization are frequently abbreviated.", 9),
]


@pytest.mark.parametrize(("text", "reference"), SAMPLES)
def test_the_estimate_is_near_a_real_tokenizer(text: str, reference: int) -> None:
    estimate = estimate_text(text)
    assert abs(estimate - reference) <= max(3, reference * 0.35), estimate


@given(st.text(max_size=300), st.text(max_size=300))
def test_estimates_add_up(a: str, b: str) -> None:
    joined = estimate_text(a + b)
    assert joined <= estimate_text(a) + estimate_text(b) + 1
    assert estimate_text(a) <= len(a.encode()) + 1


def test_requests_count_messages_tools_and_images() -> None:
    bare = ModelRequest("m", (Message("user", "hello there"),))
    with_image = ModelRequest("m", (Message("user", "hello there", images=("data:,x",)),))
    assert estimate_request(with_image) >= estimate_request(bare) + 500


def test_the_counter_learns_a_models_ratio_from_reported_usage() -> None:
    counter = TokenCounter()
    request = ModelRequest("m", (Message("user", "word " * 100),))
    base = counter.count_request("p", "m", request)
    for _ in range(20):
        counter.observe("p", "m", base, base * 2)
    assert abs(counter.count_request("p", "m", request) - 2 * base) <= 2
    assert counter.count_request("p", "other", request) == base  # per model


def test_a_model_without_a_catalog_entry_is_marked_unknown() -> None:
    from dhub.providers.catalog import family_default

    info: ModelInfo = family_default("openai", "openai", "o9-preview")
    assert not info.known and info.reasoning and info.api == "responses"
    assert not family_default("openai_compatible", "local", "llama").reasoning
