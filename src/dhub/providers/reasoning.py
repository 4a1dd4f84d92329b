"""``reasoning_effort`` (none … max) to each provider's native control (docs/providers.md).

| dhub    | OpenAI reasoning_effort   | Anthropic, budget models     | Anthropic, adaptive    |
| ------- | ------------------------- | ---------------------------- | ---------------------- |
| none    | none, else the lowest     | thinking off                 | thinking off           |
| minimal | minimal, else next above  | thinking, 1,024-token budget | adaptive, effort low   |
| low     | low                       | 2,048                        | low                    |
| medium  | medium                    | 8,192                        | medium                 |
| high    | high                      | 16,384                       | high                   |
| xhigh   | xhigh, else high          | 32,768                       | xhigh, else next above |
| max     | max, else the highest     | 63,999 (less the answer)     | max, else the highest  |

A model with native efforts (OpenAI, Anthropic adaptive) takes the value itself when it lists
it in its ``efforts``, else the nearest listed value above it, else its highest. ``null``
leaves the model's own default. A model that does not reason accepts ``none`` (nothing is
sent) and refuses any other value.
"""

from __future__ import annotations

from dataclasses import dataclass

from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import UnsupportedFeature
from dhub.providers.types import EFFORTS, Effort

BUDGETS: dict[Effort, int] = {
    "minimal": 1_024,
    "low": 2_048,
    "medium": 8_192,
    "high": 16_384,
    "xhigh": 32_768,
    "max": 63_999,
}
MIN_BUDGET = 1_024
DEFAULT_ANSWER_TOKENS = 4_096  # Anthropic needs max_tokens; the answer's share when unset


def nearest(effort: Effort, supported: tuple[Effort, ...]) -> Effort:
    """``effort`` if supported, else the nearest supported value above it, else the highest."""
    if effort in supported:
        return effort
    rank = EFFORTS.index(effort)
    above = [e for e in supported if EFFORTS.index(e) > rank]
    if above:
        return min(above, key=EFFORTS.index)
    return max(supported, key=EFFORTS.index)


def refuse(info: ModelInfo, effort: Effort) -> UnsupportedFeature:
    return UnsupportedFeature(
        f"reasoning_effort '{effort}' needs a reasoning model and this model does not reason; "
        "set reasoning_effort to 'none' or null, or pick a reasoning model "
        "(GET /api/v1/models lists which reason)",
        provider=info.provider,
        model=info.id,
    )


def openai_effort(info: ModelInfo, effort: Effort | None) -> Effort | None:
    """The ``reasoning_effort`` to send to an OpenAI-style API, or None to send nothing."""
    if effort is None:
        return None
    if not info.reasoning:
        if effort == "none":
            return None
        raise refuse(info, effort)
    return nearest(effort, info.efforts or ("low", "medium", "high"))


@dataclass(frozen=True)
class Thinking:
    """Anthropic's controls for one call: the ``thinking`` parameter, the
    ``output_config.effort`` (adaptive models) and the ``max_tokens`` to send."""

    thinking: dict[str, object] | None
    effort: Effort | None
    max_tokens: int


def anthropic_thinking(
    info: ModelInfo, effort: Effort | None, max_output_tokens: int | None
) -> Thinking:
    """Thinking budgets leave the answer its share: ``max_tokens`` = budget + answer, capped by
    the model's maximum output (the budget shrinks first, never below 1,024)."""
    answer = max_output_tokens or min(DEFAULT_ANSWER_TOKENS, info.max_output_tokens)
    if effort is None or effort == "none":
        return Thinking(None, None, min(answer, info.max_output_tokens))
    if not info.reasoning:
        raise refuse(info, effort)
    if info.thinking == "adaptive":
        native = nearest(effort, info.efforts or ("low", "medium", "high"))
        return Thinking({"type": "adaptive"}, native, min(answer, info.max_output_tokens))
    budget = min(BUDGETS[effort], info.max_output_tokens - answer)
    if budget < MIN_BUDGET:
        raise UnsupportedFeature(
            f"reasoning_effort '{effort}' needs at least {MIN_BUDGET} thinking tokens besides "
            f"the answer, and max_output_tokens {answer} leaves {max(budget, 0)} of the "
            f"model's {info.max_output_tokens}; lower max_output_tokens",
            provider=info.provider,
            model=info.id,
        )
    return Thinking({"type": "enabled", "budget_tokens": budget}, None, budget + answer)


def accepted_efforts(info: ModelInfo, wire: str) -> tuple[Effort, ...]:
    """The ``reasoning_effort`` values a call to ``info`` through an adapter of ``wire``
    (``anthropic``, else an OpenAI-style API) takes, found by the very mapping the adapter
    applies: a check at save time cannot disagree with the call."""
    accepted = []
    for effort in EFFORTS:
        try:
            if wire == "anthropic":
                anthropic_thinking(info, effort, None)
            else:
                openai_effort(info, effort)
        except UnsupportedFeature:
            continue
        accepted.append(effort)
    return tuple(accepted)
