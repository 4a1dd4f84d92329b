"""The console is served by the API process: its index at `/` (never cached), its assets
under `/assets/`, a page saying how to build it when it is not built; the examples the
server was started with are listed for applying."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from dhub.api import console
from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, ROOT


def test_the_built_console_is_served(tmp_path: Path) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text('<!doctype html><script src="./assets/app.js"></script>')
    (tmp_path / "assets" / "app.js").write_text("console.log('dhub')")
    app = FastAPI()
    console.install(app, tmp_path)
    with TestClient(app) as client:
        index = client.get("/")
        asset = client.get("/assets/app.js")
    assert index.status_code == 200 and "assets/app.js" in index.text
    assert index.headers["cache-control"] == "no-cache"
    assert asset.status_code == 200 and asset.text == "console.log('dhub')"


def test_an_unbuilt_console_says_how_to_build_it(tmp_path: Path) -> None:
    app = FastAPI()
    console.install(app, tmp_path / "nothing")
    with TestClient(app) as client:
        page = client.get("/")
    assert page.status_code == 200 and "make web" in page.text


def test_examples_are_listed_for_applying(settings: Settings) -> None:
    with_examples = Settings(**{**vars(settings), "examples_dir": ROOT / "examples"})
    with TestClient(create_app(with_examples)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        listed = client.get("/api/v1/examples").json()["data"]
        anonymous = client.get("/api/v1/examples", headers={"Authorization": ""})
    files = [e["file"] for e in listed]
    assert files == sorted(p.name for p in (ROOT / "examples").iterdir()
                           if p.suffix in (".json", ".yaml", ".yml"))  # fmt: skip
    triage = next(e for e in listed if e["file"] == "ticket_triage.json")
    assert triage["mode"] == "workflow" and triage["document"]["name"] == triage["name"]
    assert anonymous.status_code == 401


def test_no_examples_without_a_directory(client: TestClient) -> None:
    assert client.get("/api/v1/examples").json() == {"data": []}


def test_api_docs_load_nothing_from_outside(settings: Settings) -> None:
    """/docs and /redoc name only files this server serves (no CDN): every script, style and
    icon they load answers here."""
    with TestClient(create_app(settings)) as client:
        for page in ("/docs", "/redoc"):
            html = client.get(page)
            assert html.status_code == 200, page
            urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""", html.text)
            assert urls, page
            for url in urls:
                assert url.startswith("/"), f"{page} loads {url} from outside"
                assert client.get(url).status_code == 200, url
