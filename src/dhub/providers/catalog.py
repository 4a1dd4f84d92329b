"""The model catalog: what each model can do and how much it holds (DESIGN.md 6).

Built-in entries cover the common OpenAI and Anthropic models; an unlisted model of a known
provider gets its family's defaults (``known: false`` in ``GET /api/v1/models``); the providers
file adds or overrides entries (local models served by Ollama, vLLM, ...).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dhub.providers.types import Effort

WireApi = Literal["chat", "responses", "messages"]
ThinkingStyle = Literal["none", "effort", "budget", "adaptive"]

# OpenAI's native ``reasoning_effort`` ladders, by model family.
_O_SERIES: tuple[Effort, ...] = ("low", "medium", "high")
_GPT5: tuple[Effort, ...] = ("minimal", "low", "medium", "high")
_GPT51: tuple[Effort, ...] = ("none", "low", "medium", "high")
_GPT52: tuple[Effort, ...] = ("none", "low", "medium", "high", "xhigh")
_CLAUDE_EFFORT: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class ModelInfo:
    """One model of one provider entry.

    ``thinking`` says how reasoning is controlled: ``effort`` (a native effort value from
    ``efforts``, OpenAI), ``budget`` (Anthropic thinking token budgets), ``adaptive``
    (Anthropic adaptive thinking with an effort from ``efforts``) or ``none`` (the model does
    not reason). ``api`` is the wire API the adapter uses for it; ``sampling`` is False for
    models that refuse ``temperature`` and ``top_p`` (OpenAI's reasoning models)."""

    provider: str
    id: str
    context_window: int
    max_output_tokens: int
    tools: bool = True
    structured_output: bool = True
    vision: bool = False
    thinking: ThinkingStyle = "none"
    efforts: tuple[Effort, ...] = ()
    api: WireApi = "chat"
    known: bool = True
    sampling: bool = True

    @property
    def reasoning(self) -> bool:
        return self.thinking != "none"

    def as_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "id": self.id,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "capabilities": {
                "tools": self.tools,
                "structured_output": self.structured_output,
                "reasoning": self.reasoning,
                "vision": self.vision,
            },
            "reasoning_efforts": list(self.efforts) if self.thinking != "budget" else None,
            "known": self.known,
        }


def _openai(
    id: str, window: int, output: int, *, vision: bool = True, efforts: tuple[Effort, ...] = ()
) -> ModelInfo:
    thinking: ThinkingStyle = "effort" if efforts else "none"
    api: WireApi = "responses" if efforts else "chat"
    return ModelInfo("openai", id, window, output, vision=vision, thinking=thinking,
                     efforts=efforts, api=api, sampling=not efforts)  # fmt: skip


def _claude(id: str, output: int, *, adaptive: bool = False) -> ModelInfo:
    if adaptive:
        return ModelInfo("anthropic", id, 200_000, output, vision=True, thinking="adaptive",
                         efforts=_CLAUDE_EFFORT, api="messages")  # fmt: skip
    return ModelInfo("anthropic", id, 200_000, output, vision=True, thinking="budget",
                     api="messages")  # fmt: skip


BUILT_IN: tuple[ModelInfo, ...] = (
    _openai("gpt-4o", 128_000, 16_384),
    _openai("gpt-4o-mini", 128_000, 16_384),
    _openai("gpt-4.1", 1_047_576, 32_768),
    _openai("gpt-4.1-mini", 1_047_576, 32_768),
    _openai("gpt-4.1-nano", 1_047_576, 32_768),
    _openai("o3", 200_000, 100_000, efforts=_O_SERIES),
    _openai("o3-mini", 200_000, 100_000, vision=False, efforts=_O_SERIES),
    _openai("o4-mini", 200_000, 100_000, efforts=_O_SERIES),
    _openai("gpt-5", 400_000, 128_000, efforts=_GPT5),
    _openai("gpt-5-mini", 400_000, 128_000, efforts=_GPT5),
    _openai("gpt-5-nano", 400_000, 128_000, efforts=_GPT5),
    _openai("gpt-5.1", 400_000, 128_000, efforts=_GPT51),
    _openai("gpt-5.2", 400_000, 128_000, efforts=_GPT52),
    _claude("claude-haiku-4-5", 64_000),
    _claude("claude-sonnet-4-5", 64_000),
    _claude("claude-opus-4-5", 64_000),
    _claude("claude-opus-4-6", 128_000, adaptive=True),
)


def family_default(wire: str, provider: str, model: str) -> ModelInfo:
    """What to assume of a model the catalog does not list, by its provider's wire format
    and its name: generous enough to use, honest that it is a guess (``known=False``)."""
    if wire == "anthropic":
        return dataclasses.replace(_claude(model, 64_000), provider=provider, known=False)
    if wire == "openai" and re.match(r"o\d", model):
        return dataclasses.replace(
            _openai(model, 200_000, 100_000, efforts=_O_SERIES), provider=provider, known=False
        )
    if wire == "openai" and model.startswith("gpt-5"):
        return dataclasses.replace(
            _openai(model, 400_000, 128_000, efforts=_GPT5), provider=provider, known=False
        )
    if wire == "openai":
        return ModelInfo(provider, model, 128_000, 16_384, vision=True, known=False)
    # A local or third-party OpenAI-compatible server: modest limits until configured.
    return ModelInfo(provider, model, 32_768, 4_096, known=False)


def built_in_for(wire: str, provider: str) -> dict[str, ModelInfo]:
    """The built-in entries an entry of wire format ``wire`` named ``provider`` starts with."""
    source = {"openai": "openai", "anthropic": "anthropic"}.get(wire)
    return {
        m.id: dataclasses.replace(m, provider=provider) for m in BUILT_IN if m.provider == source
    }


def configured(provider: str, model: str, base: ModelInfo, fields: Mapping[str, Any]) -> ModelInfo:
    """``base`` with the fields a providers file sets for it (already validated)."""
    changes: dict[str, Any] = {"provider": provider, "id": model, "known": True}
    for name in ("context_window", "max_output_tokens", "tools", "structured_output", "vision",
                 "sampling"):  # fmt: skip
        if fields.get(name) is not None:
            changes[name] = fields[name]
    if fields.get("reasoning") is not None:
        changes["thinking"] = fields["reasoning"]
    if fields.get("efforts") is not None:
        changes["efforts"] = tuple(fields["efforts"])
    if fields.get("api") is not None:
        changes["api"] = fields["api"]
    info = dataclasses.replace(base, **changes)
    if info.thinking in ("effort", "adaptive") and not info.efforts:
        info = dataclasses.replace(info, efforts=("low", "medium", "high"))
    return info
