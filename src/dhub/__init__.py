"""dhub: a self-hosted agent platform."""

__version__ = "0.1.0"
