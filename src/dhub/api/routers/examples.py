"""/api/v1/examples: the example agents this server was started with (`--examples DIR`), so
a user can apply one (POST its document to /api/v1/agents) from the console. A document's
``${table:sales}`` placeholders come filled with what the caller can see by those names."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from dhub.api.deps import Ctx
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.services.examples import example_files, read_document, with_ids_for

router = APIRouter(tags=["examples"], responses=ERROR_RESPONSES)


class Example(BaseModel):
    file: str
    name: str
    description: str
    mode: str
    document: dict[str, Any]


class ExampleList(BaseModel):
    data: list[Example]


@router.get("/examples", response_model=ExampleList)
async def list_examples(request: Request, ctx: Ctx) -> JSON:
    """The example agents of the server's examples directory, in file order; none when it
    was started without one. A file that does not parse is left out."""
    runtime = getattr(request.app.state, "runtime", None)
    directory: Path | None = runtime.settings.examples_dir if runtime is not None else None
    if directory is None:
        return JSON({"data": []})
    found = await asyncio.to_thread(_read, directory)
    for example in found:  # ${table:sales}: the id of the table this caller sees by that name
        example["document"] = await with_ids_for(ctx.svc.resources, ctx.who, example["document"])
    return JSON({"data": found})


def _read(directory: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if not directory.is_dir():
        return found
    for path in example_files(directory):
        try:
            doc = read_document(path)
        except Exception:  # reported when the server loaded it; here it is just not offered
            continue
        if isinstance(doc, dict):
            found.append({
                "file": path.name, "name": str(doc.get("name", path.stem)),
                "description": str(doc.get("description", "")),
                "mode": str(doc.get("mode", "react")), "document": doc,
            })  # fmt: skip
    return found
