"""Load the examples of a directory on a fresh data directory: first the knowledge in its
``knowledge/`` folder (tables from CSV, JSON Lines or Parquet files, templates, ontologies with
their data), then the agents (JSON or YAML), whose ``${table:sales}`` placeholders become the
ids of what was just made (examples/README.md)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson
import yaml

from dhub.access.principal import Principal
from dhub.domain.errors import DhubError
from dhub.domain.resources import KINDS
from dhub.knowledge.tables_import import FORMATS, Format, Source
from dhub.placeholders import fill_placeholders, placeholders
from dhub.services.agents import AgentService
from dhub.services.ontology_import import import_items, items_of
from dhub.services.resources import ResourceService
from dhub.services.tables import TableService
from dhub.store.resources import ResourceFilter

log = logging.getLogger("dhub.examples")
SUFFIXES = (".json", ".yaml", ".yml")
KNOWLEDGE = "knowledge"  # the folder of the examples directory that holds knowledge
_FAILURES = (DhubError, ValueError, OSError, yaml.YAMLError)


def read_document(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return orjson.loads(text)
    return yaml.safe_load(text)


def example_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in SUFFIXES)


@dataclass(frozen=True, slots=True)
class Makers:
    """What creates each kind of example: agents, and the knowledge they name."""

    agents: AgentService
    resources: ResourceService
    tables: TableService


Made = dict[tuple[str, str], str]  # (category, name) -> id


async def load_examples(makers: Makers, admin: Principal, directory: Path) -> int:
    """Create the examples as ``admin``; one that fails is skipped with a warning (the
    server starts all the same). How many agents were created."""
    made: Made = {}
    knowledge = directory / KNOWLEDGE
    if await asyncio.to_thread(knowledge.is_dir):
        made = await load_knowledge(makers, admin, knowledge)
    loaded = 0
    for path in await asyncio.to_thread(example_files, directory):
        try:
            doc = fill_placeholders(await asyncio.to_thread(read_document, path), made)
            await makers.agents.create(admin, doc)
            loaded += 1
        except _FAILURES as exc:
            log.warning("example %s was not loaded: %s", path.name, exc)
    log.info("loaded %d example agents from %s", loaded, directory)
    return loaded


async def load_knowledge(makers: Makers, admin: Principal, directory: Path) -> Made:
    """The tables, templates and ontologies of ``directory``, by category and name."""
    made: Made = {}
    paths = await asyncio.to_thread(lambda: sorted(p for p in directory.iterdir() if p.is_file()))
    for path in paths:
        maker = _maker_of(path)
        if maker is None:
            continue
        try:
            category, name, made_id = await maker(makers, admin, path)
            made[(category, name)] = made_id
        except _FAILURES as exc:
            log.warning("example knowledge %s was not loaded: %s", path.name, exc)
    log.info("loaded %d example tables, templates and ontologies", len(made))
    return made


Maker = Callable[[Makers, Principal, Path], Coroutine[Any, Any, tuple[str, str, str]]]


def _maker_of(path: Path) -> Maker | None:
    suffix = path.suffix.lstrip(".").lower()
    if suffix in FORMATS:
        return _table
    if path.suffix in SUFFIXES:
        return _document
    return None


async def _table(makers: Makers, admin: Principal, path: Path) -> tuple[str, str, str]:
    """A table named after the file (``sales.csv``: ``sales``), its column types inferred."""
    name = path.stem
    doc = {"name": name, "description": f"Imported from the example file {path.name}."}
    source = Source(path, cast(Format, path.suffix.lstrip(".").lower()))
    view, _ = await makers.tables.imports.create(admin, source, doc)
    return "table", name, view.record.id


async def _document(makers: Makers, admin: Principal, path: Path) -> tuple[str, str, str]:
    """A template (``category: template``), or an ontology: ``{"ontology": ..., "data":
    {"objects": [...], "links": [...]}}`` as ``dhub ontologies create -f`` takes it."""
    doc = await asyncio.to_thread(read_document, path)
    if not isinstance(doc, dict):
        raise ValueError("a knowledge document is a JSON or YAML object")
    if "ontology" in doc:
        view = await makers.resources.create(admin, "ontology", doc["ontology"])
        if "data" in doc:
            await import_items(makers.resources.db, admin, view.record.id, items_of(doc["data"]))
        return "ontology", view.record.name, view.record.id
    category = doc.get("category")
    if category != "template":
        raise ValueError(f"category {category!r}: a knowledge document is a template or ontology")
    view = await makers.resources.create(admin, "template", doc)
    return "template", view.record.name, view.record.id


async def with_ids_for(resources: ResourceService, who: Principal, doc: Any) -> Any:
    """An example's document as ``who`` would apply it: each ``${table:sales}`` placeholder
    filled with the id of the one resource of that name ``who`` can see (left as it is when
    there is none or several: the server's refusal then names it)."""
    ids: Made = {}
    for category, name in sorted(placeholders(doc)):
        if category not in KINDS:
            continue
        found = await resources.page(who, category, ResourceFilter(name=name), 2, None)
        if len(found.data) == 1:
            ids[(category, name)] = found.data[0].record.id
    return fill_placeholders(doc, ids)
