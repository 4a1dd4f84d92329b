"""What the server's model catalog knows a document's models cannot do (DESIGN.md 6).

The engine's validator is pure and knows no providers; these checks need the server's provider
configuration, so they run in the services, beside the reference checks: when an agent is
saved or validated, and when a run starts with a ``reasoning_effort`` of its own. Only what the
catalog knows is refused: a provider not configured here, a model it does not list, or a test
model takes any value, and a run fails later if the model refuses it after all.
"""

from __future__ import annotations

from collections.abc import Iterator

from dhub.domain.agent import AgentSpec
from dhub.domain.errors import FieldError
from dhub.domain.nodes import LLMWorkflowNode
from dhub.domain.pointers import join
from dhub.engine.compile import CompiledGraph
from dhub.engine.react_config import AgentNode, ReactConfig
from dhub.providers.registry import Providers


def effort_errors(providers: Providers | None, spec: AgentSpec) -> list[FieldError]:
    """A FieldError for each ``reasoning_effort`` of ``spec`` its model cannot take."""
    if providers is None:
        return []
    errors = []
    agent = spec.agent
    if spec.mode == "react" and agent is not None and agent.reasoning_effort is not None:
        where = join("agent", "reasoning_effort")
        errors += _check(providers, where, agent.model_provider, agent.model,
                         agent.reasoning_effort)  # fmt: skip
    for i, node in enumerate(spec.nodes):
        config = node.config if isinstance(node, LLMWorkflowNode) else None
        if config is not None and config.reasoning_effort is not None:
            where = join("nodes", i, "config", "reasoning_effort")
            errors += _check(providers, where, config.model_provider, config.model,
                             config.reasoning_effort)  # fmt: skip
    return errors


def override_errors(
    providers: Providers | None, graph: CompiledGraph, effort: str
) -> list[FieldError]:
    """A run's own ``reasoning_effort`` applies to every model call of a react agent's loop,
    its delegates' included: each of their models must take it."""
    if providers is None:
        return []
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for who, config in _loops(graph):
        if (config.model_provider, config.model) in seen:
            continue
        seen.add((config.model_provider, config.model))
        errors += _check(providers, "/reasoning_effort", config.model_provider, config.model,
                         effort, who)  # fmt: skip
    return errors


def _loops(graph: CompiledGraph) -> Iterator[tuple[str, ReactConfig]]:
    for node in graph.nodes.values():
        if isinstance(node, AgentNode):
            yield "the agent's", node.config
            for role in node.config.roles:
                yield f"role '{role.name}''s", role.config


def _check(
    providers: Providers, where: str, provider: str, model: str, effort: str, who: str = ""
) -> list[FieldError]:
    accepted = providers.refused_effort(provider, model, effort)
    if accepted is None:
        return []
    whose = f"{who} model" if who else "model"
    takes = ", ".join(f"'{e}'" for e in accepted)
    if accepted == ("none",):
        what = f"it does not reason, so it takes only {takes} (or null)"
        fix = "or pick a reasoning model (GET /api/v1/models lists each model's efforts)"
    else:
        what = f"it takes {takes} (or null)"
        fix = "or pick another model (GET /api/v1/models lists each model's efforts)"
    return [
        FieldError(
            where,
            f"reasoning_effort '{effort}' is not one the {whose} '{model}' of provider "
            f"'{provider}' can take: {what}. Set reasoning_effort to one of those, {fix}.",
            "unsupported_effort",
        )
    ]
