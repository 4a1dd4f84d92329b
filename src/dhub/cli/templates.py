"""``dhub templates ...``: document templates (docs/templates.md): Markdown, HTML or text with
typed variables, rendered in a sandbox. A template is named by its id or its name."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from dhub.cli._common import (
    DocumentError,
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    load_document,
    load_patch,
    reporting_errors,
    when,
)
from dhub.cli._containers import Kind, labelled, register_sharing, register_versions

if TYPE_CHECKING:
    from dhub.client import Client

app = typer.Typer(
    help="Document templates: Markdown, HTML or text with typed variables.",
    no_args_is_help=True,
)

PDF = "application/pdf"
TemplateArgument = Annotated[
    str, typer.Argument(metavar="TEMPLATE", help="The template's name or id (template.…).")
]


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the templates you can see, oldest first."""
    with reporting_errors():
        found = list(client_from(ctx).iter_templates(q=q))
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("No templates found.")
    else:
        rows = [
            [t["id"], t["name"], t.get("format", ""), str(t.get("version", "")),
             ", ".join(v["name"] for v in t.get("variables") or [])]
            for t in found
        ]  # fmt: skip
        echo_table(["ID", "NAME", "FORMAT", "VERSION", "VARIABLES"], rows)


@app.command()
def get(ctx: typer.Context, template: TemplateArgument, as_json: JsonOption = False) -> None:
    """Show a template: its variables and body."""
    with reporting_errors():
        found = client_from(ctx).get_template(template)
    if as_json:
        echo_json(found)
        return
    variables = [
        f"{v['name']} ({v.get('type', 'string')}{'' if v.get('required', True) else ', optional'})"
        for v in found.get("variables") or []
    ]
    echo_detail(
        [("id", found["id"]), ("name", found["name"]), ("format", found.get("format", "")),
         ("version", str(found.get("version", ""))), ("updated", when(found.get("updated_at")))],
        [("variables", variables)],
    )  # fmt: skip
    typer.echo("")
    typer.echo(found.get("body", ""))


@app.command()
def create(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A template document (JSON or YAML; - for stdin).")],
    as_json: JsonOption = False,
) -> None:
    """Store a template from a file: name, format, body and variables."""
    with reporting_errors():
        made = client_from(ctx).create_template(load_document(file))
    done(as_json, f"created {made['id']} ({made['name']})", made)


@app.command()
def update(
    ctx: typer.Context,
    template: TemplateArgument,
    file: Annotated[
        Path,
        typer.Argument(
            help="The fields to change (JSON or YAML, as create takes; - for stdin): a merge "
            "patch, so a whole document replaces the body and variables."
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Change a template from a file (a changed document is a new version)."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_template(template)
        changed = api.update_template(found["id"], load_patch(file))
    done(as_json, f"updated {labelled(changed)} (version {changed.get('version')})", changed)


@app.command()
def delete(ctx: typer.Context, template: TemplateArgument, as_json: JsonOption = False) -> None:
    """Delete a template and its versions."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_template(template)
        api.delete_template(found["id"])
    done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})


@app.command()
def render(
    ctx: typer.Context,
    template: TemplateArgument,
    values: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[NAME=VALUE]...", help="Variables; a VALUE is JSON when it parses."
        ),
    ] = None,
    json_file: Annotated[
        Path | None, typer.Option("--json-file", help="Variables from a JSON object file.")
    ] = None,
    output: Annotated[
        str, typer.Option("--as", help="source (the rendered text), html or pdf.")
    ] = "source",
    out: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file (pdf needs one).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Render a template with its variables: the text on stdout, or a file with -o."""
    from dhub.cli.runs import read_values

    with reporting_errors():
        api = client_from(ctx)
        found = api.get_template(template)
        texts = {v["name"] for v in found.get("variables") or [] if v.get("type") == "string"}
        variables = read_values(values or [], json_file, texts)
        if output == "pdf":
            if out is None:
                raise DocumentError("--as pdf writes a file: give it with -o FILE.pdf")
            content = api.render_template_pdf(found["id"], variables)
            described: dict[str, Any] = {"template_id": found["id"], "media_type": PDF}
        elif output in ("source", "html"):
            shown = cast(Literal["source", "html"], output)
            rendered = api.render_template(found["id"], variables, output=shown)
            content = rendered.text.encode()
            described = dataclasses.asdict(rendered)
        else:
            raise DocumentError(f"--as is source, html or pdf, not {output!r}")
    if out is not None:
        out.write_bytes(content)
        written = {k: v for k, v in described.items() if k != "text"}
        done(as_json, f"wrote {out} ({len(content)} bytes)",
             {**written, "path": str(out), "size": len(content)})  # fmt: skip
    elif as_json:
        echo_json(described)
    else:
        sys.stdout.write(content.decode())
        sys.stdout.flush()


class _Template(Kind):
    """A template, as the sharing and versions commands find one."""

    def resolve(self, api: Client, ref: str) -> dict[str, Any]:
        return api.get_template(ref)


# share, unshare, grants, owners, mark, unmark; versions
register_sharing(app, _Template("template"))
register_versions(app, _Template("template"))
