"""Provider configuration: the environment and the providers file (docs/providers.md).

- ``DHUB_OPENAI_API_KEY`` / ``DHUB_OPENAI_BASE_URL`` make the ``openai`` entry (a base URL and
  no key is taken for a local OpenAI-compatible server such as Ollama: Chat Completions only);
- ``DHUB_ANTHROPIC_API_KEY`` / ``DHUB_ANTHROPIC_BASE_URL`` make the ``anthropic`` entry;
- ``DHUB_PROVIDERS_FILE`` (YAML or JSON) adds named entries and models, and extends the
  catalog of the two above. The environment wins over the file for those two entries' key and
  base URL;
- ``DHUB_PRICES_FILE`` (YAML or JSON) overrides model prices (providers/prices.py).

Keys are ``SecretStr``: a repr, a log line or an API answer never shows them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, SecretStr
from pydantic import ValidationError as PydanticError

from dhub.providers.prices import ModelPrice
from dhub.providers.types import Effort

EntryType = Literal["openai", "anthropic", "openai_compatible", "scripted"]
BUILT_IN_ENV = {
    "openai": ("DHUB_OPENAI_API_KEY", "DHUB_OPENAI_BASE_URL"),
    "anthropic": ("DHUB_ANTHROPIC_API_KEY", "DHUB_ANTHROPIC_BASE_URL"),
}


class ConfigError(ValueError):
    """The providers configuration cannot be used: the message names the file and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelFields(_Strict):
    """A model's catalog entry; unset fields keep the built-in or family default."""

    context_window: PositiveInt | None = None
    max_output_tokens: PositiveInt | None = None
    tools: bool | None = None
    structured_output: bool | None = None
    vision: bool | None = None
    sampling: bool | None = Field(default=None, description="accepts temperature and top_p")
    reasoning: Literal["none", "effort", "budget", "adaptive"] | None = None
    efforts: list[Effort] | None = None
    api: Literal["chat", "responses", "messages"] | None = None


class EntryConfig(_Strict):
    """One provider entry. ``scripted`` entries answer from ``replies`` (offline demos and
    tests: text, a JSON value for structured output, or ``{"text", "tool_calls"}``)."""

    type: EntryType
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(default=None, description="read the key from this variable")
    timeout: PositiveFloat = 600.0
    max_retries: int = Field(default=3, ge=0, le=10)
    headers: dict[str, str] = Field(default={})
    models: dict[str, ModelFields] = Field(default={})
    replies: list[Any] = Field(default=[])

    def key(self, environ: Mapping[str, str]) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return environ.get(self.api_key_env) or None
        return None


class _File(_Strict):
    providers: dict[str, EntryConfig] = Field(default={})


_F = TypeVar("_F", bound=_Strict)


class _PricesFile(_Strict):
    prices: dict[str, ModelPrice] = Field(default={})


class ProvidersConfig(_Strict):
    entries: dict[str, EntryConfig] = Field(default={})
    file: str | None = None
    # Model prices that win over the maintained table: "provider/model" or "model" -> price.
    prices: dict[str, ModelPrice] = Field(default={})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProvidersConfig:
        env = os.environ if environ is None else environ
        path = env.get("DHUB_PROVIDERS_FILE") or None
        entries = dict(read_file(Path(path)).providers) if path else {}
        for name, (key_var, url_var) in BUILT_IN_ENV.items():
            key, url = env.get(key_var) or None, env.get(url_var) or None
            entry = entries.get(name)
            if key is None and url is None:
                continue
            # A base URL and no key is a local OpenAI-compatible server (Ollama, vLLM...).
            local = name == "openai" and key is None
            kind: EntryType = "openai_compatible" if local else name  # type: ignore[assignment]
            base = entry or EntryConfig(type=kind)
            changes: dict[str, Any] = {}
            if key is not None:
                changes["api_key"] = SecretStr(key)
            if url is not None:
                changes["base_url"] = url
            entries[name] = base.model_copy(update=changes)
        prices_path = env.get("DHUB_PRICES_FILE") or None
        prices = read_prices(Path(prices_path)).prices if prices_path else {}
        return cls(entries=entries, file=path, prices=prices)


def read_file(path: Path) -> _File:
    return _read(path, f"providers file {path} (DHUB_PROVIDERS_FILE)", _File)


def read_prices(path: Path) -> _PricesFile:
    return _read(path, f"prices file {path} (DHUB_PRICES_FILE)", _PricesFile)


def _read(path: Path, where: str, schema: type[_F]) -> _F:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where}: not valid {path.suffix[1:] or 'YAML'}: {exc}") from None
    try:
        return schema.model_validate(data or {})
    except PydanticError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ConfigError(f"{where}: " + "; ".join(problems)) from None
