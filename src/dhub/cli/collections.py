"""``dhub collections ...``: collections, the workspaces folders and resources sit in; their
owners, grants and markings reach everything inside. A collection is named by its id or its
name (names of collections are unique among those you can see, unless shared to you)."""

from __future__ import annotations

from typing import Annotated

import typer

from dhub.cli._common import JsonOption, client_from, done, echo_json, reporting_errors
from dhub.cli._containers import (
    COLLECTION,
    echo_containers,
    echo_tree,
    labelled,
    register_basics,
    register_sharing,
    tree,
)

app = typer.Typer(
    help="Collections: workspaces whose owners, grants and markings reach everything in them.",
    no_args_is_help=True,
)

CollectionArgument = Annotated[
    str, typer.Argument(metavar="COLLECTION", help="The collection's name or id (collection.…).")
]


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


# get, rename, delete, children
register_basics(
    app,
    COLLECTION,
    get="Show a collection: who owns it, the markings on it.",
    rename="Rename a collection.",
    delete="Delete an empty collection.",
    children="List what is at a collection's top level (in none of its folders), folders first.",
)


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


@app.command("tree")
def tree_(ctx: typer.Context, collection: CollectionArgument, as_json: JsonOption = False) -> None:
    """Show a collection and everything in it, indented, folders first."""
    with reporting_errors():
        api = client_from(ctx)
        found = tree(api, COLLECTION.resolve(api, collection))
    if as_json:
        echo_json(found)
    else:
        echo_tree(found)


# share, unshare, grants, owners, mark, unmark
register_sharing(app, COLLECTION)
