"""``dhub ontologies ...``: ontologies, their objects and links (docs/ontologies.md). An
ontology is named by its id or its name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dhub.cli._common import (
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    load_document,
    reporting_errors,
    when,
    without_envelope,
)
from dhub.cli._containers import Kind, labelled, register_sharing, register_versions

if TYPE_CHECKING:
    from dhub.client import Client, ObjectPage, Ontology

app = typer.Typer(
    help="Ontologies: object types, their objects and the links between them.",
    no_args_is_help=True,
)

OntologyArgument = Annotated[
    str, typer.Argument(metavar="ONTOLOGY", help="The ontology's name or id (ontology.…).")
]
TypeArgument = Annotated[str, typer.Argument(metavar="TYPE", help="An object type's name.")]
KeyArgument = Annotated[str, typer.Argument(metavar="KEY", help="The object's key.")]
LimitOption = Annotated[int, typer.Option("--limit", min=1, max=200, help="At most this many.")]


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name or description.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the ontologies you can see, oldest first."""
    with reporting_errors():
        found = list(client_from(ctx).iter_ontologies(q=q))
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("No ontologies found.")
    else:
        rows = [
            [o["name"], o["id"], str(len(o.get("object_types") or [])), when(o["updated_at"])]
            for o in found
        ]
        echo_table(["NAME", "ID", "TYPES", "UPDATED"], rows)


@app.command()
def get(ctx: typer.Context, ontology: OntologyArgument, as_json: JsonOption = False) -> None:
    """Show an ontology: its object types, their properties, and its link types."""
    with reporting_errors():
        found = client_from(ctx).get_ontology(ontology)
    if as_json:
        echo_json(found)
        return
    _describe(found)


def _describe(found: Ontology) -> None:
    fields = [
        ("name", found["name"]),
        ("id", found["id"]),
        ("version", str(found["version"])),
        ("description", found.get("description") or ""),
    ]
    types = [
        f"{t['name']} (key {t['primary_key']}: "
        + ", ".join(
            f"{p['name']} {p['type']}{'*' if p.get('required') else ''}" for p in t["properties"]
        )
        + ")"
        for t in found.get("object_types") or []
    ]
    links = [
        f"{lt['name']}: {lt['from_type']} -> {lt['to_type']} ({lt['cardinality']}"
        + (f", backwards {lt['inverse']}" if lt.get("inverse") else "")
        + ")"
        for lt in found.get("link_types") or []
    ]
    echo_detail(fields, [("object types", types), ("link types", links)])


