"""``dhub collections ...``: collections, the workspaces folders and resources sit in; their
owners, grants and markings reach everything inside. A collection is named by its id or its
name (names of collections are unique among those you can see, unless shared to you)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from dhub.cli._common import JsonOption, client_from, done, echo_json, reporting_errors
from dhub.cli._containers import (
    Kind,
    children,
    echo_children,
    echo_container,
    echo_containers,
    labelled,
    register_sharing,
)

if TYPE_CHECKING:
    from dhub.client import Client, Collection

app = typer.Typer(
    help="Collections: workspaces whose owners, grants and markings reach everything in them.",
    no_args_is_help=True,
)

CollectionArgument = Annotated[
    str, typer.Argument(metavar="COLLECTION", help="The collection's name or id (collection.…).")
]


def _resolve(api: Client, ref: str) -> Collection:
    return api.resolve_collection(ref)


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the collections you can see, oldest first."""
    with reporting_errors():
        found = list(client_from(ctx).iter_collections(q=q))
    if as_json:
        echo_json(found)
    else:
        echo_containers(found, "No collections found.")


@app.command()
def get(ctx: typer.Context, collection: CollectionArgument, as_json: JsonOption = False) -> None:
    """Show a collection: who owns it, the markings on it."""
    with reporting_errors():
        found = _resolve(client_from(ctx), collection)
    if as_json:
        echo_json(found)
    else:
        echo_container(found)


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Its name.")],
    description: Annotated[str | None, typer.Option(help="What it holds.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a collection (you own it, and so everything put in it)."""
    with reporting_errors():
        made = client_from(ctx).create_collection(name, description=description)
    done(as_json, f"created {labelled(made)}", made)


@app.command()
def rename(
    ctx: typer.Context,
    collection: CollectionArgument,
    new_name: Annotated[str, typer.Argument(metavar="NEW_NAME", help="Its new name.")],
    as_json: JsonOption = False,
) -> None:
    """Rename a collection."""
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, collection)
        changed = api.update_collection(found["id"], {"name": new_name})
    done(as_json, f"renamed {labelled(found)} to {changed['name']}", changed)


@app.command()
def delete(ctx: typer.Context, collection: CollectionArgument, as_json: JsonOption = False) -> None:
    """Delete an empty collection."""
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, collection)
        api.delete_collection(found["id"])
    done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})


@app.command("children")
def children_(
    ctx: typer.Context,
    collection: CollectionArgument,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Show at most this many (default: all).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List what is at a collection's top level (in none of its folders), folders first."""
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, collection)
        items = children(api, found, limit)
    if as_json:
        echo_json(items)
    else:
        echo_children(items, found)


@app.command("tree")
def tree_(ctx: typer.Context, collection: CollectionArgument, as_json: JsonOption = False) -> None:
    """Show a collection and everything in it, indented, folders first."""
    from dhub.cli._containers import echo_tree, tree

    with reporting_errors():
        api = client_from(ctx)
        found = tree(api, _resolve(api, collection))
    if as_json:
        echo_json(found)
    else:
        echo_tree(found)


# share, unshare, grants, owners, mark, unmark
register_sharing(app, Kind("collection", _resolve))
