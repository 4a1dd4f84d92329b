"""What ``dhub folders`` and ``dhub collections`` share: naming one, showing one and what is
in it, the tree view, and the sharing commands (built for each, as ``dhub agents`` has them).

No ``from __future__ import annotations`` here: the sharing commands are made by a factory,
and typer evaluates a command's annotations in its module's globals, where the factory's
per-kind argument (FOLDER or COLLECTION) is not; evaluated at definition time they are right.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dhub.cli._common import (
    JsonOption,
    ShareScope,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    reporting_errors,
    when,
)

if TYPE_CHECKING:
    from dhub.client import Client

Resource = dict[str, Any]
PrincipalArgument = Annotated[
    str, typer.Argument(metavar="PRINCIPAL", help="A user or group id, or public.all.")
]
MarkingArgument = Annotated[
    str, typer.Argument(metavar="MARKING", help="The marking id (marking.…).")
]
MAX_PAGE = 200  # the server's largest page


@dataclass(frozen=True)
class Kind:
    """A kind of resource, as the commands name, find and change one (folder and collection
    here; the other kinds override ``resolve``, all the sharing and versions commands use)."""

    category: str  # folder | collection

    def resolve(self, api: "Client", ref: str) -> Resource:
        """The one ``ref`` (a name or an id) stands for."""
        if self.category == "folder":
            return api.resolve_folder(ref)
        return api.resolve_collection(ref)

    def update(self, api: "Client", container_id: str, patch: Resource) -> Resource:
        if self.category == "folder":
            return api.update_folder(container_id, patch)
        return api.update_collection(container_id, patch)

    def delete(self, api: "Client", container_id: str) -> None:
        if self.category == "folder":
            api.delete_folder(container_id)
        else:
            api.delete_collection(container_id)


FOLDER, COLLECTION = Kind("folder"), Kind("collection")


def labelled(resource: Resource) -> str:
    """``name (id)``: how messages name a folder, collection or anything in one."""
    return f"{resource.get('name')} ({resource['id']})"


def markings_of(resource: Resource) -> str:
    """The markings that hide it: its own and the ones it inherits."""
    return ",".join(resource.get("effective_markings") or resource.get("markings") or [])


def echo_container(found: Resource) -> None:
    """A folder or collection as ``key: value`` lines."""
    fields = [
        ("id", str(found["id"])),
        ("name", str(found.get("name") or "")),
        ("alias", str(found.get("alias") or "-")),
        ("description", str(found.get("description") or "-")),
    ]
    if found.get("category") == "folder":
        kind = "home folder" if found.get("type") == "home" else "folder"
        fields += [
            ("type", kind),
            ("collection", str(found.get("collection_id") or "-")),
            ("in folder", str(found.get("folder_id") or "- (top level)")),
        ]
    fields += [
        ("version", f"{found.get('version')} (updated {when(found.get('updated_at'))})"),
        ("your access", str(found.get("my_share_scope") or "-")),
    ]
    owners = [str(o.get("id")) if isinstance(o, dict) else str(o)
              for o in found.get("owners") or []]  # fmt: skip
    echo_detail(
        fields,
        [
            ("owners", owners),
            ("markings", list(found.get("markings") or [])),
            ("effective markings", list(found.get("effective_markings") or [])),
        ],
    )


def echo_containers(
    items: Sequence[Resource], empty: str, paths: Mapping[str, str] | None = None
) -> None:
    """Folders or collections as a table; the folders' collection and folder by ``paths``
    (``Client.folder_paths``) where it has them, else by id."""
    if not items:
        typer.echo(empty)
        return
    if all(f.get("category") == "collection" for f in items):
        rows = [[str(c["id"]), str(c.get("name") or ""), str(c.get("description") or ""),
                 markings_of(c)] for c in items]  # fmt: skip
        echo_table(["ID", "NAME", "DESCRIPTION", "MARKINGS"], rows)
        return
    named = paths or {}

    def place(key: str, folder: Resource) -> str:
        found = str(folder.get(key) or "")
        return named.get(found, found) or "-"

    rows = [
        [str(f["id"]), str(f.get("name") or ""), place("collection_id", f),
         place("folder_id", f), markings_of(f)]
        for f in items
    ]  # fmt: skip
    echo_table(["ID", "NAME", "COLLECTION", "IN FOLDER", "MARKINGS"], rows)


def echo_children(items: Sequence[Resource], where: Resource) -> None:
    """What is in a folder or collection, of every kind, as a table."""
    if not items:
        typer.echo(f"{labelled(where)} is empty (or holds nothing you can see).")
        return
    rows = [
        [str(c["id"]), str(c.get("name") or ""), str(c.get("category") or ""), markings_of(c)]
        for c in items
    ]
    echo_table(["ID", "NAME", "KIND", "MARKINGS"], rows)


def list_children(api: "Client", container: Resource, limit: int | None = None) -> list[Resource]:
    """What is directly in a folder or at a collection's top level, folders first."""
    from itertools import islice

    page_size = min(limit, MAX_PAGE) if limit else MAX_PAGE
    if container.get("category") == "collection":
        found = api.iter_collection_children(container["id"], page_size=page_size)
    else:
        found = api.iter_folder_children(container["id"], page_size=page_size)
    items = list(islice(found, limit))
    return sorted(items, key=lambda c: c.get("category") != "folder")  # stable: ids within


