"""Provider configuration from the environment and the providers file; the errors that say
what to set; keys that never show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dhub.providers.config import ConfigError, ProvidersConfig
from dhub.providers.errors import ProviderError
from dhub.providers.registry import Providers

KEY = "sk-live-0123456789abcdef"


def test_the_environment_makes_the_openai_and_anthropic_entries() -> None:
    config = ProvidersConfig.from_env(
        {
            "DHUB_OPENAI_API_KEY": KEY,
            "DHUB_ANTHROPIC_API_KEY": "sk-ant-1",
            "DHUB_ANTHROPIC_BASE_URL": "http://127.0.0.1:9/",
        }
    )
    assert set(config.entries) == {"openai", "anthropic"}
    assert config.entries["openai"].type == "openai"
    assert config.entries["openai"].key({}) == KEY
    assert config.entries["anthropic"].base_url == "http://127.0.0.1:9/"
    providers = Providers.from_config(config, {})
    assert providers.names == ["anthropic", "openai"]
    assert providers.model("openai", "gpt-4o-mini").context_window == 128_000


def test_a_base_url_without_a_key_is_a_local_openai_compatible_server() -> None:
    config = ProvidersConfig.from_env({"DHUB_OPENAI_BASE_URL": "http://localhost:11434/v1"})
    entry = config.entries["openai"]
    assert entry.type == "openai_compatible" and entry.key({}) is None
    info = Providers.from_config(config, {}).model("openai", "llama3.2")
    assert not info.known and info.api == "chat"


def test_keys_never_show_in_reprs_or_dumps() -> None:
    config = ProvidersConfig.from_env({"DHUB_OPENAI_API_KEY": KEY})
    assert KEY not in repr(config) and KEY not in str(config)
    assert KEY not in config.model_dump_json()


def test_the_providers_file_adds_entries_and_models(tmp_path: Path) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text(
        """
providers:
  ollama:
    type: openai_compatible
    base_url: http://localhost:11434/v1
    timeout: 120
    models:
      qwen3:
        context_window: 40960
        max_output_tokens: 8192
        reasoning: effort
        vision: false
  openai:
    type: openai
    api_key_env: MY_OPENAI_KEY
    models:
      ft:gpt-4o-mini:acme:
        context_window: 64000
""",
        encoding="utf-8",
    )
    env = {"DHUB_PROVIDERS_FILE": str(path), "MY_OPENAI_KEY": KEY}
    providers = Providers.from_config(ProvidersConfig.from_env(env), env)
    qwen = providers.model("ollama", "qwen3")
    assert (qwen.context_window, qwen.max_output_tokens, qwen.reasoning) == (40960, 8192, True)
    assert qwen.efforts == ("low", "medium", "high") and qwen.known
    tuned = providers.model("openai", "ft:gpt-4o-mini:acme")
    assert tuned.context_window == 64000 and tuned.known
    ids = {(m.provider, m.id) for m in providers.catalog()}
    assert ("ollama", "qwen3") in ids and ("openai", "gpt-4o") in ids
    assert providers.input_budget("ollama", "qwen3", 100_000) == 40960
    assert providers.input_budget("ollama", "qwen3", 16_000) == 16_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("providers:\n  x:\n    type: cohere\n", "providers.x.type: Input should be 'openai'"),
        ("providers:\n  x:\n    type: openai\n    bogus: 1\n", "providers.x.bogus: Extra inputs"),
        (
            "providers:\n  x:\n    type: openai\n    models:\n"
            "      m:\n        context_window: 0\n",
            "providers.x.models.m.context_window: Input should be greater than 0",
        ),
        ("providers: [\n", "not valid yaml"),
    ],
)
def test_a_bad_providers_file_names_the_file_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        ProvidersConfig.from_env({"DHUB_PROVIDERS_FILE": str(path)})
    assert str(path) in str(caught.value) and expected in str(caught.value)


def test_a_missing_providers_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        ProvidersConfig.from_env({"DHUB_PROVIDERS_FILE": str(tmp_path / "nope.json")})


def test_json_providers_files_work(tmp_path: Path) -> None:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps({"providers": {"demo": {"type": "scripted", "replies": ["hi"]}}}))
    providers = Providers.from_config(ProvidersConfig.from_env({"DHUB_PROVIDERS_FILE": str(path)}))
    assert providers.names == ["demo"] and providers.wire("demo") == "scripted"


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("openai", "model provider 'openai' is not configured: set DHUB_OPENAI_API_KEY (or "
                   "DHUB_OPENAI_BASE_URL for an OpenAI-compatible server, e.g. "
                   "http://localhost:11434/v1 for Ollama)"),
        ("anthropic", "model provider 'anthropic' is not configured: set DHUB_ANTHROPIC_API_KEY, "
                      "or add an entry named 'anthropic' to the providers file"),
        ("ollama", "model provider 'ollama' is not configured: add an entry named 'ollama' to "
                   "the providers file (DHUB_PROVIDERS_FILE)"),
    ],
)  # fmt: skip
def test_an_unconfigured_provider_says_exactly_what_to_set(provider: str, expected: str) -> None:
    with pytest.raises(ProviderError) as caught:
        Providers().client(provider, "some-model")
    assert caught.value.kind == "no_provider"
    assert expected in caught.value.message
    assert "Configured providers: none." in caught.value.message
