"""``dhub folders ...``: folders, what is in them, and the caller's home folder.

A folder is named by its id or its name (``Client.resolve_folder``: among the folders you
can see, other users' home folders left out, so ``home`` is yours)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from dhub.cli._common import JsonOption, client_from, done, echo_json, reporting_errors
from dhub.cli._containers import (
    FOLDER,
    echo_container,
    echo_containers,
    echo_tree,
    labelled,
    register_basics,
    register_sharing,
    tree,
)

if TYPE_CHECKING:
    from dhub.client import Client

app = typer.Typer(
    help="Folders: make them, move things into them, share and mark them (what is inside "
    "inherits their owners, grants and markings; your home folder passes nothing down).",
    no_args_is_help=True,
)

FolderArgument = Annotated[
    str, typer.Argument(metavar="FOLDER", help="The folder's name or id (folder.…).")
]
InOption = Annotated[
    str | None, typer.Option("--in", metavar="FOLDER", help="Inside this folder (name or id).")
]
CollectionOption = Annotated[
    str | None,
    typer.Option("--collection", metavar="COLLECTION", help="A collection (name or id)."),
]
LimitOption = Annotated[
    int | None, typer.Option(min=1, help="Show at most this many (default: all).")
]


@app.command("list")
def list_(
    ctx: typer.Context,
    in_: InOption = None,
    collection: CollectionOption = None,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Exactly this name.")] = None,
    limit: LimitOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the folders you can see, oldest first (--in: only those directly in a folder;
    --collection: only those in a collection)."""
    from itertools import islice

    with reporting_errors():
        api = client_from(ctx)
        found = api.iter_folders(
            q=q,
            name=name,
            folder_id=api.resolve_folder(in_)["id"] if in_ else None,
            collection_id=api.resolve_collection(collection)["id"] if collection else None,
            page_size=min(limit, 200) if limit else None,
        )
        folders = list(islice(found, limit))
        where = {str(f.get(k)) for f in folders for k in ("folder_id", "collection_id")}
        paths = {} if as_json else api.folder_paths(where)
    if as_json:
        echo_json(folders)
    else:
        echo_containers(folders, "No folders found.", paths)


# get, rename, delete, children
register_basics(
    app,
    FOLDER,
    get="Show a folder: where it is, who owns it, the markings on it and above it.",
    rename="Rename a folder (your home folder keeps its name).",
    delete="Delete an empty folder.",
    children="List what is in a folder, of every kind, that you can see (folders first).",
)


@app.command()
def home(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show your home folder: where what you create without a folder goes."""
    with reporting_errors():
        found = client_from(ctx).home_folder()
    if as_json:
        echo_json(found)
    else:
        echo_container(found)


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Unique within the folder it goes in.")],
    in_: InOption = None,
    collection: CollectionOption = None,
    description: Annotated[str | None, typer.Option(help="What it holds.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a folder: --in a folder, else at the top of --collection, else in your home
    folder."""
    if in_ is not None and collection is not None:
        raise typer.BadParameter(
            "give --in or --collection, not both (a folder inside a folder is in that "
            "folder's collection)",
            param_hint="--collection",
        )
    with reporting_errors():
        made = client_from(ctx).create_folder(
            name, folder=in_, collection=collection, description=description
        )
    done(as_json, f"created {labelled(made)}", made)


@app.command()
def move(
    ctx: typer.Context,
    folder: FolderArgument,
    to: Annotated[
        str | None, typer.Option("--to", metavar="FOLDER", help="Into this folder.")
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection", metavar="COLLECTION", help="To the top level of this collection."
        ),
    ] = None,
    home_: Annotated[bool, typer.Option("--home", help="Into your home folder.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Move a folder and everything in it (it takes sharing rights: who inherits access
    changes)."""
    with reporting_errors():
        api = client_from(ctx)
        found = FOLDER.resolve(api, folder)
        moved = move_to(api, found["id"], to, collection, home_)
    done(as_json, f"moved {labelled(moved)} {where(moved)}", moved)


def move_to(
    api: Client, resource_id: str, to: str | None, collection: str | None, home_: bool
) -> dict[str, object]:
    """Move a resource where exactly one of --to, --collection and --home says."""
    if (to is not None) + (collection is not None) + home_ != 1:
        raise typer.BadParameter(
            "say where to with one of --to FOLDER, --collection COLLECTION or --home",
            param_hint="--to",
        )
    if home_:
        to = str(api.home_folder()["id"])
    return api.move(resource_id, folder=to, collection=collection)


def where(resource: dict[str, object]) -> str:
    if resource.get("folder_id"):
        return f"into folder {resource['folder_id']}"
    return f"to the top of collection {resource.get('collection_id')}"


@app.command("tree")
def tree_(
    ctx: typer.Context,
    folder: Annotated[
        str | None,
        typer.Argument(metavar="[FOLDER]", help="Its name or id (default: your home folder "
                       "and every collection you can see)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Show a folder and everything below it, indented, folders first."""
    with reporting_errors():
        api = client_from(ctx)
        if folder is not None:
            roots = [FOLDER.resolve(api, folder)]
        else:
            roots = [api.home_folder(), *api.iter_collections()]
        trees = [tree(api, root) for root in roots]
    if as_json:
        echo_json(trees[0] if folder is not None else trees)
        return
    for node in trees:
        echo_tree(node)


# share, unshare, grants, owners, mark, unmark
register_sharing(app, FOLDER)
