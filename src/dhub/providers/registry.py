"""The configured provider entries of a process, their model catalog, and a client per entry.

Adapters (and the SDKs they import) are built on first use, so a server with providers
configured but unused starts as fast as one without.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dhub.providers import catalog, reasoning
from dhub.providers.catalog import ModelInfo
from dhub.providers.client import ModelClient, RetryPolicy
from dhub.providers.config import BUILT_IN_ENV, EntryConfig, ProvidersConfig
from dhub.providers.errors import ProviderError
from dhub.providers.prices import Prices
from dhub.providers.tokens import TokenCounter
from dhub.providers.types import Effort, ModelProvider

DOCS = "docs/providers.md"
_ADAPTER_WIRES = ("openai", "anthropic", "openai_compatible")  # those that map efforts


@dataclass
class _Entry:
    name: str
    wire: str  # openai | anthropic | openai_compatible | scripted | demo
    models: dict[str, ModelInfo]
    make: Callable[[Callable[[str], ModelInfo]], ModelProvider]
    policy: RetryPolicy
    client: ModelClient | None = field(default=None)

    def info(self, model: str) -> ModelInfo:
        found = self.models.get(model)
        return found or catalog.family_default(self.wire, self.name, model)


class Providers:
    """Provider entries by name. ``client(name)`` is the way to call a model."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._entries: dict[str, _Entry] = {}
        self.counter = counter or TokenCounter()
        self.file: str | None = None
        self.hint = ""  # said after "not configured" (e.g. how to run offline)
        self._fallback: _Entry | None = None
        self.demo = False  # the demo model answers for names not configured (enable_demo)
        self._demos: dict[str, _Entry] = {}
        self.prices = Prices()  # what a call cost (providers/prices.py)

    @classmethod
    def from_config(
        cls, config: ProvidersConfig, environ: Mapping[str, str] | None = None
    ) -> Providers:
        env = os.environ if environ is None else environ
        providers = cls()
        providers.file = config.file
        providers.prices = Prices(config.prices)
        for name, entry in config.entries.items():
            providers._entries[name] = _from_config(name, entry, env)
        return providers

    def add(
        self,
        provider: ModelProvider,
        models: Mapping[str, ModelInfo] | None = None,
        policy: RetryPolicy | None = None,
        wire: str = "scripted",
    ) -> None:
        """Register a ready provider (a test model, an adapter built by hand) under its name."""
        self._entries[provider.name] = _Entry(
            provider.name, wire, dict(models or {}), lambda _: provider,
            policy or RetryPolicy(),
        )  # fmt: skip

    def answer_all(self, provider: ModelProvider) -> None:
        """Let ``provider`` (a test model) answer for every provider name not configured."""
        self.add(provider)
        self._fallback = self._entries.pop(provider.name)

    def enable_demo(self) -> None:
        """Let the demo model (providers/demo.py) answer, clearly labelled, for every provider
        name not configured; a configured entry is never replaced."""
        self.demo = True

    def is_demo(self, provider: str) -> bool:
        """Whether the demo model answers for ``provider``."""
        return self.demo and provider not in self._entries and self._fallback is None

    def resolve(self, provider: str) -> dict[str, Any]:
        """What answers for ``provider``: its entry, the demo model, or nothing (and then
        how to configure it)."""
        entry = self._entries.get(provider) or self._fallback
        demo = entry is None and self.demo
        return {
            "name": provider,
            "configured": provider in self._entries,
            "type": entry.wire if entry is not None else "demo" if demo else None,
            "demo": demo,
            "configure": None if provider in self._entries else how_to_configure(provider),
        }

    def wire(self, provider: str) -> str:
        """The entry's type: openai, anthropic, openai_compatible or scripted."""
        return self._entry(provider, "").wire

    def cost(
        self, provider: str, model: str, usage: Mapping[str, Any]
    ) -> tuple[float | None, str | None]:
        """What a call of ``provider``/``model`` with ``usage`` cost in US dollars (0 when the
        demo model answered), or None and a note saying how to price the model."""
        if self.is_demo(provider):
            return 0.0, None
        entry = self._entries.get(provider) or self._fallback
        return self.prices.cost(provider, entry.wire if entry else "", model, usage)

    @property
    def names(self) -> list[str]:
        return sorted(self._entries)

    def model(self, provider: str, model: str) -> ModelInfo:
        return self._entry(provider, model).info(model)

    def catalog(self) -> list[ModelInfo]:
        return [m for name in self.names for m in self._entries[name].models.values()]

    def client(self, provider: str, model: str = "") -> ModelClient:
        entry = self._entry(provider, model)
        if entry.client is None:
            entry.client = ModelClient(
                entry.make(entry.info), entry.info, entry.policy, self.counter
            )
        return entry.client

    def refused_effort(self, provider: str, model: str, effort: str) -> tuple[Effort, ...] | None:
        """The efforts ``model`` takes, when the catalog knows it cannot take ``effort``; None
        when it can, or when the catalog does not know (a provider not configured, a model
        not listed, a test model): only what is known is refused."""
        try:
            entry = self._entry(provider, model)
        except ProviderError:
            return None
        info = entry.info(model)
        if entry.wire not in _ADAPTER_WIRES or not info.known:
            return None
        accepted = reasoning.accepted_efforts(info, entry.wire)
        return None if effort in accepted else accepted

    def input_budget(self, provider: str, model: str, wanted: int) -> int:
        """``max_input_tokens`` as it applies: never more than the model's context window."""
        return min(wanted, self.model(provider, model).context_window)

    def budget(self, default: int) -> Callable[[str, str, int | None], int]:
        """A react agent's budget: its ``max_input_tokens`` (or ``default``) capped at its
        model's context window; uncapped for a provider not configured (its calls fail
        anyway, saying what to set)."""

        def budget(provider: str, model: str, wanted: int | None) -> int:
            try:
                return self.input_budget(provider, model, wanted or default)
            except ProviderError:
                return wanted or default

        return budget

    async def aclose(self) -> None:
        for entry in [*self._entries.values(), *self._demos.values()]:
            if entry.client is not None:
                await entry.client.provider.aclose()
                entry.client = None

    def _entry(self, provider: str, model: str) -> _Entry:
        entry = self._entries.get(provider) or self._fallback
        if entry is None and self.demo:
            entry = self._demo(provider)
        if entry is None:
            error = not_configured(provider, model, self.names, self.file)
            if self.hint:
                error.message += " " + self.hint
            raise error
        return entry

    def _demo(self, provider: str) -> _Entry:
        entry = self._demos.get(provider)
        if entry is None:
            from dhub.providers.demo import DemoModel

            model = DemoModel(provider, how_to_configure(provider))
            entry = _Entry(provider, "demo", {}, lambda _: model, RetryPolicy(max_retries=0))
            self._demos[provider] = entry
        return entry


