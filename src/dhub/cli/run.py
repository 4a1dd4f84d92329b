"""``dhub run FILE``: run a workflow document here, in this process: no server, no token.

Nodes show up live on stderr as they start and finish; human tasks and actor confirmations
are asked at the terminal; the run's outputs are printed as JSON on stdout. Exit status: 0
when the run succeeds, 1 when it fails, 2 when the document or the inputs are unusable, 130
when interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from dhub.cli._common import DocumentError, load_document, reporting_errors

if TYPE_CHECKING:
    from dhub.engine.compile import CompiledGraph
    from dhub.runtime.executor import RunResult
    from dhub.runtime.model import ProviderModel

NO_PROVIDER_HINT = "To run it offline, pass --model-replies FILE: a JSON list of the replies."


def run_file(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="Workflow agent document, JSON or YAML (a Create body).",
            dir_okay=False,
        ),
    ],
    input_: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            metavar="NAME=VALUE",
            help="A run input (repeatable). VALUE is read as JSON when it parses, else as text; "
            "inputs the start node declares as strings are always text.",
        ),
    ] = None,
    inputs_json: Annotated[
        Path | None,
        typer.Option(
            help="A JSON object of inputs; --input values override its keys.", dir_okay=False
        ),
    ] = None,
    model_replies: Annotated[
        Path | None,
        typer.Option(
            help="A JSON list of replies that llm nodes get in order, whatever provider they "
            "name (offline: no provider is called). Without it, llm nodes call the providers "
            "configured by DHUB_OPENAI_API_KEY, DHUB_ANTHROPIC_API_KEY, DHUB_PROVIDERS_FILE...",
            dir_okay=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the whole result as JSON (status, outputs, error), also when it fails.",
        ),
    ] = False,
) -> None:
    """Run a workflow agent from a file, live, and print its outputs as JSON."""
    # Imported here, not at the top: `dhub --help` and the server commands need none of it.
    import asyncio

    from rich.console import Console

    from dhub.cli._live import LiveView, TerminalHuman
    from dhub.observability import traces
    from dhub.runtime.executor import run_workflow
    from dhub.runtime.ports import RealClock, SandboxFunctions
    from dhub.sandbox.runner import SandboxRunner, SandboxSettings
    from dhub.settings import Settings

    with reporting_errors():
        graph = _compile(load_document(file), file)
        inputs = _inputs(graph, input_ or [], inputs_json)
        model = _model(model_replies)
    console = Console(stderr=True)
    view = LiveView(console)
    try:
        sandbox = SandboxSettings.from_env(Settings.from_env().data_dir)
    except ValueError as exc:
        _stop([f"Error: {exc}"], 2)

    async def run() -> RunResult:
        functions = SandboxFunctions(
            SandboxRunner(sandbox), owner=str(file.resolve()), server=False
        )
        context: dict[str, Any] = {"agent_id": graph.spec.name}
        traced = traces.run_trace(graph, context, resumed=False)  # None: tracing is off
        spans = traces.observer(traced)

        def observe(event: dict[str, Any]) -> None:
            view.show(event)
            if spans is not None:
                spans(event)

        try:
            return await traces.traced(traced, run_workflow(
                graph, inputs, functions=functions, model=traces.model_port(model, traced),
                clock=RealClock(), human=TerminalHuman(view), observer=observe,
                context=context, live=view.show,
            ))  # fmt: skip
        finally:
            await functions.close()
            await model.close()

    try:
        traces.start()  # OTEL_* variables, as for the server (docs/observability.md)
    except ValueError as exc:
        _stop([f"Error: {exc}"], 2)
    try:
        result = asyncio.run(run())
    except KeyboardInterrupt:
        _stop(["Cancelled."], 130)
    finally:
        traces.stop()  # the spans batched: exported before the process ends
    _report(result, as_json)


def _compile(doc: dict[str, Any], file: Path) -> CompiledGraph:
    from dhub.domain.errors import InvalidInput
    from dhub.engine.compile import compile_document

    try:
        return compile_document(doc)
    except InvalidInput as exc:
        count = len(exc.errors)
        lines = [f"Error: {file} is not a valid agent ({count} problem{'s' * (count != 1)}):"]
        _stop([*lines, *(f"  {e.loc or '(document)'}: {e.message}" for e in exc.errors)], 2)
    except ValueError:  # a valid react agent: only workflows run here
        mode = doc.get("mode", "react")
        _stop([f"Error: {file} is a {mode} agent; `dhub run` runs workflow agents only."], 2)


def _inputs(graph: CompiledGraph, pairs: list[str], inputs_json: Path | None) -> dict[str, Any]:
    from dhub.domain.nodes import StartWorkflowNode
    from dhub.engine.stepper import Stepper
    from dhub.engine.values import InputError

    inputs = _json_file(inputs_json, dict, "a JSON object") if inputs_json else {}
    start = graph.nodes[graph.start]
    assert isinstance(start, StartWorkflowNode)
    texts = {v.name for v in start.config.variables if v.type == "string"}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise DocumentError(f"--input takes NAME=VALUE, got {pair!r}")
        inputs[name] = raw if name in texts else _json_or_text(raw)
    try:
        Stepper(graph).check_inputs(inputs)
    except InputError as exc:
        declared = ", ".join(f"{v.name} ({v.type}{'' if v.required else ', optional'})"
                             for v in start.config.variables)  # fmt: skip
        raise DocumentError(f"{exc}. The workflow takes: {declared or 'no inputs'}") from exc
    return inputs


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _json_file(path: Path, kind: type, what: str) -> Any:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DocumentError(f"cannot read {path} as JSON: {exc}") from exc
    if not isinstance(value, kind):
        raise DocumentError(f"{path} must hold {what}, not {type(value).__name__}")
    return value


def _model(replies: Path | None) -> ProviderModel:
    from dhub.providers.config import ConfigError, ProvidersConfig
    from dhub.providers.registry import Providers
    from dhub.providers.testing import ScriptedModel
    from dhub.runtime.model import ProviderModel

    if replies is not None:
        providers = Providers()
        providers.answer_all(ScriptedModel(_json_file(replies, list, "a JSON list of replies")))
        return ProviderModel(providers)
    try:
        providers = Providers.from_config(ProvidersConfig.from_env())
    except ConfigError as exc:
        raise DocumentError(str(exc)) from exc
    providers.hint = NO_PROVIDER_HINT
    return ProviderModel(providers)


def _report(result: RunResult, as_json: bool) -> None:
    if as_json:
        whole = {"status": result.status, "outputs": result.outputs, "error": result.error}
        typer.echo(json.dumps(whole, indent=2, ensure_ascii=False))
    elif result.status == "succeeded":
        typer.echo(json.dumps(result.outputs, indent=2, ensure_ascii=False))
    if result.status == "succeeded":
        return
    error = result.error or {}
    where = f"node '{error['node_id']}' failed" if error.get("node_id") else "the run failed"
    kind = f" ({error['kind']})" if error.get("kind") else ""
    _stop([f"Error: {where}{kind}: {error.get('message') or result.status}"], 1)


def _stop(lines: list[str], status: int) -> NoReturn:
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(status)