def tree(api: "Client", container: Resource) -> Resource:
    """The container with ``children`` below it, folders' own children recursively."""
    below = []
    for child in list_children(api, container):
        below.append(tree(api, child) if child.get("category") == "folder" else child)
    return {**container, "children": below}


def echo_tree(node: Resource, depth: int = 0) -> None:
    """One line per item, indented two spaces a level; folders and collections end in '/'."""
    container = node.get("category") in ("folder", "collection")
    name = f"{node.get('name')}/" if container else str(node.get("name"))
    kind = "" if container else f"{node.get('category')} "
    marked = markings_of(node)
    typer.echo(f"{'  ' * depth}{name}  ({kind}{node['id']}){f'  [{marked}]' if marked else ''}")
    for child in node.get("children") or []:
        echo_tree(child, depth + 1)


# -- the commands both have --------------------------------------------------------------------


def register_basics(
    app: typer.Typer, kind: Kind, *, get: str, rename: str, delete: str, children: str
) -> None:
    """``get``, ``rename``, ``delete`` and ``children`` on ``app``, each with its help."""
    noun = kind.category
    Ref = Annotated[  # noqa: N806 - a type, named as one
        str, typer.Argument(metavar=noun.upper(), help=f"The {noun}'s name or id ({noun}.…).")
    ]

    def get_(ctx: typer.Context, ref: Ref, as_json: JsonOption = False) -> None:
        with reporting_errors():
            found = kind.resolve(client_from(ctx), ref)
        if as_json:
            echo_json(found)
        else:
            echo_container(found)

    def rename_(
        ctx: typer.Context,
        ref: Ref,
        new_name: Annotated[str, typer.Argument(metavar="NEW_NAME", help="Its new name.")],
        as_json: JsonOption = False,
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            changed = kind.update(api, found["id"], {"name": new_name})
        done(as_json, f"renamed {labelled(found)} to {changed['name']}", changed)

    def delete_(ctx: typer.Context, ref: Ref, as_json: JsonOption = False) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            kind.delete(api, found["id"])
        done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})

    def children_(
        ctx: typer.Context,
        ref: Ref,
        limit: Annotated[
            int | None, typer.Option(min=1, help="Show at most this many (default: all).")
        ] = None,
        as_json: JsonOption = False,
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            items = list_children(api, found, limit)
        if as_json:
            echo_json(items)
        else:
            echo_children(items, found)

    for command, name, text in (
        (get_, "get", get),
        (rename_, "rename", rename),
        (delete_, "delete", delete),
        (children_, "children", children),
    ):
        app.command(name, help=text)(command)  # fmt: skip


# -- sharing -----------------------------------------------------------------------------------


def register_sharing(app: typer.Typer, kind: Kind) -> None:
    """``share``, ``unshare``, ``grants``, ``owners``, ``mark`` and ``unmark`` on ``app``:
    what ``dhub agents`` has, for a folder or collection (whose grants, owners and markings
    reach everything inside it) or another kind (a table, template, ontology, secret)."""
    noun = kind.category
    Ref = Annotated[  # noqa: N806 - a type, named as one
        str, typer.Argument(metavar=noun.upper(), help=f"The {noun}'s name or id ({noun}.…).")
    ]

    def share(
        ctx: typer.Context,
        ref: Ref,
        principal: PrincipalArgument,
        scope: Annotated[
            ShareScope,
            typer.Option(help="viewer: see it; runner: also run it; editor: also change it."),
        ] = "viewer",
        as_json: JsonOption = False,
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            granted = api.grant(found["id"], principal, scope)
        message = f"shared {labelled(found)} with {granted['principal_id']} as {granted['scope']}"
        done(as_json, message, granted)

    def unshare(
        ctx: typer.Context, ref: Ref, principal: PrincipalArgument, as_json: JsonOption = False
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            api.revoke_grant(found["id"], principal)
        result = {f"{noun}_id": found["id"], "principal_id": principal, "unshared": True}
        done(as_json, f"unshared {labelled(found)} from {principal}", result)

    def grants(ctx: typer.Context, ref: Ref, as_json: JsonOption = False) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            granted = api.list_grants(found["id"])
        if as_json:
            echo_json(granted)
        elif not granted:
            typer.echo(f"{labelled(found)} is not shared with anyone.")
        else:
            keys = ("principal_id", "type", "display_name", "scope")
            rows = [[str(g.get(k) or "") for k in keys] for g in granted]
            echo_table(["PRINCIPAL", "TYPE", "NAME", "SCOPE"], rows)

    def owners(
        ctx: typer.Context,
        ref: Ref,
        principals: Annotated[
            list[str],
            typer.Argument(
                metavar="PRINCIPAL...", help="Every owner: user and group ids, or public.all."
            ),
        ],
        as_json: JsonOption = False,
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            changed = api.set_owners(kind.resolve(api, ref)["id"], principals)
        shown = [str(o["id"]) if isinstance(o, dict) else str(o)
                 for o in changed.get("owners") or []]  # fmt: skip
        done(as_json, f"owners of {labelled(changed)}: {', '.join(shown)}", changed)

    def mark(
        ctx: typer.Context, ref: Ref, marking_id: MarkingArgument, as_json: JsonOption = False
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            changed = api.mark(kind.resolve(api, ref)["id"], marking_id)
        done(as_json, f"marked {labelled(changed)}: {_markings(changed)}", changed)

    def unmark(
        ctx: typer.Context, ref: Ref, marking_id: MarkingArgument, as_json: JsonOption = False
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            changed = api.unmark(kind.resolve(api, ref)["id"], marking_id)
        done(as_json, f"unmarked {labelled(changed)}: {_markings(changed)}", changed)

    # A folder's or collection's grants, owners and markings reach what is in it.
    container = noun in ("folder", "collection")
    a_noun = _a(noun)
    inside = " and everything in it" if container else ""
    helps: dict[Callable[..., None], str] = {
        share: f"Share {a_noun}{inside} with a user, group or public.all.",
        unshare: f"Stop sharing {a_noun} with a user, group or public.all.",
        grants: f"List who {a_noun} is shared with, and how.",
        owners: f"Make exactly these users and groups the {noun}'s owners"
        + (" (of what is in it too)." if container else "."),
        mark: f"Add a marking to {a_noun}: only its holders may see it{inside}.",
        unmark: f"Remove a marking from {a_noun}.",
    }
    for command, text in helps.items():
        app.command(help=text)(command)


# -- versions ----------------------------------------------------------------------------------


def register_versions(app: typer.Typer, kind: Kind) -> None:
    """``versions`` on ``app``: a resource's versions, or one of them, as ``dhub agents
    versions`` and ``dhub agents get --version`` have them for an agent."""
    noun = kind.category
    Ref = Annotated[  # noqa: N806 - a type, named as one
        str, typer.Argument(metavar=noun.upper(), help=f"The {noun}'s name or id ({noun}.…).")
    ]

    def versions(
        ctx: typer.Context,
        ref: Ref,
        number: Annotated[
            int | None,
            typer.Argument(
                metavar="VERSION", min=1, help="Show this version (default: list them all)."
            ),
        ] = None,
        as_json: JsonOption = False,
    ) -> None:
        with reporting_errors():
            api = client_from(ctx)
            found = kind.resolve(api, ref)
            if number is not None:
                old = api.resource_version(found["id"], number)
                listed = []
            else:
                listed = api.resource_versions(found["id"])
        if number is not None:  # the whole document: a change may be anywhere in it
            echo_json(old)
            return
        if as_json:
            echo_json([{"version": v.version, "created_at": v.created_at,
                        "created_by": v.created_by} for v in listed])  # fmt: skip
            return
        rows = [[str(v.version), when(v.created_at), v.created_by] for v in listed]
        echo_table(["VERSION", "CREATED", "BY"], rows)

    text = f"List {_a(noun)}'s versions, newest first (each change to it makes one), or show one."
    app.command(help=text)(versions)


def _a(noun: str) -> str:
    """``a table``, ``an ontology``."""
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _markings(resource: Resource) -> str:
    own = set(resource.get("markings") or [])
    inherited = sorted(set(resource.get("effective_markings") or []) - own)
    shown = f"markings {', '.join(sorted(own)) or '(none)'}"
    return shown + (f" (and from above: {', '.join(inherited)})" if inherited else "")
