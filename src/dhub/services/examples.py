"""Load the example agents of a directory (JSON or YAML) on a fresh data directory."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import orjson
import yaml

from dhub.access.principal import Principal
from dhub.domain.errors import DhubError
from dhub.services.agents import AgentService

log = logging.getLogger("dhub.examples")
SUFFIXES = (".json", ".yaml", ".yml")


def read_document(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return orjson.loads(text)
    return yaml.safe_load(text)


def example_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in SUFFIXES)


async def load_examples(agents: AgentService, admin: Principal, directory: Path) -> int:
    loaded = 0
    for path in await asyncio.to_thread(example_files, directory):
        try:
            await agents.create(admin, await asyncio.to_thread(read_document, path))
            loaded += 1
        except (DhubError, ValueError, yaml.YAMLError) as exc:
            log.warning("example %s was not loaded: %s", path.name, exc)
    log.info("loaded %d example agents from %s", loaded, directory)
    return loaded
