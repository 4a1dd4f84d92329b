"""Structured output: the model's text parsed as JSON and checked against the schema."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from dhub.providers.errors import ProviderError

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```\s*$", re.DOTALL)


def parse_output(text: str, schema: Mapping[str, Any], provider: str, model: str) -> Any:
    """The value ``text`` holds, valid against ``schema``; ``invalid_output`` otherwise, with
    where and why (a local model may wrap JSON in a Markdown fence: that is accepted)."""
    body = text.strip()
    if fenced := _FENCE.match(body):
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        shown = body if len(body) <= 200 else body[:200] + "…"
        raise ProviderError(
            "invalid_output",
            f"the model was asked for JSON matching the response schema and answered text that "
            f"is not JSON ({exc.msg} at position {exc.pos}): {shown!r}",
            provider=provider,
            model=model,
        ) from None
    problems = schema_problems(value, schema)
    if problems:
        raise ProviderError(
            "invalid_output",
            "the model's JSON does not match the response schema: " + "; ".join(problems[:5]),
            provider=provider,
            model=model,
        )
    return value


def schema_problems(value: Any, schema: Mapping[str, Any]) -> list[str]:
    try:
        validator = Draft202012Validator(dict(schema))
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except SchemaError as exc:
        return [f"the response schema itself is invalid: {exc.message}"]
    return [f"at {_where(e.absolute_path)}: {e.message}" for e in errors]


def _where(path: Any) -> str:
    parts = list(path)
    return "/" + "/".join(str(p) for p in parts) if parts else "the top level"
