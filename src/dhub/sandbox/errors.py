"""The sandbox's own failure, shared by the modules that start sandboxes."""

from __future__ import annotations


class SandboxUnavailable(Exception):
    """User code cannot be run safely here; the message says why and what to do."""


class HostRefused(Exception):
    """A function's knowledge call is refused (worker.py ``Host``): the message is what the
    function's ``KnowledgeError`` says."""