def how_to_configure(provider: str) -> str:
    """The one thing to do to make ``provider`` a real model provider, as a sentence part."""
    if provider in BUILT_IN_ENV:
        return f"set {BUILT_IN_ENV[provider][0]}"
    return f"add an entry named '{provider}' to the providers file (DHUB_PROVIDERS_FILE)"


def not_configured(
    provider: str, model: str, configured: list[str], file: str | None
) -> ProviderError:
    """The error that says exactly what to set."""
    if provider in BUILT_IN_ENV:
        key, url = BUILT_IN_ENV[provider]
        how = f"set {key}"
        if provider == "openai":
            how += (
                f" (or {url} for an OpenAI-compatible server, e.g. "
                "http://localhost:11434/v1 for Ollama)"
            )
        how += f", or add an entry named '{provider}' to the providers file (DHUB_PROVIDERS_FILE)"
    else:
        how = (
            f"add an entry named '{provider}' to the providers file (DHUB_PROVIDERS_FILE"
            f"{'=' + file if file else ''}), with its type and base_url"
        )
    have = ", ".join(configured) if configured else "none"
    return ProviderError(
        "no_provider",
        f"model provider '{provider}' is not configured: {how}; see {DOCS}. "
        f"Configured providers: {have}.",
        provider=provider,
        model=model,
    )


def _from_config(name: str, entry: EntryConfig, env: Mapping[str, str]) -> _Entry:
    wire = entry.type
    models = catalog.built_in_for(wire, name)
    for model_id, fields in entry.models.items():
        base = models.get(model_id) or catalog.family_default(wire, name, model_id)
        models[model_id] = catalog.configured(
            name, model_id, base, fields.model_dump(exclude_none=True)
        )
    policy = RetryPolicy(max_retries=entry.max_retries, timeout=entry.timeout)
    key = entry.key(env)
    return _Entry(name, wire, models, _maker(name, entry, key), policy)


def _maker(
    name: str, entry: EntryConfig, key: str | None
) -> Callable[[Callable[[str], ModelInfo]], ModelProvider]:
    def make(models: Callable[[str], ModelInfo]) -> ModelProvider:
        if entry.type == "scripted":
            from dhub.providers.testing import ScriptedModel

            return ScriptedModel(entry.replies, name=name)
        if entry.type == "anthropic":
            from dhub.providers.anthropic import AnthropicAdapter

            return AnthropicAdapter(
                name, api_key=key, base_url=entry.base_url, models=models,
                timeout=entry.timeout, headers=entry.headers,
            )  # fmt: skip
        from dhub.providers.openai import OpenAIAdapter

        return OpenAIAdapter(
            name, api_key=key, base_url=entry.base_url, models=models, timeout=entry.timeout,
            headers=entry.headers, compatible=entry.type == "openai_compatible",
        )  # fmt: skip

    return make
