"""What a rendered document can be turned into: Markdown to HTML (markdown-it-py, raw HTML in
the Markdown escaped, not passed through) and HTML to PDF (WeasyPrint, which fetches nothing:
images and stylesheets may only be ``data:`` URLs)."""

from __future__ import annotations

import html
import logging
from typing import Any

from markdown_it import MarkdownIt

# What a PDF page looks like unless the document's own <style> says otherwise.
_PAGE_CSS = "@page { size: A4; margin: 2cm } body { font-family: sans-serif; font-size: 11pt }"
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


def to_html(text: str, document_format: str, title: str = "") -> str:
    """A rendered document as an HTML page: Markdown converted, HTML as it is, text in <pre>."""
    if document_format == "html":
        return text
    body = (
        _MARKDOWN.render(text)
        if document_format == "markdown"
        else (f"<pre>{html.escape(text)}</pre>")
    )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head>\n<body>\n{body}</body></html>\n"
    )


class FetchRefused(Exception):
    """WeasyPrint asked for a URL: documents may only embed data: URLs."""


def _fetcher() -> Any:
    from weasyprint.urls import URLFetcher  # type: ignore[import-untyped]  # loads Pango

    class NoNetwork(URLFetcher):  # type: ignore[misc]
        """Fetches data: URLs only; anything else (http, file, ...) is refused."""

        def __init__(self) -> None:
            super().__init__(allowed_protocols=("data",), fail_on_errors=False)
            self.refused: list[str] = []

        def fetch(self, url: str, headers: Any = None) -> Any:
            if not url.lower().startswith("data:"):
                self.refused.append(url)
                raise FetchRefused(f"not fetched: {url[:200]}")
            return super().fetch(url, headers)

    return NoNetwork()


def to_pdf(text: str, document_format: str, title: str = "") -> bytes:
    """A rendered document as PDF. Runs for a while (seconds for long documents): call it in
    a worker thread."""
    import weasyprint  # type: ignore[import-untyped]

    logging.getLogger("weasyprint").setLevel(logging.ERROR)  # refused URLs warn otherwise
    page = to_html(text, document_format, title)
    fetcher = _fetcher()
    document = weasyprint.HTML(string=page, base_url="data:,", url_fetcher=fetcher)
    pdf: bytes = document.write_pdf(stylesheets=[weasyprint.CSS(string=_PAGE_CSS)])
    return pdf
