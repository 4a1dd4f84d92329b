"""The API's own documentation at `/docs` (Swagger UI) and `/redoc` (ReDoc), rendered from
files served by this process (the fastapi-offline package ships them): FastAPI's defaults load
them from a CDN, which a server without internet, or a browser behind a strict proxy, cannot
reach."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/api-docs-assets"
# Only this server: the pages' inline start-up scripts and styles, and ReDoc's workers; ReDoc
# would otherwise fetch its vendor's logo from the internet.
_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'"
)


def install(app: FastAPI) -> None:
    """Needs an app made with ``docs_url=None, redoc_url=None``."""
    static = Path(str(files("fastapi_offline") / "static"))
    app.mount(ASSETS, StaticFiles(directory=static), name="api-docs-assets")
    title = f"{app.title} API"
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return _local(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=title,
                swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS}/favicon.png",
            )
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _local(
            get_redoc_html(
                openapi_url=openapi_url,
                title=title,
                redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = _POLICY
    return page