@app.command()
def create(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Option(
            "--file",
            "-f",
            dir_okay=False,
            help="The ontology document, JSON or YAML ('-' reads stdin); a file with "
            "'ontology' and 'data' (as examples/knowledge/) also imports the data.",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Create an ontology from its document (and import its data, if the file has some)."""
    with reporting_errors():
        doc = load_document(file)
        api = client_from(ctx)
        made = api.create_ontology(doc.get("ontology", doc))
        imported = api.import_objects(made["id"], doc["data"]) if "data" in doc else None
    message = f"created {made['name']} ({made['id']})"
    if imported is not None:
        message += f"; {_counts(imported)}"
    done(as_json, message, made if imported is None else {"ontology": made, "imported": imported})


@app.command()
def update(
    ctx: typer.Context,
    ontology: OntologyArgument,
    file: Annotated[
        Path,
        typer.Option(
            "--file",
            "-f",
            dir_okay=False,
            help="The fields to change, JSON or YAML ('-' reads stdin): a merge patch, so a "
            "whole document replaces the object and link types.",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Change an ontology's schema from a file (a new version; its objects and links stay and
    must fit it)."""
    with reporting_errors():
        doc = load_document(file)
        # The file create takes: a document, or one with 'ontology' (its data is not changed).
        inner = doc["ontology"] if isinstance(doc.get("ontology"), dict) else doc
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        changed = api.update_ontology(found["id"], without_envelope(inner))
    done(as_json, f"updated {labelled(changed)} (version {changed['version']})", changed)


@app.command()
def delete(ctx: typer.Context, ontology: OntologyArgument, as_json: JsonOption = False) -> None:
    """Delete an ontology, its objects and links."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        api.delete_ontology(found["id"])
    done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})


@app.command()
def objects(
    ctx: typer.Context,
    ontology: OntologyArgument,
    type: Annotated[str | None, typer.Option("--type", help="Only objects of this type.")] = None,
    q: Annotated[str | None, typer.Option("--q", help="Words in the title or text.")] = None,
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="property:op:value (eq ne lt lte gt gte in contains); "
            "JSON values are read as such (--filter total:gt:50). Repeatable.",
        ),
    ] = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Search an ontology's objects."""
    with reporting_errors():
        page = client_from(ctx).search_objects(
            ontology, type=type, q=q, filters=[_filter(f) for f in filters or []], limit=limit
        )
    _echo_page(page, as_json)


def _filter(text: str) -> dict[str, Any]:
    name, _, rest = text.partition(":")
    op, sep, raw = rest.partition(":")
    if not sep:
        op, raw = "eq", rest
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    if op == "in" and not isinstance(value, list):
        value = raw.split(",")
    return {"property": name, "op": op, "value": value}


def _echo_page(page: ObjectPage, as_json: bool) -> None:
    if as_json:
        echo_json({"data": page.data, "next_cursor": page.next_cursor})
    elif not page.data:
        typer.echo("No objects found.")
    else:
        echo_table(["TYPE", "KEY", "TITLE"], [[o["type"], o["key"], o["title"]] for o in page.data])
        if page.next_cursor:
            typer.echo("(more: raise --limit, or narrow the search)")


@app.command("object")
def object_(
    ctx: typer.Context,
    ontology: OntologyArgument,
    type: TypeArgument,
    key: KeyArgument,
    as_json: JsonOption = False,
) -> None:
    """Show one object."""
    with reporting_errors():
        found = client_from(ctx).get_object(ontology, type, key)
    if as_json:
        echo_json(found)
        return
    fields = [("type", found["type"]), ("key", found["key"]), ("title", found["title"])]
    fields += [
        (name, json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value)
        for name, value in found["properties"].items()
    ]
    echo_detail(fields, [])


@app.command()
def links(
    ctx: typer.Context,
    ontology: OntologyArgument,
    type: TypeArgument,
    key: KeyArgument,
    link: Annotated[str, typer.Argument(help="A link type's name, or its inverse's.")],
    reverse: Annotated[bool, typer.Option(help="Follow the link type backwards.")] = False,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """The objects one object is linked to."""
    with reporting_errors():
        page = client_from(ctx).follow_links(
            ontology, type, key, link, reverse=reverse, limit=limit
        )
    _echo_page(page, as_json)


@app.command("import")
def import_(
    ctx: typer.Context,
    ontology: OntologyArgument,
    file: Annotated[
        Path,
        typer.Option(
            "--file",
            "-f",
            dir_okay=False,
            help="JSON ({objects, links} or a list of items) or JSON Lines (.jsonl, .ndjson).",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Import objects and links, all or nothing."""
    with reporting_errors():
        api = client_from(ctx)
        if file.suffix.lower() in (".jsonl", ".ndjson"):
            result = api.import_objects(ontology, file.read_bytes())
        else:
            doc: Any = json.loads(file.read_text(encoding="utf-8"))
            result = api.import_objects(
                ontology, doc.get("data", doc) if isinstance(doc, dict) else doc
            )
    done(as_json, _counts(result), result)


@app.command("import-table")
def import_table(
    ctx: typer.Context,
    ontology: OntologyArgument,
    table: Annotated[
        str, typer.Argument(metavar="TABLE", help="The table's name or id (table.…).")
    ],
    type: Annotated[
        str | None, typer.Option("--type", help="Make one object of this type a row.")
    ] = None,
    maps: Annotated[
        list[str] | None,
        typer.Option(
            "--map",
            metavar="PROPERTY=COLUMN",
            help="Where a property's values come from (repeat); properties not mapped take "
            "the column of the same name; PROPERTY= leaves one out.",
        ),
    ] = None,
    link: Annotated[
        str | None, typer.Option("--link", help="Make one link of this link type a row.")
    ] = None,
    from_column: Annotated[
        str | None, typer.Option("--from", metavar="COLUMN", help="The links' 'from' keys.")
    ] = None,
    to_column: Annotated[
        str | None, typer.Option("--to", metavar="COLUMN", help="The links' 'to' keys.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Import objects (--type) and/or links (--link) from every row of a table, all or
    nothing."""
    if type is None and link is None:
        raise typer.BadParameter("give --type, --link or both", param_hint="--type")
    if maps and type is None:
        raise typer.BadParameter("--map maps the properties of --type", param_hint="--map")
    if link is not None and (from_column is None or to_column is None):
        raise typer.BadParameter("--link needs --from and --to", param_hint="--link")
    if link is None and (from_column is not None or to_column is not None):
        raise typer.BadParameter("--from and --to go with --link", param_hint="--link")
    properties = _mapping(maps or [])
    with reporting_errors():
        result = client_from(ctx).import_objects_from_table(
            ontology,
            table,
            type=type,
            properties=properties or None,
            link_type=link,
            from_column=from_column,
            to_column=to_column,
        )
    done(as_json, _counts(result), result)


def _mapping(maps: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for text in maps:
        prop, sep, column = text.partition("=")
        if not sep or not prop:
            raise typer.BadParameter(
                f"{text!r}: write PROPERTY=COLUMN, e.g. id=customer_id", param_hint="--map"
            )
        out[prop] = column or None
    return out


def _counts(result: dict[str, Any]) -> str:
    objects, links = result["objects"], result["links"]
    return (
        f"objects: {objects['created']} created, {objects['updated']} updated; links: "
        f"{links['created']} created, {links['existing']} already there"
    )


# -- changing objects and links ------------------------------------------------------------------

ValuesArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[NAME=VALUE]...",
        help="Properties; a VALUE is JSON when it parses (but stays text in a string property).",
    ),
]
JsonFileOption = Annotated[
    Path | None, typer.Option("--json-file", help="Properties from a JSON object file.")
]


def _properties(
    found: Ontology, type: str, values: list[str] | None, json_file: Path | None
) -> dict[str, Any]:
    from dhub.cli.runs import read_values

    texts = {
        p["name"]
        for t in found.get("object_types") or []
        if t["name"] == type
        for p in t.get("properties") or []
        if p.get("type") == "string"
    }
    return read_values(values or [], json_file, texts)


@app.command("create-object")
def create_object(
    ctx: typer.Context,
    ontology: OntologyArgument,
    type: TypeArgument,
    values: ValuesArgument = None,
    json_file: JsonFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create one object; its key is its type's primary key property."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        properties = _properties(found, type, values, json_file)
        made = api.create_object(found["id"], type, properties)
    done(as_json, f"created {made['type']} {made['key']} ({made['title']})", made)


@app.command("update-object")
def update_object(
    ctx: typer.Context,
    ontology: OntologyArgument,
    type: TypeArgument,
    key: KeyArgument,
    values: ValuesArgument = None,
    json_file: JsonFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change some of an object's properties (null removes a value; the key never
    changes)."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        properties = _properties(found, type, values, json_file)
        changed = api.update_object(found["id"], type, key, properties)
    done(as_json, f"updated {changed['type']} {changed['key']} ({changed['title']})", changed)


@app.command("delete-object")
def delete_object(
    ctx: typer.Context,
    ontology: OntologyArgument,
    type: TypeArgument,
    key: KeyArgument,
    as_json: JsonOption = False,
) -> None:
    """Delete an object and its links."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        api.delete_object(found["id"], type, key)
    result = {"ontology_id": found["id"], "type": type, "key": key, "deleted": True}
    done(as_json, f"deleted {type} {key} from {labelled(found)}", result)


LinkTypeArgument = Annotated[str, typer.Argument(metavar="LINK_TYPE", help="The link type's name.")]
FromArgument = Annotated[str, typer.Argument(metavar="FROM", help="The 'from' object's key.")]
ToArgument = Annotated[str, typer.Argument(metavar="TO", help="The 'to' object's key.")]


@app.command()
def link(
    ctx: typer.Context,
    ontology: OntologyArgument,
    link_type: LinkTypeArgument,
    from_key: FromArgument,
    to_key: ToArgument,
    as_json: JsonOption = False,
) -> None:
    """Link two objects (nothing new if they are linked already)."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        made = api.link_objects(found["id"], link_type, from_key, to_key)
    done(as_json, f"linked {from_key} -{link_type}-> {to_key} in {labelled(found)}", made)


@app.command()
def unlink(
    ctx: typer.Context,
    ontology: OntologyArgument,
    link_type: LinkTypeArgument,
    from_key: FromArgument,
    to_key: ToArgument,
    as_json: JsonOption = False,
) -> None:
    """Remove a link between two objects."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_ontology(ontology)
        api.unlink_objects(found["id"], link_type, from_key, to_key)
    result = {"ontology_id": found["id"], "link_type": link_type, "from": from_key,
              "to": to_key, "unlinked": True}  # fmt: skip
    done(as_json, f"unlinked {from_key} -{link_type}-> {to_key} in {labelled(found)}", result)


class _Ontology(Kind):
    """An ontology, as the sharing and versions commands find one."""

    def resolve(self, api: Client, ref: str) -> dict[str, Any]:
        return dict(api.get_ontology(ref))


# share, unshare, grants, owners, mark, unmark; versions
register_sharing(app, _Ontology("ontology"))
register_versions(app, _Ontology("ontology"))
