"""Modules made importable inside the sandbox of tools with ``require_browser`` (browser.py);
the server never imports them."""
